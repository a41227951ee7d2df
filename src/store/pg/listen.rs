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
        self.stop.store(true, Ordering::Relaxed);
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
                let stopped = || flag.load(Ordering::Relaxed);
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
