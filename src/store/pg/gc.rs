//! Garbage collection, pins, counts and compaction on a PostgreSQL server.
//!
//! The roots are redb's (see `gc.rs`): active and archived heads and workflows, registry names
//! and versions, every schema and the bootstrap nodes, pins, ids named by thread states'
//! errors, nodes first written at or after the cutoff (now less the grace, or the start of the
//! oldest step in progress when earlier). Marking runs inside the server: one recursive query
//! over `uwf_nodes.refs` fills a temporary table of the collection's session (`uwf_gc_live`)
//! in one `REPEATABLE READ` snapshot, and the candidates are the nodes of that snapshot it
//! leaves.
//!
//! Tables (`migrations/pg/0004-gc.sql`):
//! - `uwf_pins`: id → the time it was pinned (ms)
//! - `uwf_gc_owner`: `'owner'` → the [`Lease`] of the running collection
//! - `uwf_gc_touched`: ids put again while a collection runs (it clears them when it ends)
//!
//! One collection at a time: its session holds an advisory lock ([`GC_LOCK`]) that the server
//! releases with the connection, so a collection whose process died is taken over at once
//! (its `uwf_gc_owner` row and touched ids stay until then, as on redb).
//!
//! Sweeping goes in transactions of 4096 candidates, each under the exclusive transaction
//! lock [`SWEEP_LOCK`]; it first marks what changed since the snapshot (heads, archived
//! threads, registry entries, nodes written since the collection's write mark, with what they
//! reach), then deletes the candidates still unmarked, unpinned, untouched and stored under the
//! same sequence number. Every write transaction that relies on a stored node takes that lock
//! shared before it looks: a head move's check of what it adds, `Writer::has`, a pin, and a put
//! of an existing node while a collection runs (which records it in `uwf_gc_touched`). So a
//! sweep either sees such a transaction's writes, or the transaction sees the sweep's
//! deletions (a head move then fails as retryable, as on redb).
//!
//! The write mark is taken under `LOCK TABLE uwf_nodes IN SHARE MODE` in a transaction of its
//! own: every transaction that holds a sequence number below it has ended, so a node committed
//! after the snapshot has a sequence number at or past it.

use super::write::PgWriter;
use super::{GC_LOCK, Pg, SWEEP_LOCK, key, unkey};
use crate::cas::NodeId;
use crate::cas::bootstrap::{self, META};
use crate::store::error::{Result, StoreError};
use crate::store::node::StoredNode;
use crate::store::records::{HistoryEntry, Lease, RegistryEntry, ThreadRecord, ThreadState};
use crate::store::records::{dec, enc};
use crate::store::report::{Count, GcOptions, GcReport, ids_in_text};
use postgres::Client;
use postgres::types::{ToSql, Type};
use std::collections::HashSet;

/// Candidates per sweep transaction.
const BATCH: usize = 4096;

/// The live set of a collection's session.
const LIVE_TABLE: &str = "CREATE TEMP TABLE IF NOT EXISTS uwf_gc_live (id bigint PRIMARY KEY);
     TRUNCATE uwf_gc_live";

/// Marks the roots `$1`, every schema (type `$2`), the pins, the nodes first written at or
/// after `$3` and the nodes at or past the write mark `$4`, and everything they reach.
const MARK: &str = "INSERT INTO uwf_gc_live
    WITH RECURSIVE r(id) AS (
        SELECT s.id FROM (
            SELECT unnest($1::bigint[]) AS id
            UNION SELECT id FROM uwf_nodes WHERE type = $2
            UNION SELECT id FROM uwf_pins
            UNION SELECT id FROM uwf_nodes WHERE ts >= $3 OR seq >= $4
        ) s
      UNION
        SELECT d.dst FROM r JOIN uwf_nodes n ON n.id = r.id
             CROSS JOIN LATERAL unnest(n.refs) AS d(dst)
    )
    SELECT id FROM r";

/// Marks, during the sweep, the roots `$1`, the nodes at or past the write mark `$2`, the pinned
/// nodes and those put again since the collection began that are not marked yet, and what they
/// reach that is not.
const REMARK: &str = "INSERT INTO uwf_gc_live
    WITH RECURSIVE r(id) AS (
        SELECT s.id FROM (
            SELECT unnest($1::bigint[]) AS id
            UNION SELECT id FROM uwf_nodes WHERE seq >= $2
            UNION SELECT id FROM uwf_pins
            UNION SELECT id FROM uwf_gc_touched
        ) s
        WHERE NOT EXISTS (SELECT 1 FROM uwf_gc_live l WHERE l.id = s.id)
      UNION
        SELECT d.dst FROM r JOIN uwf_nodes n ON n.id = r.id
             CROSS JOIN LATERAL unnest(n.refs) AS d(dst)
        WHERE NOT EXISTS (SELECT 1 FROM uwf_gc_live l WHERE l.id = d.dst)
    )
    SELECT id FROM r ON CONFLICT DO NOTHING";

