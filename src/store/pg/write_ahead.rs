//! What a write transaction on the server reads ahead for a group commit, in one round trip:
//! the locks and rows of its threads, and whether the nodes its writes put are stored. Puts of
//! nodes read ahead ask nothing more: those stored are checked against what was read, and the
//! inserts of the others wait for the commit and go in its round trip.

use super::rows::{many_thread_rows, pre_of};
use super::*;

/// Nodes a transaction read ahead, under the sweep lock held shared (a node present then stays
/// present until the commit): each id's stored digest and time, or `None` where none was
/// stored; the inserts this transaction made of them count as stored.
#[derive(Default)]
pub(super) struct Ahead {
    nodes: HashMap<i64, Option<([u8; 32], u64)>>,
    /// A collection was running: puts take the path that tells it which nodes they put again.
    gc_running: bool,
}

/// Inserts of nodes read ahead as absent, waiting for the commit (or for the transaction's
/// next statement), in the order they were put.
#[derive(Default)]
pub(super) struct Deferred {
    rows: Vec<StoredNode>,
    refs: Vec<Vec<i64>>,
    /// Where each id is in `rows`.
    at: HashMap<i64, usize>,
}

impl Deferred {
    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The statement inserting them, in their order (the sequence numbers follow it); one
    /// another transaction stored meanwhile is left as it is, but for an earlier time of the
    /// same bytes. It returns the ids it wrote with their sequence numbers.
    fn sql(&self) -> String {
        let mut sql =
            String::from("INSERT INTO uwf_nodes (id, type, ts, digest, payload, refs) VALUES ");
        for (n, (r, refs)) in self.rows.iter().zip(&self.refs).enumerate() {
            if n > 0 {
                sql.push_str(",\n");
            }
            let refs: Vec<String> = refs.iter().map(i64::to_string).collect();
            sql.push_str(&format!(
                "({}, {}, {}, {}, {}, ARRAY[{}]::bigint[])",
                key(r.id),
                key(r.type_id),
                i(r.timestamp),
                bytea_literal(&r.digest),
                bytea_literal(&r.payload_cbor),
                refs.join(",")
            ));
        }
        sql.push_str(
            "\nON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts
             WHERE uwf_nodes.ts > EXCLUDED.ts AND uwf_nodes.digest = EXCLUDED.digest
             RETURNING id, seq",
        );
        sql
    }
}

/// The results of each statement of a simple query, in order: the rows of each (empty for a
/// statement that returns none).
pub(super) fn statements(
    msgs: Vec<postgres::SimpleQueryMessage>,
) -> Vec<Vec<postgres::SimpleQueryRow>> {
    let (mut out, mut rows) = (Vec::new(), Vec::new());
    for m in msgs {
        match m {
            postgres::SimpleQueryMessage::Row(r) => rows.push(r),
            postgres::SimpleQueryMessage::CommandComplete(_) => {
                out.push(std::mem::take(&mut rows));
            }
            _ => {}
        }
    }
    out
}

/// The node `(id, digest, ts)` of a row read ahead.
fn node_row(r: &postgres::SimpleQueryRow) -> Option<(i64, [u8; 32], u64)> {
    let id = r.get(0)?.parse().ok()?;
    let digest = unhex(r.get(1)?)?.try_into().ok()?;
    let ts = r.get(2)?.parse().ok()?;
    Some((id, digest, ts))
}

