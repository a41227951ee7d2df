//! A thread's rows in a write transaction on the server: what the transaction knows of them
//! ([`Pre`]), the writes it keeps until they are due ([`Pending`]), and [`PgWriter`]'s reads
//! and writes of threads, their states and leases.

use super::*;

/// A thread's rows as its transaction knows them: read with the thread's lock, then kept up to
/// date by the transaction's own writes. Each is `None` where the transaction does not know it
/// (a write whose result only the server has), else the stored record's bytes or `None` where
/// there is none.
#[derive(Default)]
pub(super) struct Pre {
    thread: Option<Option<Vec<u8>>>,
    /// With the milliseconds until its expiry.
    lease: Option<Option<(Vec<u8>, i64)>>,
    state: Option<Option<Vec<u8>>>,
}

/// A table of a thread's rows whose writes a transaction buffers as records.
#[derive(Clone, Copy)]
enum Row {
    Thread,
    State,
}

/// Writes of threads' rows a transaction keeps until its next statement that may read them or
/// its commit, and then sends in one round trip for all the threads of a group commit: per
/// thread and table, the last write (`Some` a record, `None` a deletion).
#[derive(Default)]
pub(super) struct Pending {
    threads: HashMap<String, Option<Vec<u8>>>,
    /// With the holder the lease row names.
    leases: HashMap<String, Option<(Vec<u8>, String)>>,
    states: HashMap<String, Option<Vec<u8>>>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.leases.is_empty() && self.states.is_empty()
    }

    /// The statements that make them, `;`-separated (values written as literals).
    pub(super) fn sql(&self) -> String {
        let mut out = Vec::new();
        let rec = |r: &Vec<u8>| bytea_literal(r);
        upserts(&self.threads, ("uwf_threads", "id", "rec"), rec, &mut out);
        upserts(
            &self.states,
            ("uwf_thread_state", "thread", "rec"),
            rec,
            &mut out,
        );
        let lease = |(r, holder): &(Vec<u8>, String)| {
            format!(
                "{}, {}, now() + {}::interval",
                bytea_literal(r),
                text_literal(holder),
                text_literal(LEASE_TTL)
            )
        };
        upserts(
            &self.leases,
            ("uwf_leases", "thread", "rec, holder, expires_at"),
            lease,
            &mut out,
        );
        out.join(";\n")
    }
}

/// The statements writing `m` into `table`, keyed by `key`: one insert of the records (the
/// columns `cols`, whose values `row` writes), each replacing the row of its key, then one
/// deletion of the keys whose last write removed them.
fn upserts<T>(
    m: &HashMap<String, Option<T>>,
    (table, key, cols): (&str, &str, &str),
    row: impl Fn(&T) -> String,
    out: &mut Vec<String>,
) {
    let rows: Vec<String> = m
        .iter()
        .filter_map(|(k, v)| Some(format!("({}, {})", text_literal(k), row(v.as_ref()?))))
        .collect();
    if !rows.is_empty() {
        let set: Vec<String> = cols
            .split(", ")
            .map(|c| format!("{c} = EXCLUDED.{c}"))
            .collect();
        out.push(format!(
            "INSERT INTO {table} ({key}, {cols}) VALUES {}
             ON CONFLICT ({key}) DO UPDATE SET {}",
            rows.join(","),
            set.join(", ")
        ));
    }
    let gone: Vec<String> = m
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| text_literal(k))
        .collect();
    if !gone.is_empty() {
        out.push(format!(
            "DELETE FROM {table} WHERE {key} IN ({})",
            gone.join(",")
        ));
    }
}

/// A statement reading thread `id`'s record, lease and state in one row (for a simple query,
/// whose values come as text: the id is written in the statement).
pub(super) fn thread_rows(id: &str) -> String {
    let q = id.replace('\'', "''");
    format!(
        "SELECT (SELECT rec FROM uwf_threads WHERE id = '{q}'),
                l.rec, (extract(epoch FROM l.expires_at - now()) * 1000)::int8,
                (SELECT rec FROM uwf_thread_state WHERE thread = '{q}')
         FROM (SELECT 1) s LEFT JOIN uwf_leases l ON l.thread = '{q}'"
    )
}