/// Deletes the candidates (`$1` ids, `$2` their sequence numbers) still garbage; returns their
/// payload sizes.
const SWEEP: &str = "DELETE FROM uwf_nodes n
    USING unnest($1::bigint[], $2::bigint[]) AS c(id, seq)
    WHERE n.id = c.id AND n.seq = c.seq
      AND NOT EXISTS (SELECT 1 FROM uwf_gc_live l WHERE l.id = n.id)
      AND NOT EXISTS (SELECT 1 FROM uwf_pins p WHERE p.id = n.id)
      AND NOT EXISTS (SELECT 1 FROM uwf_gc_touched t WHERE t.id = n.id)
    RETURNING octet_length(n.payload)";

/// uwf's tables, for compaction.
const TABLES: &str = "uwf_meta, uwf_nodes, uwf_threads, uwf_registry, uwf_registry_history, \
     uwf_history, uwf_leases, uwf_thread_state, uwf_removals, uwf_limits, uwf_pins, \
     uwf_gc_owner, uwf_gc_touched, uwf_usage_calls, uwf_usage, uwf_usage_days, uwf_budgets";

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Runs `sql` in the writer's transaction after taking [`SWEEP_LOCK`] shared (once a
/// transaction; both in one round trip); returns the first column of its last row (`None`
/// when it returns no row or a NULL).
fn checked(w: &mut PgWriter<'_>, sql: &str) -> Result<Option<String>> {
    // The walk reads nodes only.
    let (pg, c, locked) = w.node_parts()?;
    let sql = if locked.insert(SWEEP_LOCK) {
        format!("SELECT pg_advisory_xact_lock_shared({SWEEP_LOCK}); {sql}")
    } else {
        sql.to_string()
    };
    let msgs = c.simple_query(&sql).map_err(|e| pg.err(&e))?;
    Ok(super::write::last_row(msgs).and_then(|r| r.get(0).map(str::to_string)))
}

/// Whether node `id` is stored, for a write that relies on it.
pub(crate) fn has(w: &mut PgWriter<'_>, id: NodeId) -> Result<bool> {
    let k = key(id);
    let v = checked(
        w,
        &format!("SELECT EXISTS (SELECT 1 FROM uwf_nodes WHERE id = {k})"),
    )?;
    Ok(v.as_deref() == Some("t"))
}

/// The first node missing from what `$1` reaches, if any. The walk does not go past the nodes
/// of `$2` (checked, not walked) nor past present nodes other than `$1` whose type is in `$3`.
/// Each look-up is a `LATERAL` probe of the primary key, so no statistics make it scan.
const FIRST_MISSING: &str = "WITH RECURSIVE r(id, present, type, refs) AS (
        SELECT $1::bigint, n.id IS NOT NULL, n.type, coalesce(n.refs, '{}')
        FROM (SELECT 1) s LEFT JOIN LATERAL
             (SELECT m.id, m.type, m.refs FROM uwf_nodes m WHERE m.id = $1 LIMIT 1) n ON true
      UNION
        SELECT d.dst, n.id IS NOT NULL, n.type, coalesce(n.refs, '{}')
        FROM r CROSS JOIN LATERAL unnest(r.refs) AS d(dst)
             LEFT JOIN LATERAL
             (SELECT m.id, m.type, m.refs FROM uwf_nodes m WHERE m.id = d.dst LIMIT 1) n ON true
        WHERE r.present AND (r.id = $1 OR NOT (r.id = ANY($2) OR r.type = ANY($3)))
    )
    SELECT id FROM r WHERE NOT present LIMIT 1";

