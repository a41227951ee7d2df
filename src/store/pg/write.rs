//! One write transaction on the server: [`PgWriter`].

use super::*;

/// The row the last statement of a simple query returned, if it returned one.
pub(crate) fn last_row(
    msgs: Vec<postgres::SimpleQueryMessage>,
) -> Option<postgres::SimpleQueryRow> {
    // The rows of each statement come before its completion.
    let (mut row, mut last) = (None, None);
    for m in msgs {
        match m {
            postgres::SimpleQueryMessage::Row(r) => row = Some(r),
            postgres::SimpleQueryMessage::CommandComplete(_) => last = row.take(),
            _ => {}
        }
    }
    last
}

/// A `bytea` literal for a simple query (which has no parameters): the hex of `b`, decoded by
/// the server, so nothing needs quoting whatever the server's string settings.
pub(super) fn bytea_literal(b: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2 + 20);
    s.push_str("decode('");
    for &x in b {
        s.push(char::from(HEX[usize::from(x >> 4)]));
        s.push(char::from(HEX[usize::from(x & 15)]));
    }
    s.push_str("', 'hex')");
    s
}

/// A `text` literal for a simple query: [`bytea_literal`] of its UTF-8 bytes, converted back.
pub(super) fn text_literal(t: &str) -> String {
    format!("convert_from({}, 'UTF8')", bytea_literal(t.as_bytes()))
}

/// The bytes of a `bytea` in the server's text form (`\x` and hex digits).
pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("\\x")?.as_bytes();
    if h.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    h.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The chain of a thread ending at `$1`: the node, then, while it is of type `$2` (a step),
/// the node its first reference names (a StepNode's `prev`, or for the first step its
/// StartNode); at most `$3` nodes, each with that first reference (where a reader goes on
/// from). What it returns is only read ahead: the reader checks each link itself. Each link
/// is a `LATERAL` look-up by the primary key (a subquery with `LIMIT` is never flattened into
/// a join), so the plan is index probes whatever the statistics say, and a prepared statement
/// is not planned again at each call.
pub(super) const CHAIN: &str =
    "WITH RECURSIVE c(id, type, ts, seq, digest, payload, refs, depth) AS (
        SELECT n.id, n.type, n.ts, n.seq, n.digest, n.payload, n.refs, 1
        FROM uwf_nodes n WHERE n.id = $1
      UNION ALL
        SELECT n.id, n.type, n.ts, n.seq, n.digest, n.payload, n.refs, c.depth + 1
        FROM c CROSS JOIN LATERAL
             (SELECT * FROM uwf_nodes m WHERE m.id = c.refs[1] LIMIT 1) n
        WHERE c.type = $2 AND c.depth < $3
    )
    SELECT type, ts, seq, digest, payload, id, refs[1] FROM c";

/// The advisory lock key of a thread or registry name.
pub(super) fn lock_key(kind: u8, name: &str) -> i64 {
    twox_hash::XxHash64::oneshot(u64::from(kind), name.as_bytes()) as i64
}

/// One write transaction on the server: see [`crate::store::Writer`].
pub(crate) struct PgWriter<'c> {
    pg: &'c Pg,
    /// The session; reached through [`PgWriter::s`], which opens the transaction first.
    sess: &'c mut Session,
    /// Whether `BEGIN` has gone out: it goes with the first statement.
    begun: bool,
    /// The nodes of small puts this transaction inserted, remembered by the process once it
    /// commits ([`Pg::get`] answers them without a round trip).
    written: Vec<StoredNode>,
    locked: HashSet<i64>,
    /// The rows of each thread this transaction locked, read in the lock's round trip and kept
    /// up to date by its writes.
    pre: HashMap<String, Pre>,
    /// The writes of threads' rows not sent yet.
    pending: Pending,
    /// Whether the sweep lock is to be taken shared with the transaction's next statement.
    hold_sweep: bool,
    done: bool,
    /// Whether a NOTIFY is due at commit: a thread started, moved, ended or changed state, or
    /// a lease was freed.
    notify: bool,
    /// The usage this transaction's steps add, written at commit: one upsert a row for all of
    /// them, however many steps a group commit holds.
    usage: Option<Box<UsageDeltas>>,
    /// The statements adding the transaction's steps per minute, sent with its `COMMIT`.
    minutes: Option<String>,
    /// Nodes read ahead ([`PgWriter::prefetch`]).
    ahead: Option<Box<ahead::Ahead>>,
    /// Inserts of nodes read ahead as absent, sent with the commit.
    deferred: ahead::Deferred,
}

