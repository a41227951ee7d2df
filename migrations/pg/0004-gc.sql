-- uwf's store on PostgreSQL, schema version 4: pins, the marks of a running garbage
-- collection, and the check a head move makes that what it adds is still stored.

-- Nodes a collection keeps with what they reach: id → the time it was pinned (ms).
CREATE TABLE uwf_pins (
    id bigint PRIMARY KEY,
    pinned_at bigint NOT NULL
);

-- The running collection: one row (`key` 'owner') with the MessagePack lease record of its
-- process, set while it runs. Its process also holds a session advisory lock, which the server
-- releases when its connection ends: a row without that lock is a collection that died.
CREATE TABLE uwf_gc_owner (
    key text PRIMARY KEY,
    rec bytea NOT NULL
);

-- Existing nodes put again while a collection runs (cleared when it ends): it keeps them.
CREATE TABLE uwf_gc_touched (
    id bigint PRIMARY KEY
);

-- The first node missing from what `root` reaches, or NULL when all are stored. The walk does
-- not go past the nodes of `stop` (checked, not walked) nor past present nodes other than
-- `root` whose type is in `stop_types`. Its plan is pinned to index look-ups, as `uwf_walk`'s.
CREATE FUNCTION uwf_first_missing(root bigint, stop bigint[], stop_types bigint[])
RETURNS bigint
LANGUAGE sql STABLE
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $$
    WITH RECURSIVE r(id, present, type, refs) AS (
        SELECT root, n.id IS NOT NULL, n.type, coalesce(n.refs, '{}')
        FROM (SELECT 1) s LEFT JOIN uwf_nodes n ON n.id = root
      UNION
        SELECT d.dst, n.id IS NOT NULL, n.type, coalesce(n.refs, '{}')
        FROM r CROSS JOIN LATERAL unnest(r.refs) AS d(dst)
             LEFT JOIN uwf_nodes n ON n.id = d.dst
        WHERE r.present AND (r.id = root OR NOT (r.id = ANY(stop) OR r.type = ANY(stop_types)))
    )
    SELECT id FROM r WHERE NOT present LIMIT 1
$$;