/// `Writer::first_missing` on a server, in one round trip.
pub(crate) fn first_missing(
    w: &mut PgWriter<'_>,
    from: NodeId,
    stop: &[NodeId],
    stop_types: &[NodeId],
) -> Result<Option<NodeId>> {
    let list = |ids: &[NodeId]| {
        ids.iter()
            .map(|&id| key(id).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let sql = FIRST_MISSING
        .replace("$1", &key(from).to_string())
        .replace("$2", &format!("'{{{}}}'::bigint[]", list(stop)))
        .replace("$3", &format!("'{{{}}}'::bigint[]", list(stop_types)));
    let v = checked(w, &sql)?;
    v.map(|s| {
        s.parse::<i64>()
            .map(unkey)
            .map_err(|_| StoreError::Internal(format!("not a node key: {s}")))
    })
    .transpose()
}

/// The roots the thread-layer tables name, read in one statement (one snapshot): active heads
/// and workflows, archived heads and workflows from history key `history_from` on, registry
/// names and versions, and the ids thread states' errors name.
fn table_roots(pg: &Pg, c: &mut Client, history_from: i64) -> Result<Vec<i64>> {
    let rows = c
        .query_typed(
            "SELECT 0, rec, 0::bigint FROM uwf_threads
             UNION ALL SELECT 1, rec, 0 FROM uwf_history WHERE seq >= $1
             UNION ALL SELECT 2, rec, 0 FROM uwf_registry_history
             UNION ALL SELECT 3, rec, 0 FROM uwf_thread_state
             UNION ALL SELECT 4, NULL, workflow FROM uwf_registry",
            &[(&history_from, Type::INT8)],
        )
        .map_err(|e| pg.err(&e))?;
    let mut roots = Vec::with_capacity(rows.len() * 2);
    for r in &rows {
        let kind: i32 = r.get(0);
        match kind {
            0 => {
                let t: ThreadRecord = dec(r.get(1))?;
                roots.push(key(t.head));
                roots.extend(t.workflow.map(key));
            }
            1 => {
                let h: HistoryEntry = dec(r.get(1))?;
                roots.extend(h.names().map(key));
            }
            2 => roots.push(key(dec::<RegistryEntry>(r.get(1))?.workflow)),
            3 => {
                let s: ThreadState = dec(r.get(1))?;
                if let Some(f) = &s.last_error {
                    roots.extend(ids_in_text(&f.message).map(|id| key(NodeId(id))));
                }
            }
            _ => roots.push(r.get(2)),
        }
    }
    Ok(roots)
}

/// What marking over one snapshot found.
struct Marked {
    /// Nodes in the snapshot.
    nodes: u64,
    /// Their payload bytes.
    bytes: u64,
    /// Of those, the marked ones.
    reachable: u64,
    /// Payload bytes of the others.
    garbage_bytes: u64,
    /// The others as (sequence number, key), in sequence order, when asked for.
    candidates: Vec<(i64, i64)>,
}

/// Marks over one snapshot, on the collection's session `c`, into its `uwf_gc_live`.
/// `cutoff_ms`: nodes first written at or after it are roots; with `live_lease`, it goes back
/// to the start of the oldest step in progress. `mark`: nodes at or past this sequence number
/// are roots (written after the collection's write mark).
fn mark(
    pg: &Pg,
    c: &mut Client,
    cutoff_ms: Option<u64>,
    live_lease: Option<&dyn Fn(&Lease) -> bool>,
    mark: Option<i64>,
    candidates: bool,
) -> Result<Marked> {
    let e = |e: postgres::Error| pg.err(&e);
    c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .map_err(e)?;
    let r = (|| -> Result<_> {
        let mut cutoff = cutoff_ms;
        if let (Some(cut), Some(is_live)) = (cutoff.as_mut(), live_lease) {
            for r in c
                .query(
                    "SELECT rec, (extract(epoch FROM expires_at - now()) * 1000)::int8 FROM uwf_leases",
                    &[],
                )
                .map_err(e)?
            {
                let l = super::lease_expiring(r.get(0), r.get(1))?;
                if is_live(&l) {
                    *cut = (*cut).min(l.since_ms);
                }
            }
        }
        let mut roots = table_roots(pg, c, 0)?;
        roots.push(key(META));
        roots.extend(bootstrap::builtins().iter().map(|b| key(b.id)));
        c.batch_execute(LIVE_TABLE).map_err(e)?;
        let cutoff = cutoff.map(i);
        let params: [&(dyn ToSql + Sync); 4] = [&roots, &key(META), &cutoff, &mark];
        c.execute(MARK, &params).map_err(e)?;
        c.batch_execute("ANALYZE uwf_gc_live").map_err(e)?;
        let s = c
            .query_one(
                "SELECT count(*), coalesce(sum(octet_length(n.payload)), 0)::bigint,
                        count(l.id),
                        coalesce(sum(octet_length(n.payload)) FILTER (WHERE l.id IS NULL), 0)::bigint
                 FROM uwf_nodes n LEFT JOIN uwf_gc_live l ON l.id = n.id",
                &[],
            )
            .map_err(e)?;
        let candidates = if candidates {
            c.query(
                "SELECT n.seq, n.id FROM uwf_nodes n
                 WHERE NOT EXISTS (SELECT 1 FROM uwf_gc_live l WHERE l.id = n.id)
                 ORDER BY n.seq",
                &[],
            )
            .map_err(e)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
        } else {
            Vec::new()
        };
        Ok(Marked {
            nodes: u(s.get(0)),
            bytes: u(s.get(1)),
            reachable: u(s.get(2)),
            garbage_bytes: u(s.get(3)),
            candidates,
        })
    })();
    let end = c
        .batch_execute(if r.is_ok() { "COMMIT" } else { "ROLLBACK" })
        .map_err(e);
    let r = r?;
    end?;
    Ok(r)
}

/// Drops the session's live set (the session goes back to the pool).
fn drop_live(c: &mut Client) {
    let _ = c.batch_execute("DROP TABLE IF EXISTS uwf_gc_live");
}

/// `Store::count` on a server.
pub(crate) fn count(pg: &Pg) -> Result<Count> {
    let mut conn = pg.conn()?;
    let c = conn.client();
    let m = mark(pg, c, None, None, None, false);
    drop_live(c);
    let m = m?;
    Ok(Count {
        nodes: m.nodes,
        bytes: m.bytes,
        reachable: m.reachable,
        garbage: m.nodes - m.reachable,
        garbage_bytes: m.garbage_bytes,
    })
}

/// `Store::gc` on a server; see the module documentation.
pub(crate) fn gc(pg: &Pg, opts: &GcOptions<'_>) -> Result<GcReport> {
    let cutoff = Some(opts.now_ms.saturating_sub(opts.grace_ms));
    let mut conn = pg.conn()?;
    let c = conn.client();
    let e = |e: postgres::Error| pg.err(&e);
    if opts.dry_run {
        let m = mark(pg, c, cutoff, Some(opts.owner_is_live), None, false);
        drop_live(c);
        let m = m?;
        let garbage = m.nodes - m.reachable;
        return Ok(GcReport {
            scanned: m.nodes,
            reachable: m.reachable,
            garbage,
            collected: garbage,
            bytes: m.garbage_bytes,
        });
    }
    let got: bool = c
        .query_one("SELECT pg_try_advisory_lock($1)", &[&GC_LOCK])
        .map_err(e)?
        .get(0);
    if !got {
        let pid = c
            .query_opt("SELECT rec FROM uwf_gc_owner WHERE key = 'owner'", &[])
            .map_err(e)?
            .map(|r| dec::<Lease>(r.get(0)))
            .transpose()?
            .map_or(0, |l| l.pid);
        return Err(StoreError::GcRunning { pid });
    }
    let r = (|| -> Result<_> {
        c.execute(
            "INSERT INTO uwf_gc_owner (key, rec) VALUES ('owner', $1)
             ON CONFLICT (key) DO UPDATE SET rec = EXCLUDED.rec",
            &[&enc(&opts.owner)],
        )
        .map_err(e)?;
        let r = run(pg, c, opts, cutoff);
        if r.is_err() {
            // A sweep's transaction may be open (and failed).
            let _ = c.batch_execute("ROLLBACK");
        }
        let end = c
            .batch_execute(
                "BEGIN; DELETE FROM uwf_gc_owner WHERE key = 'owner'; DELETE FROM uwf_gc_touched;
                 COMMIT",
            )
            .map_err(e);
        let r = r?;
        end?;
        Ok(r)
    })();
    if r.is_err() {
        let _ = c.batch_execute("ROLLBACK");
    }
    drop_live(c);
    let _ = c.execute("SELECT pg_advisory_unlock($1)", &[&GC_LOCK]);
    r
}

/// The collection proper, on its session `c`, its marks set.
fn run(pg: &Pg, c: &mut Client, opts: &GcOptions<'_>, cutoff: Option<u64>) -> Result<GcReport> {
    let e = |e: postgres::Error| pg.err(&e);
    let (write_mark, history_mark) = marks_on(pg, c, true)?;
    let m = mark(
        pg,
        c,
        cutoff,
        Some(opts.owner_is_live),
        Some(write_mark),
        true,
    )?;
    let mut report = GcReport {
        scanned: m.nodes,
        reachable: m.reachable,
        garbage: m.candidates.len() as u64,
        ..GcReport::default()
    };
    let total = m.candidates.len() as u64;
    (opts.progress)(0, total);
    let mut done = 0u64;
    for batch in m.candidates.chunks(BATCH) {
        c.batch_execute("BEGIN").map_err(e)?;
        c.execute("SELECT pg_advisory_xact_lock($1)", &[&SWEEP_LOCK])
            .map_err(e)?;
        let roots = table_roots(pg, c, history_mark)?;
        c.execute(REMARK, &[&roots, &write_mark]).map_err(e)?;
        let (seqs, ids): (Vec<i64>, Vec<i64>) = batch.iter().copied().unzip();
        let rows = c.query(SWEEP, &[&ids, &seqs]).map_err(e)?;
        c.batch_execute("COMMIT").map_err(e)?;
        report.collected += rows.len() as u64;
        report.bytes += rows
            .iter()
            .map(|r| u64::from(r.get::<_, i32>(0).unsigned_abs()))
            .sum::<u64>();
        done += batch.len() as u64;
        (opts.progress)(done, total);
    }
    Ok(report)
}

/// The write mark: a sequence number past every node stored so far, taken once every
/// transaction that holds a smaller one has ended.
fn write_mark_on(pg: &Pg, c: &mut Client) -> Result<i64> {
    Ok(marks_on(pg, c, false)?.0)
}

/// The write mark and, with `history`, the history mark too: the next history key, taken once
/// every transaction that holds a smaller one has ended (history keys are drawn when a row is
/// inserted, not when it commits), so that a snapshot taken after it holds every entry below it.
fn marks_on(pg: &Pg, c: &mut Client, history: bool) -> Result<(i64, i64)> {
    let e = |e: postgres::Error| pg.err(&e);
    c.batch_execute(if history {
        "BEGIN; LOCK TABLE uwf_nodes, uwf_history IN SHARE MODE"
    } else {
        "BEGIN; LOCK TABLE uwf_nodes IN SHARE MODE"
    })
    .map_err(e)?;
    let r = c.query_one(
        "SELECT coalesce((SELECT max(seq) FROM uwf_nodes), 0) + 1,
                coalesce((SELECT max(seq) FROM uwf_history), 0) + 1",
        &[],
    );
    let end = c.batch_execute(if r.is_ok() { "COMMIT" } else { "ROLLBACK" });
    let r = r.map_err(e)?;
    end.map_err(e)?;
    Ok((r.get(0), r.get(1)))
}

/// `Store::write_mark` on a server.
pub(crate) fn write_mark(pg: &Pg) -> Result<u64> {
    let mut conn = pg.conn()?;
    Ok(u(write_mark_on(pg, conn.client())?))
}

/// Takes [`SWEEP_LOCK`] shared in the writer's transaction, once.
fn lock_shared(w: &mut PgWriter<'_>) -> Result<()> {
    let (pg, c, locked) = w.parts()?;
    if locked.insert(SWEEP_LOCK) {
        c.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&SWEEP_LOCK])
            .map_err(|e| pg.err(&e))?;
    }
    Ok(())
}