#[path = "write_usage.rs"]
mod usage;

#[path = "write_rows.rs"]
mod rows;

#[path = "write_ahead.rs"]
mod ahead;
use rows::{Pending, Pre, pre_of, thread_rows};

/// A row of the threads' aggregate: (thread, day, role, model).
type ThreadDay = (String, u32, String, String);

/// Usage added in one transaction, by aggregate row.
#[derive(Default)]
struct UsageDeltas {
    /// The server's UTC day, read once.
    today: Option<u32>,
    /// (thread, day, role, model) → (workflow, totals).
    threads: HashMap<ThreadDay, (Option<i64>, UsageTotals)>,
    /// (workflow name, day) → totals.
    days: HashMap<(String, u32), UsageTotals>,
}

/// The statements of a table of records keyed by name.
struct ByName {
    select: &'static str,
    upsert: &'static str,
    delete: &'static str,
}

const LIMITS_BY_NAME: ByName = ByName {
    select: "SELECT rec FROM uwf_limits WHERE name = $1",
    upsert: "INSERT INTO uwf_limits (name, rec) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET rec = EXCLUDED.rec",
    delete: "DELETE FROM uwf_limits WHERE name = $1",
};

const BUDGETS_BY_NAME: ByName = ByName {
    select: "SELECT rec FROM uwf_budgets WHERE name = $1",
    upsert: "INSERT INTO uwf_budgets (name, rec) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET rec = EXCLUDED.rec",
    delete: "DELETE FROM uwf_budgets WHERE name = $1",
};

impl Drop for PgWriter<'_> {
    fn drop(&mut self) {
        if self.begun && !self.done {
            let _ = self.sess.client.batch_execute("ROLLBACK");
            // A temporary table created in this transaction is gone with it.
            self.sess.staging = false;
        }
    }
}