/// A statement reading the record, lease and state of each thread of `ids`, a row each
/// beginning with its id.
pub(super) fn many_thread_rows(ids: &[&str]) -> String {
    let list: Vec<String> = ids
        .iter()
        .map(|id| format!("'{}'", id.replace('\'', "''")))
        .collect();
    format!(
        "SELECT t.id, (SELECT rec FROM uwf_threads WHERE id = t.id),
                l.rec, (extract(epoch FROM l.expires_at - now()) * 1000)::int8,
                (SELECT rec FROM uwf_thread_state WHERE thread = t.id)
         FROM unnest(ARRAY[{}]::text[]) AS t(id) LEFT JOIN uwf_leases l ON l.thread = t.id",
        list.join(",")
    )
}

/// The rows [`thread_rows`] read (from column `at` on); `None` if a value is not a bytea's
/// text form.
pub(super) fn pre_of(r: &postgres::SimpleQueryRow, at: usize) -> Option<Pre> {
    // Absent: `Some(None)`.
    let bytes = |i: usize| r.get(at + i).map_or(Some(None), |v| unhex(v).map(Some));
    Some(Pre {
        thread: Some(bytes(0)?),
        lease: Some(match bytes(1)? {
            Some(rec) => Some((rec, r.get(at + 2)?.parse().ok()?)),
            None => None,
        }),
        state: Some(bytes(3)?),
    })
}