/// `Store::pin` on a server, in the writer's transaction.
pub(crate) fn pin(w: &mut PgWriter<'_>, ids: &[NodeId], now_ms: u64) -> Result<Vec<bool>> {
    lock_shared(w)?;
    let (pg, c, _) = w.parts()?;
    let e = |e: postgres::Error| pg.err(&e);
    let keys: Vec<i64> = ids.iter().map(|&id| key(id)).collect();
    let stored: HashSet<i64> = c
        .query("SELECT id FROM uwf_nodes WHERE id = ANY($1)", &[&keys])
        .map_err(e)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if let Some(id) = ids.iter().find(|&&id| !stored.contains(&key(id))) {
        return Err(StoreError::NotFound(*id));
    }
    let mut pinned: HashSet<i64> = c
        .query("SELECT id FROM uwf_pins WHERE id = ANY($1)", &[&keys])
        .map_err(e)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    c.execute(
        "INSERT INTO uwf_pins (id, pinned_at) SELECT unnest($1::bigint[]), $2
         ON CONFLICT DO NOTHING",
        &[&keys, &i(now_ms)],
    )
    .map_err(e)?;
    Ok(keys.iter().map(|k| pinned.insert(*k)).collect())
}

/// `Store::unpin` on a server, in the writer's transaction.
pub(crate) fn unpin(w: &mut PgWriter<'_>, ids: &[NodeId]) -> Result<Vec<bool>> {
    let (pg, c, _) = w.parts()?;
    let keys: Vec<i64> = ids.iter().map(|&id| key(id)).collect();
    let mut removed: HashSet<i64> = c
        .query(
            "DELETE FROM uwf_pins WHERE id = ANY($1) RETURNING id",
            &[&keys],
        )
        .map_err(|e| pg.err(&e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(keys.iter().map(|k| removed.remove(k)).collect())
}

/// `Store::pins` on a server: (id, when pinned), in id order.
pub(crate) fn pins(pg: &Pg) -> Result<Vec<(NodeId, u64)>> {
    let mut conn = pg.conn()?;
    let rows = conn
        .client()
        .query("SELECT id, pinned_at FROM uwf_pins ORDER BY id", &[])
        .map_err(|e| pg.err(&e))?;
    Ok(rows
        .iter()
        .map(|r| (unkey(r.get(0)), u(r.get(1))))
        .collect())
}

/// Compaction on a server: `VACUUM (ANALYZE)` of uwf's tables, which makes the space of
/// removed rows reusable and updates the planner's statistics while steps go on.
pub(crate) fn vacuum(pg: &Pg) -> Result<()> {
    let mut conn = pg.conn()?;
    conn.client()
        .batch_execute(&format!("VACUUM (ANALYZE) {TABLES}"))
        .map_err(|e| pg.err(&e))
}

/// The bytes uwf's tables take on the server, their indexes and TOAST data included.
pub(crate) fn size_bytes(pg: &Pg) -> Result<u64> {
    let mut conn = pg.conn()?;
    let r = conn
        .client()
        .query_one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
             FROM pg_catalog.pg_class c
             WHERE c.relkind = 'r' AND c.relname LIKE 'uwf\\_%'
               AND c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace
                                     WHERE nspname = current_schema())",
            &[],
        )
        .map_err(|e| pg.err(&e))?;
    Ok(u(r.get(0)))
}