impl<'c> PgWriter<'c> {
    /// A transaction on `s`. Its `BEGIN` goes out with its first statement (in the same round
    /// trip when that is an advisory lock), and a transaction that ran none sends nothing.
    pub(crate) fn begin(pg: &'c Pg, s: &'c mut Session) -> Result<PgWriter<'c>> {
        Ok(PgWriter {
            pg,
            sess: s,
            begun: false,
            written: Vec::new(),
            locked: HashSet::new(),
            pre: HashMap::new(),
            pending: Pending::default(),
            hold_sweep: false,
            done: false,
            notify: false,
            usage: None,
            minutes: None,
            ahead: None,
            deferred: ahead::Deferred::default(),
        })
    }

    /// The session, inside the transaction, with the pending writes sent.
    pub(crate) fn s(&mut self) -> Result<&mut Session> {
        if !self.pending.is_empty() {
            let sql = self.pending.sql();
            self.pending = Pending::default();
            self.raw()?
                .client
                .batch_execute(&sql)
                .map_err(|e| self.pg.err(&e))?;
        }
        self.raw()
    }

    /// Holds the nodes present from now until the transaction ends: [`SWEEP_LOCK`] shared,
    /// taken with the next statement (in the round trip of a thread's lock, when that comes
    /// next).
    pub(crate) fn hold_nodes(&mut self) {
        if !self.locked.contains(&SWEEP_LOCK) {
            self.hold_sweep = true;
        }
    }

    /// The session, inside the transaction, for a statement that reads no thread's rows: the
    /// pending writes stay pending.
    pub(crate) fn raw(&mut self) -> Result<&mut Session> {
        self.flush_deferred()?;
        if self.hold_sweep {
            self.hold_sweep = false;
            self.locked.insert(SWEEP_LOCK);
            let begin = if self.begun { "" } else { "BEGIN; " };
            self.begun = true;
            self.sess
                .client
                .batch_execute(&format!(
                    "{begin}SELECT pg_advisory_xact_lock_shared({SWEEP_LOCK})"
                ))
                .map_err(|e| self.pg.err(&e))?;
        }
        if !self.begun {
            self.sess
                .client
                .batch_execute("BEGIN")
                .map_err(|e| self.pg.err(&e))?;
            self.begun = true;
        }
        Ok(self.sess)
    }

    pub(crate) fn commit(mut self) -> Result<()> {
        if !self.begun {
            self.done = true;
            return Ok(());
        }
        if let Some(u) = self.usage.take() {
            self.flush_usage(&u)?;
        }
        let notify = if self.notify {
            "NOTIFY uwf_threads; "
        } else {
            ""
        };
        // The pending writes and the steps per minute go in the same round trip.
        let pending = if self.pending.is_empty() {
            String::new()
        } else {
            format!("{};\n", std::mem::take(&mut self.pending).sql())
        };
        // The deferred inserts of nodes first: they return what the process remembers.
        let end = format!(
            "{}{pending}{}{notify}COMMIT",
            self.deferred_sql(),
            self.minutes.take().unwrap_or_default()
        );
        // Failed (a NOTIFY cancelled, say), the transaction is rolled back when the writer drops.
        let msgs = self
            .sess
            .client
            .simple_query(&end)
            .map_err(|e| self.pg.err(&e))?;
        self.done = true;
        if !self.deferred.is_empty() {
            let first = ahead::statements(msgs)
                .into_iter()
                .next()
                .unwrap_or_default();
            self.deferred_done(&first);
        }
        self.pg.remember(std::mem::take(&mut self.written));
        Ok(())
    }

    fn e(&self) -> impl Fn(postgres::Error) -> StoreError + '_ {
        |e| self.pg.err(&e)
    }

    /// What the transaction knows of thread `id`'s rows.
    fn pre_of(&self, id: &ThreadId) -> Option<&Pre> {
        self.pre.get(id.as_str())
    }

    /// What the transaction knows of thread `id`'s rows, to be changed by a write of its own.
    fn pre_mut(&mut self, id: &ThreadId) -> &mut Pre {
        self.pre.entry(id.as_str().to_string()).or_default()
    }

    /// Takes the transaction's advisory lock of `name` once.
    fn lock(&mut self, kind: u8, name: &str) -> Result<()> {
        let k = lock_key(kind, name);
        if !self.locked.insert(k) {
            return Ok(());
        }
        // One round trip for the lock and, for a thread's, its record, lease and state (and
        // `BEGIN` when this is the transaction's first statement; begun even if the lock fails:
        // the BEGIN went through, and dropping the writer rolls it back). The key is a number,
        // written as one.
        let mut sql = format!("SELECT pg_advisory_xact_lock({k})");
        if self.hold_sweep {
            self.hold_sweep = false;
            self.locked.insert(SWEEP_LOCK);
            sql = format!("{sql}; SELECT pg_advisory_xact_lock_shared({SWEEP_LOCK})");
        }
        if !self.begun {
            sql = format!("BEGIN; {sql}");
            self.begun = true;
        }
        if kind == 0 {
            sql = format!("{sql}; {}", thread_rows(name));
        }
        let msgs = self
            .sess
            .client
            .simple_query(&sql)
            .map_err(|e| self.pg.err(&e))?;
        if kind == 0
            && let Some(p) = last_row(msgs).as_ref().and_then(|r| pre_of(r, 0))
        {
            self.pre.insert(name.to_string(), p);
        }
        Ok(())
    }

    /// Puts nodes with their timestamps; see [`crate::store::Store::put`].
    // Long: one statement sequence a batch (insert, check the existing, COPY for large ones), kept
    // together so its round trips read in order.
    pub(crate) fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(out) = self.put_ahead(items)? {
            return Ok(out);
        }
        let mut out = vec![PutOutcome::Existed; items.len()];
        // The first of each id in the batch; a repeat must have the same bytes.
        let mut first: HashMap<u64, usize> = HashMap::with_capacity(items.len());
        for (n, (p, _)) in items.iter().enumerate() {
            match first.get(&p.id.0) {
                Some(&f) if items[f].0.digest != p.digest => {
                    return Err(StoreError::HashCollision(p.id));
                }
                Some(_) => {}
                None => {
                    first.insert(p.id.0, n);
                }
            }
        }
        // Each id once, in the order given: inserted unless stored, then what was stored is
        // checked (same bytes, earliest timestamp).
        let fresh: Vec<usize> = (0..items.len())
            .filter(|&n| first[&items[n].0.id.0] == n)
            .collect();
        let col = |f: &dyn Fn(&Prepared, u64) -> i64| -> Vec<i64> {
            fresh.iter().map(|&n| f(items[n].0, items[n].1)).collect()
        };
        let (id, ty, ts) = (
            col(&|p, _| key(p.id)),
            col(&|p, _| key(p.type_id)),
            col(&|_, t| i(t)),
        );
        let digest: Vec<&[u8]> = fresh.iter().map(|&n| &items[n].0.digest[..]).collect();
        let payload: Vec<&[u8]> = fresh
            .iter()
            .map(|&n| items[n].0.payload_cbor.as_slice())
            .collect();
        let refs: Vec<Vec<i64>> = fresh
            .iter()
            .map(|&n| items[n].0.refs.iter().map(|&r| key(r)).collect())
            .collect();
        // Rows in the order given (their sequence numbers are write order); an id another
        // transaction wrote meanwhile is left to it and checked below. A large batch goes
        // through COPY (binary) into a temporary table first.
        let inserted = if fresh.len() >= COPY_FROM {
            self.copy_rows(&id, &ty, &ts, &digest, &payload, &refs)?
        } else {
            // The references of all rows in one array, each row's as a slice `lo..=hi`
            // (1-based; `lo > hi` is an empty slice).
            let (mut flat, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
            for r in &refs {
                lo.push(flat.len() as i32 + 1);
                flat.extend_from_slice(r);
                hi.push(flat.len() as i32);
            }
            self.raw()?
                .query(
                    "INSERT INTO uwf_nodes (id, type, ts, digest, payload, refs)
                     SELECT id, type, ts, digest, payload, ($6::bigint[])[lo:hi]
                     FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bytea[], $5::bytea[],
                                 $7::int[], $8::int[])
                          WITH ORDINALITY AS t(id, type, ts, digest, payload, lo, hi, o)
                     ORDER BY o
                     ON CONFLICT (id) DO NOTHING
                     RETURNING id, seq",
                    &[&id, &ty, &ts, &digest, &payload, &flat, &lo, &hi],
                )
                .map_err(self.e())?
        };
        let inserted: HashMap<i64, i64> = inserted.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut stored = Vec::new();
        for &n in &fresh {
            if inserted.contains_key(&key(items[n].0.id)) {
                out[n] = PutOutcome::Inserted;
            } else {
                stored.push(key(items[n].0.id));
            }
        }
        if fresh.len() <= REMEMBER_BATCH {
            for &n in &fresh {
                let (p, ts) = items[n];
                if let Some(&seq) = inserted.get(&key(p.id)) {
                    self.written.push(StoredNode {
                        id: p.id,
                        type_id: p.type_id,
                        timestamp: ts,
                        seq: u(seq),
                        digest: p.digest,
                        payload_cbor: p.payload_cbor.clone(),
                    });
                }
            }
        }
        if stored.is_empty() {
            return Ok(out);
        }
        // With whether a collection is running (`uwf_gc_owner`), for the nodes put again.
        let rows = self
            .s()?
            .query(
                "SELECT id, digest, ts, EXISTS (SELECT 1 FROM uwf_gc_owner)
                 FROM uwf_nodes WHERE id = ANY($1)",
                &[&stored],
            )
            .map_err(self.e())?;
        let mut earlier: Vec<(i64, i64)> = Vec::new();
        let mut seen: HashSet<i64> = HashSet::with_capacity(rows.len());
        for r in &rows {
            let id = unkey(r.get(0));
            let n = first[&id.0];
            let d: &[u8] = r.get(1);
            if d != items[n].0.digest {
                return Err(StoreError::HashCollision(id));
            }
            if items[n].1 < u(r.get(2)) {
                earlier.push((key(id), i(items[n].1)));
            }
            seen.insert(key(id));
        }
        // A node stored when the insert ran and gone since was removed by a running collection.
        let gc_running = rows.first().is_none_or(|r| r.get::<_, bool>(3));
        if gc_running || seen.len() < stored.len() {
            // Kept by the running collection from now on; one it removed meanwhile is put anew
            // (under the lock `touch` takes, no sweep removes it again before this commits).
            let pg = self.pg;
            let kept = touch(pg, &mut self.raw()?.client, &stored)?;
            let again: Vec<usize> = fresh
                .iter()
                .copied()
                .filter(|&n| out[n] != PutOutcome::Inserted && !kept.contains(&key(items[n].0.id)))
                .collect();
            if !again.is_empty() {
                let retry: Vec<(&Prepared, u64)> = again.iter().map(|&n| items[n]).collect();
                for (n, o) in again.iter().zip(self.put(&retry)?) {
                    out[*n] = o;
                }
            }
        }
        for (k, ts) in earlier {
            // What this process remembers of the node is its old time: forgotten.
            self.pg
                .written
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&unkey(k));
            self.written.retain(|n| n.id != unkey(k));
            self.raw()?
                .execute(
                    "UPDATE uwf_nodes SET ts = $2 WHERE id = $1 AND ts > $2",
                    &[&k, &ts],
                )
                .map_err(self.e())?;
        }
        Ok(out)
    }

    /// Inserts rows through `COPY … FROM STDIN BINARY` into a temporary table of the session,
    /// then into `uwf_nodes` with sequence numbers in their order, skipping ids present;
    /// returns the inserted ids with their sequence numbers.
    fn copy_rows(
        &mut self,
        id: &[i64],
        ty: &[i64],
        ts: &[i64],
        digest: &[&[u8]],
        payload: &[&[u8]],
        refs: &[Vec<i64>],
    ) -> Result<Vec<postgres::Row>> {
        use postgres::types::Type;
        let pg = self.pg;
        if !self.raw()?.staging {
            self.raw()?
                .client
                .batch_execute(
                    "CREATE TEMP TABLE IF NOT EXISTS uwf_staging (
                        seq bigint, id bigint, type bigint, ts bigint, digest bytea, payload bytea,
                        refs bigint[]
                     ) ON COMMIT DELETE ROWS",
                )
                .map_err(|e| pg.err(&e))?;
            self.raw()?.staging = true;
        }
        // The rows' sequence numbers, in the order given, taken first: the insert below then
        // needs no sort of whole rows. The table's write lock comes before them, as it does
        // for an INSERT drawing its own, so that a write mark (`LOCK … IN SHARE MODE`) waits
        // for this transaction.
        self.raw()?
            .client
            .batch_execute("LOCK TABLE uwf_nodes IN ROW EXCLUSIVE MODE")
            .map_err(|e| pg.err(&e))?;
        let n = i64::try_from(id.len()).unwrap_or(i64::MAX);
        let seqs: Vec<i64> = self
            .s()?
            .query(
                "SELECT nextval('uwf_node_seq') FROM generate_series(1, $1::bigint)",
                &[&n],
            )
            .map_err(self.e())?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let sink = self
            .s()?
            .client
            .copy_in(
                "COPY uwf_staging (seq, id, type, ts, digest, payload, refs) FROM STDIN BINARY",
            )
            .map_err(|e| pg.err(&e))?;
        let mut w = postgres::binary_copy::BinaryCopyInWriter::new(
            sink,
            &[
                Type::INT8,
                Type::INT8,
                Type::INT8,
                Type::INT8,
                Type::BYTEA,
                Type::BYTEA,
                Type::INT8_ARRAY,
            ],
        );
        for k in 0..id.len() {
            w.write(&[
                &seqs[k],
                &id[k],
                &ty[k],
                &ts[k],
                &digest[k],
                &payload[k],
                &refs[k],
            ])
            .map_err(|e| pg.err(&e))?;
        }
        w.finish().map_err(|e| pg.err(&e))?;
        let rows = self
            .s()?
            .query(
                "INSERT INTO uwf_nodes (id, seq, type, ts, digest, payload, refs)
                 SELECT id, seq, type, ts, digest, payload, refs FROM uwf_staging
                 ON CONFLICT (id) DO NOTHING
                 RETURNING id, seq",
                &[],
            )
            .map_err(self.e())?;
        self.raw()?
            .execute("TRUNCATE uwf_staging", &[])
            .map_err(self.e())?;
        Ok(rows)
    }

    pub(crate) fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        self.lock(1, name)?;
        let r = self
            .s()?
            .opt(
                "SELECT workflow FROM uwf_registry WHERE name = $1",
                &[&name],
            )
            .map_err(self.e())?;
        Ok(r.map(|r| unkey(r.get(0))))
    }

    pub(crate) fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        self.lock(1, name)?;
        self.s()?
            .execute(
                "INSERT INTO uwf_registry (name, workflow) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET workflow = EXCLUDED.workflow",
                &[&name, &key(workflow)],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        self.s()?
            .execute(
                "INSERT INTO uwf_registry_history (name, rec) VALUES ($1, $2)",
                &[&name, &enc(e)],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn registry_versions(&mut self, name: &str) -> Result<Vec<RegistryEntry>> {
        let rows = self
            .s()?
            .query(
                "SELECT rec FROM uwf_registry_history WHERE name = $1 ORDER BY seq",
                &[&name],
            )
            .map_err(self.e())?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    pub(crate) fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        Ok(self
            .s()?
            .opt(
                "SELECT 1 FROM uwf_registry_history WHERE name = $1 LIMIT 1",
                &[&name],
            )
            .map_err(self.e())?
            .is_some())
    }

    pub(crate) fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        self.lock(1, name)?;
        let had = self
            .s()?
            .execute("DELETE FROM uwf_registry WHERE name = $1", &[&name])
            .map_err(self.e())?
            > 0;
        if purge {
            self.s()?
                .execute("DELETE FROM uwf_registry_history WHERE name = $1", &[&name])
                .map_err(self.e())?;
        }
        Ok(had)
    }

    pub(crate) fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        self.s()?
            .execute(
                "INSERT INTO uwf_history (thread, rec) VALUES ($1, $2)",
                &[&e.thread, &enc(e)],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        let n = self
            .s()?
            .execute("DELETE FROM uwf_history WHERE thread = $1", &[&id.as_str()])
            .map_err(self.e())?;
        Ok(n as usize)
    }

    /// The history entries of thread `thread`, oldest first; only the latest with `latest`.
    pub(crate) fn history_entries_of(
        &mut self,
        thread: &str,
        latest: bool,
    ) -> Result<Vec<HistoryEntry>> {
        let sql = if latest {
            "SELECT rec FROM uwf_history WHERE thread = $1 ORDER BY seq DESC LIMIT 1"
        } else {
            "SELECT rec FROM uwf_history WHERE thread = $1 ORDER BY seq"
        };
        let rows = self.s()?.query(sql, &[&thread]).map_err(self.e())?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    pub(crate) fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        self.set_by_name(&LIMITS_BY_NAME, name, limits)
    }

    /// Sets (`Some`) or removes (`None`) the record `name` of the table `t` names (locking the
    /// name); returns the old one.
    fn set_by_name<T: Record>(
        &mut self,
        t: &ByName,
        name: &str,
        rec: Option<&T>,
    ) -> Result<Option<T>> {
        self.lock(2, name)?;
        let old = self.s()?.opt(t.select, &[&name]).map_err(self.e())?;
        match rec {
            Some(r) => self.s()?.execute(t.upsert, &[&name, &enc(r)]),
            None => self.s()?.execute(t.delete, &[&name]),
        }
        .map_err(self.e())?;
        old.map(|r| dec(r.get(0))).transpose()
    }

    pub(crate) fn lock_workflow(&mut self, key: &str) -> Result<()> {
        self.lock(3, key)
    }

    pub(crate) fn record_removal(&mut self, r: &Removal) -> Result<()> {
        self.s()?
            .execute("INSERT INTO uwf_removals (rec) VALUES ($1)", &[&enc(r)])
            .map_err(self.e())?;
        Ok(())
    }
}

