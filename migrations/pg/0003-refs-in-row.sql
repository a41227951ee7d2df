-- uwf's store on PostgreSQL, schema version 3: the references of a node kept in its own row
-- (in schema order, derived from the payload at put time) instead of a table of edges, so that
-- a walk costs one index probe a node; and the walk itself as a function, its plan pinned to
-- index look-ups (right after a bulk load, before the statistics catch up, the planner would
-- otherwise scan whole tables at every level of the recursion).

ALTER TABLE uwf_nodes ADD COLUMN refs bigint[] NOT NULL DEFAULT '{}';

UPDATE uwf_nodes n SET refs = e.refs
FROM (SELECT src, array_agg(dst ORDER BY pos) AS refs FROM uwf_edges GROUP BY src) e
WHERE n.id = e.src;

DROP TABLE uwf_edges;

-- Everything `root` reaches, once each: (id, whether it is stored, its references). A
-- reference to a node that is not stored is returned as not present.
CREATE FUNCTION uwf_walk(root bigint)
RETURNS TABLE (id bigint, present boolean, refs bigint[])
LANGUAGE sql STABLE
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $$
    WITH RECURSIVE r(id, present, refs) AS (
        SELECT root, n.id IS NOT NULL, coalesce(n.refs, '{}')
        FROM (SELECT 1) s LEFT JOIN uwf_nodes n ON n.id = root
      UNION
        SELECT d.dst, n.id IS NOT NULL, coalesce(n.refs, '{}')
        FROM r CROSS JOIN LATERAL unnest(r.refs) AS d(dst)
             LEFT JOIN uwf_nodes n ON n.id = d.dst
    )
    SELECT id, present, refs FROM r
$$;

-- The chain of a thread ending at `head`: the node, then, while it is of type `step`, the node
-- its first reference names (a StepNode's `prev`, or for the first step its StartNode); at most
-- `lim` nodes, each with that first reference (`next`, where a reader goes on from). What it
-- returns is only read ahead: the reader checks each link itself.
CREATE FUNCTION uwf_chain(head bigint, step bigint, lim integer)
RETURNS TABLE (id bigint, type bigint, ts bigint, seq bigint, digest bytea, payload bytea,
               next bigint)
LANGUAGE sql STABLE
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $$
    WITH RECURSIVE c(id, type, ts, seq, digest, payload, refs, depth) AS (
        SELECT n.id, n.type, n.ts, n.seq, n.digest, n.payload, n.refs, 1
        FROM uwf_nodes n WHERE n.id = head
      UNION ALL
        SELECT n.id, n.type, n.ts, n.seq, n.digest, n.payload, n.refs, c.depth + 1
        FROM c JOIN uwf_nodes n ON n.id = c.refs[1]
        WHERE c.type = step AND c.depth < lim
    )
    SELECT id, type, ts, seq, digest, payload, refs[1] FROM c
$$;