/// `Store::last_written_before` on a server: the stored node with the greatest sequence number
/// below `mark`.
pub(crate) fn last_written_before(pg: &Pg, mark: u64) -> Result<Option<(u64, NodeId)>> {
    let mut conn = pg.conn()?;
    let r = conn
        .client()
        .query_opt(
            "SELECT seq, id FROM uwf_nodes WHERE seq < $1 ORDER BY seq DESC LIMIT 1",
            &[&i(mark)],
        )
        .map_err(|e| pg.err(&e))?;
    Ok(r.map(|r| (u(r.get(0)), unkey(r.get(1)))))
}

/// `Store::for_each_node_written_between` on a server: the nodes whose sequence number is in
/// `from..until`, in write order, 8,192 rows a query.
pub(crate) fn for_each_node_written_between<E: From<StoreError>>(
    pg: &Pg,
    from: u64,
    until: u64,
    mut f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let (mut next, until) = (i(from), i(until));
    while next < until {
        let rows = {
            let mut conn = pg.conn()?;
            conn.client()
                .query(
                    "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                     WHERE seq >= $1 AND seq < $2 ORDER BY seq LIMIT 8192",
                    &[&next, &until],
                )
                .map_err(|e| pg.err(&e))?
        };
        let Some(last) = rows.last() else {
            return Ok(());
        };
        next = last.get::<_, i64>(3) + 1;
        for r in &rows {
            let id = unkey(r.get(0));
            f(StoredNode {
                id,
                type_id: unkey(r.get(1)),
                timestamp: u(r.get(2)),
                seq: u(r.get(3)),
                digest: r
                    .get::<_, &[u8]>(4)
                    .try_into()
                    .map_err(|_| StoreError::Corrupt(id))?,
                payload_cbor: r.get(5),
            })?;
        }
    }
    Ok(())
}

/// `Store::for_each_indexed` on a server: every (type, id), in type order, then write order.
pub(crate) fn for_each_indexed<E: From<StoreError>>(
    pg: &Pg,
    mut f: impl FnMut(NodeId, NodeId) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let rows = {
        let mut conn = pg.conn()?;
        conn.client()
            .query("SELECT type, id FROM uwf_nodes ORDER BY type, seq", &[])
            .map_err(|e| pg.err(&e))?
    };
    for r in &rows {
        f(unkey(r.get(0)), unkey(r.get(1)))?;
    }
    Ok(())
}