/// What garbage collection, pins and counts (`pg_gc`) reach of a session and a transaction.
impl Session {
    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl PgWriter<'_> {
    /// The server, the transaction's client (the transaction begun) and the advisory lock
    /// keys it holds.
    pub(crate) fn parts(&mut self) -> Result<(&Pg, &mut Client, &mut HashSet<i64>)> {
        self.s()?;
        Ok((self.pg, &mut self.sess.client, &mut self.locked))
    }

    /// [`PgWriter::parts`] for statements that read nodes only: the pending writes of threads'
    /// rows stay pending.
    pub(crate) fn node_parts(&mut self) -> Result<(&Pg, &mut Client, &mut HashSet<i64>)> {
        self.raw()?;
        Ok((self.pg, &mut self.sess.client, &mut self.locked))
    }
}

/// Records `ids` (stored keys, existing nodes a put found) as put again while a collection
/// runs, inside the put's transaction, after waiting out a sweep in progress. Returns the keys
/// still stored: a sweep may have removed some since the put looked.
pub(crate) fn touch(pg: &Pg, c: &mut Client, ids: &[i64]) -> Result<HashSet<i64>> {
    c.query_typed(
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[(&SWEEP_LOCK, Type::INT8)],
    )
    .map_err(|e| pg.err(&e))?;
    let rows = c
        .query_typed(
            "WITH p AS (SELECT id FROM uwf_nodes WHERE id = ANY($1)),
                  t AS (INSERT INTO uwf_gc_touched (id)
                        SELECT id FROM p WHERE EXISTS (SELECT 1 FROM uwf_gc_owner)
                        ON CONFLICT DO NOTHING)
             SELECT id FROM p",
            &[(&ids, Type::INT8_ARRAY)],
        )
        .map_err(|e| pg.err(&e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
