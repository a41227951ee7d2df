//! `LISTEN/NOTIFY`: a connection that wakes runners on every thread change, and the schema
//! version read the way a new process reads it.

use super::*;

/// A connection listening for the store's changes ([`crate::store::Store::on_change`]). It stops when
/// dropped.
pub struct Listener {
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Pg {
    /// Calls `f` whenever a transaction that started a thread or freed a lease commits
    /// (`LISTEN uwf_threads`), on a thread and a connection of its own, reconnecting after a
    /// lost connection (and calling `f` then, since changes may have been missed).
    pub(crate) fn listen(self: &Arc<Self>, f: impl Fn() + Send + 'static) -> Listener {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let pg = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("uwf-listen".into())
            .spawn(move || {
                let stopped = || flag.load(std::sync::atomic::Ordering::Relaxed);
                while !stopped() {
                    let Some(p) = pg.upgrade() else { return };
                    let client = p.config.connect(p.tls.clone());
                    drop(p);
                    let Ok(mut client) = client else {
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    };
                    if client.batch_execute("LISTEN uwf_threads").is_err() {
                        continue;
                    }
                    f();
                    let mut n = client.notifications();
                    use postgres::fallible_iterator::FallibleIterator;
                    while !stopped() {
                        // A new iterator each time: one whose time limit passed waits no more.
                        match n.timeout_iter(Duration::from_millis(250)).next() {
                            Ok(Some(_)) => f(),
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                }
            });
        Listener { stop }
    }
}

/// The schema version, in one round trip when the schema exists (every command asks first);
/// `None` when it does not. Only outside a transaction: a missing table is an error.
pub(super) fn schema_version_fast(
    c: &mut Client,
) -> std::result::Result<Option<u64>, postgres::Error> {
    match c.query_typed(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    ) {
        Ok(r) => Ok(r.first().map(|r| u(r.get(0)))),
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The schema version recorded in the database, if any. The catalog is read by a query (not
/// `to_regclass`, whose cache may not have seen a table another session just created).
pub(super) fn schema_version(c: &mut Client) -> std::result::Result<Option<u64>, postgres::Error> {
    let has: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                            WHERE schemaname = current_schema() AND tablename = 'uwf_meta')",
            &[],
        )?
        .get(0);
    if !has {
        return Ok(None);
    }
    let r = c.query_opt(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    )?;
    Ok(r.map(|r| u(r.get(0))))
}