impl PgWriter<'_> {
    /// Takes the locks of threads `ids` this transaction does not hold yet, in the order of
    /// their keys (one order for every transaction: no deadlock between two that lock several),
    /// and reads their rows; with `nodes`, takes the sweep lock shared and reads whether they
    /// are stored. One round trip (with `BEGIN`).
    // Long: one simple query built statement by statement, then its results read in that order.
    pub(crate) fn prefetch(&mut self, ids: &[ThreadId], nodes: &[NodeId]) -> Result<()> {
        self.flush_deferred()?;
        let mut keys: Vec<(i64, &str)> = ids
            .iter()
            .map(|t| (lock_key(0, t.as_str()), t.as_str()))
            .filter(|(k, _)| !self.locked.contains(k))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut wanted: Vec<i64> = nodes
            .iter()
            .map(|&n| key(n))
            .filter(|k| self.ahead.as_ref().is_none_or(|a| !a.nodes.contains_key(k)))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        if keys.is_empty() && wanted.is_empty() {
            return Ok(());
        }
        // The statements, and which of them returns what is read ahead.
        let mut sql: Vec<String> = Vec::new();
        if !self.begun {
            sql.push("BEGIN".into());
        }
        // A target list is evaluated in order: the locks are taken in the keys' order.
        for chunk in keys.chunks(1000) {
            let locks: Vec<String> = chunk
                .iter()
                .map(|(k, _)| format!("pg_advisory_xact_lock({k})"))
                .collect();
            sql.push(format!("SELECT {}", locks.join(", ")));
        }
        let hold = !wanted.is_empty() || self.hold_sweep;
        if hold && !self.locked.contains(&SWEEP_LOCK) {
            sql.push(format!("SELECT pg_advisory_xact_lock_shared({SWEEP_LOCK})"));
        }
        let thread_rows = (!keys.is_empty()).then(|| {
            let names: Vec<&str> = keys.iter().map(|(_, t)| *t).collect();
            sql.push(many_thread_rows(&names));
            sql.len() - 1
        });
        let node_rows = (!wanted.is_empty()).then(|| {
            let list: Vec<String> = wanted.iter().map(i64::to_string).collect();
            sql.push(format!(
                "SELECT id, digest, ts FROM uwf_nodes WHERE id = ANY(ARRAY[{}]::bigint[])",
                list.join(",")
            ));
            sql.push("SELECT EXISTS (SELECT 1 FROM uwf_gc_owner)".into());
            sql.len() - 2
        });
        self.begun = true;
        let msgs = self
            .sess
            .client
            .simple_query(&sql.join("; "))
            .map_err(|e| self.pg.err(&e))?;
        for (k, _) in &keys {
            self.locked.insert(*k);
        }
        if hold {
            self.hold_sweep = false;
            self.locked.insert(SWEEP_LOCK);
        }
        let results = statements(msgs);
        let rows_of = |n: Option<usize>| n.and_then(|n| results.get(n));
        for r in rows_of(thread_rows).into_iter().flatten() {
            if let (Some(id), Some(p)) = (r.get(0), pre_of(r, 1)) {
                self.pre.insert(id.to_string(), p);
            }
        }
        if let Some(n) = node_rows {
            let bad = || StoreError::Internal("a node read ahead came back unreadable".into());
            let ahead = self.ahead.get_or_insert_with(Box::default);
            let mut found: HashMap<i64, ([u8; 32], u64)> = HashMap::new();
            for r in results.get(n).into_iter().flatten() {
                let (id, digest, ts) = node_row(r).ok_or_else(bad)?;
                found.insert(id, (digest, ts));
            }
            for k in wanted {
                ahead.nodes.insert(k, found.remove(&k));
            }
            let running = results
                .get(n + 1)
                .and_then(|rows| rows.first())
                .and_then(|r| r.get(0))
                .ok_or_else(bad)?;
            ahead.gc_running |= running != "f";
        }
        Ok(())
    }

    /// [`PgWriter::put`] of nodes all read ahead, while no collection runs: no round trip (those
    /// not stored are inserted with the commit). `None` when that is not so.
    pub(super) fn put_ahead(
        &mut self,
        items: &[(&Prepared, u64)],
    ) -> Result<Option<Vec<PutOutcome>>> {
        let Some(ahead) = self.ahead.as_deref_mut() else {
            return Ok(None);
        };
        if ahead.gc_running {
            return Ok(None);
        }
        // All read ahead, and none stored with a later time than this put's (a put that lowers
        // a stored node's time takes the path that updates it).
        for (p, ts) in items {
            match ahead.nodes.get(&key(p.id)) {
                None => return Ok(None),
                Some(Some((_, stored)))
                    if *ts < *stored && !self.deferred.at.contains_key(&key(p.id)) =>
                {
                    return Ok(None);
                }
                Some(_) => {}
            }
        }
        let mut out = Vec::with_capacity(items.len());
        for (p, ts) in items {
            let k = key(p.id);
            let known = ahead.nodes.get_mut(&k).expect("read ahead: checked above");
            match known {
                Some((digest, stored)) => {
                    if *digest != p.digest {
                        return Err(StoreError::HashCollision(p.id));
                    }
                    // Inserted by this transaction: it keeps the earliest time it was put with.
                    if *ts < *stored
                        && let Some(&at) = self.deferred.at.get(&k)
                    {
                        *stored = *ts;
                        self.deferred.rows[at].timestamp = *ts;
                    }
                    out.push(PutOutcome::Existed);
                }
                None => {
                    *known = Some((p.digest, *ts));
                    self.deferred.at.insert(k, self.deferred.rows.len());
                    self.deferred.rows.push(StoredNode {
                        id: p.id,
                        type_id: p.type_id,
                        timestamp: *ts,
                        seq: 0,
                        digest: p.digest,
                        payload_cbor: p.payload_cbor.clone(),
                    });
                    self.deferred
                        .refs
                        .push(p.refs.iter().map(|&r| key(r)).collect());
                    out.push(PutOutcome::Inserted);
                }
            }
        }
        Ok(Some(out))
    }

    /// The statement of the deferred inserts, to go first in the commit's round trip (empty when
    /// there are none).
    pub(super) fn deferred_sql(&self) -> String {
        if self.deferred.is_empty() {
            String::new()
        } else {
            format!("{};\n", self.deferred.sql())
        }
    }

    /// Remembers the nodes the deferred inserts wrote, from the rows their statement returned
    /// (the first statement's), once the transaction committed.
    pub(super) fn deferred_done(&mut self, first: &[postgres::SimpleQueryRow]) {
        let d = std::mem::take(&mut self.deferred);
        let seqs: HashMap<i64, u64> = first
            .iter()
            .filter_map(|r| Some((r.get(0)?.parse().ok()?, r.get(1)?.parse().ok()?)))
            .collect();
        self.written.extend(d.rows.into_iter().filter_map(|mut n| {
            n.seq = *seqs.get(&key(n.id))?;
            Some(n)
        }));
    }

    /// Sends the deferred inserts now: a statement that may read the nodes comes next.
    pub(super) fn flush_deferred(&mut self) -> Result<()> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let sql = self.deferred.sql();
        let msgs = self
            .sess
            .client
            .simple_query(&sql)
            .map_err(|e| self.pg.err(&e))?;
        let first = statements(msgs).into_iter().next().unwrap_or_default();
        self.deferred_done(&first);
        Ok(())
    }
}