impl PgWriter<'_> {
    pub(crate) fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.lock(0, id.as_str())?;
        if let Some(Some(t)) = self.pre_of(id).map(|p| &p.thread) {
            return t.as_deref().map(dec).transpose();
        }
        let pg = self.pg;
        self.s()?.record(pg, THREAD, id.as_str())
    }

    pub(crate) fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        let pg = self.pg;
        self.s()?.records(pg, THREADS)
    }

    pub(crate) fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        self.lock(0, id.as_str())?;
        self.buffer(id, Row::Thread, Some(enc(rec)));
        Ok(())
    }

    /// Buffers the write of thread `id`'s row of `table` (`None`: its deletion) until the
    /// transaction sends its pending writes, and keeps it as what the transaction knows of the
    /// row.
    fn buffer(&mut self, id: &ThreadId, table: Row, rec: Option<Vec<u8>>) {
        let key = id.as_str().to_string();
        match table {
            Row::Thread => self.pending.threads.insert(key, rec.clone()),
            Row::State => self.pending.states.insert(key, rec.clone()),
        };
        let pre = self.pre_mut(id);
        match table {
            Row::Thread => pre.thread = Some(rec),
            Row::State => pre.state = Some(rec),
        }
        self.notify = true;
    }

    /// Stores new threads and their states, 10,000 rows a statement. No lock a thread: the ids
    /// are new, and a row already there is refused by its key.
    pub(crate) fn insert_threads(
        &mut self,
        threads: &[(ThreadId, ThreadRecord, ThreadState)],
    ) -> Result<()> {
        for chunk in threads.chunks(10_000) {
            for (id, _, _) in chunk {
                self.pre.remove(id.as_str());
            }
            let ids: Vec<&str> = chunk.iter().map(|(id, _, _)| id.as_str()).collect();
            let recs: Vec<Vec<u8>> = chunk.iter().map(|(_, r, _)| enc(r)).collect();
            let inserted = self
                .s()?
                .query(
                    "INSERT INTO uwf_threads (id, rec) SELECT * FROM unnest($1::text[], $2::bytea[])
                     ON CONFLICT (id) DO NOTHING RETURNING id",
                    &[&ids, &recs],
                )
                .map_err(self.e())?;
            if inserted.len() != chunk.len() {
                let new: HashSet<&str> = inserted.iter().map(|r| r.get(0)).collect();
                let there = ids.iter().find(|t| !new.contains(*t)).unwrap_or(&"");
                return Err(StoreError::ThreadExists((*there).to_string()));
            }
            let (ids, recs): (Vec<&str>, Vec<Vec<u8>>) = chunk
                .iter()
                .filter(|(_, _, st)| !st.is_default())
                .map(|(id, _, st)| (id.as_str(), enc(st)))
                .unzip();
            if !ids.is_empty() {
                self.s()?
                    .execute(
                        "INSERT INTO uwf_thread_state (thread, rec)
                         SELECT * FROM unnest($1::text[], $2::bytea[])
                         ON CONFLICT (thread) DO UPDATE SET rec = EXCLUDED.rec",
                        &[&ids, &recs],
                    )
                    .map_err(self.e())?;
            }
        }
        self.notify = true;
        Ok(())
    }

    pub(crate) fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.lock(0, id.as_str())?;
        let r = self
            .s()?
            .opt(
                "DELETE FROM uwf_threads WHERE id = $1 RETURNING rec",
                &[&id.as_str()],
            )
            .map_err(self.e())?;
        self.pre_mut(id).thread = Some(None);
        self.notify = true;
        r.map(|r| dec(r.get(0))).transpose()
    }

    pub(crate) fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        self.lock(0, id.as_str())?;
        if let Some(Some(st)) = self.pre_of(id).map(|p| &p.state) {
            return Ok(st.as_deref().map(dec).transpose()?.unwrap_or_default());
        }
        let pg = self.pg;
        Ok(self
            .s()?
            .record(pg, STATE, id.as_str())?
            .unwrap_or_default())
    }

    pub(crate) fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        let pg = self.pg;
        self.s()?.records(pg, STATES)
    }

    pub(crate) fn set_thread_state(&mut self, id: &ThreadId, st: &ThreadState) -> Result<()> {
        self.lock(0, id.as_str())?;
        if st.is_default() {
            return self.remove_thread_state(id);
        }
        self.buffer(id, Row::State, Some(enc(st)));
        Ok(())
    }

    pub(crate) fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        // Known to have none: nothing to delete.
        let known = self.pre_of(id).and_then(|p| p.state.as_ref());
        if let Some(None) = known {
            return Ok(());
        }
        // Back to the default state (a paused thread resumed) is a change too (when the
        // transaction does not know whether there was a state, it says so anyway).
        self.buffer(id, Row::State, None);
        Ok(())
    }

    pub(crate) fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.lock(0, id.as_str())?;
        if let Some(Some(l)) = self.pre_of(id).map(|p| &p.lease) {
            return l
                .as_ref()
                .map(|(rec, left_ms)| lease_expiring(rec, *left_ms))
                .transpose();
        }
        let pg = self.pg;
        self.s()?.lease(pg, id)
    }

    pub(crate) fn set_lease(&mut self, id: &ThreadId, l: &Lease, pg: &Arc<Pg>) -> Result<()> {
        self.lock(0, id.as_str())?;
        let holder = format!("{}:{}:{}", l.boot_id, l.pid, l.start_ticks);
        let bytes = enc(l);
        self.pending.leases.insert(
            id.as_str().to_string(),
            Some((bytes.clone(), holder.clone())),
        );
        self.pre_mut(id).lease = Some(Some((bytes, LEASE_TTL_MS)));
        if l.pid == std::process::id() && pg.holder.set(holder.clone()).is_ok() {
            pg.start_heartbeat(&holder);
        }
        Ok(())
    }

    pub(crate) fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.lock(0, id.as_str())?;
        if let Some(Some(known)) = self.pre_of(id).map(|p| &p.lease) {
            // Known: none to delete, or the one this transaction deletes when it sends its
            // pending writes.
            let Some((rec, left_ms)) = known else {
                return Ok(None);
            };
            let gone = lease_expiring(rec, *left_ms)?;
            self.pre_mut(id).lease = Some(None);
            self.pending.leases.insert(id.as_str().to_string(), None);
            self.notify = true;
            return Ok(Some(gone));
        }
        self.pre_mut(id).lease = Some(None);
        let r = self
            .s()?
            .opt(
                "DELETE FROM uwf_leases WHERE thread = $1
                 RETURNING rec, (extract(epoch FROM expires_at - now()) * 1000)::int8",
                &[&id.as_str()],
            )
            .map_err(self.e())?;
        if r.is_some() {
            self.notify = true;
        }
        r.map(|r| lease_of_row(&r, 0)).transpose()
    }
}
