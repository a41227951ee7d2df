//! Step leases: taking one, telling a live owner from a dead one, and a guard that gives the
//! lease back however a step ends.

#![allow(unsafe_code)] // System calls (signals, process groups, descriptors); each block says why it is sound.

use super::StepError;
use crate::cas::NodeId;
use crate::store::{Lease, Phase, Store};
use crate::thread::{ThreadError, ThreadId};

/// Why a lease was not taken.
enum Held {
    /// A live process holds it.
    Busy(u32),
    /// The thread waits under its workflow's limit.
    Queued,
    /// The thread is paused.
    Paused,
    /// The thread is not active.
    Gone,
}

/// Whether a lease's owner is still running: same boot, pid alive, same start time.
pub(crate) fn lease_is_live(l: &Lease) -> bool {
    let boot = boot_id();
    if !l.boot_id.is_empty() && !boot.is_empty() && l.boot_id != boot {
        // Another machine's holder (or one from before a reboot): alive while it renews the
        // lease's expiry, where the store keeps one.
        return l.unexpired == Some(true);
    }
    if !pid_alive(l.pid) {
        return false;
    }
    let ticks = start_ticks(l.pid);
    !(l.start_ticks != 0 && ticks != 0 && ticks != l.start_ticks)
}

/// The lease process `pid` holds from `now_ms`.
pub(crate) fn lease_of(pid: u32, now_ms: u64) -> Lease {
    Lease {
        pid,
        since_ms: now_ms,
        boot_id: boot_id(),
        start_ticks: start_ticks(pid),
        unexpired: None,
    }
}

/// Whether `l` is `me`'s lease.
pub(crate) fn is_mine(l: &Lease, me: &Lease) -> bool {
    l.pid == me.pid && l.start_ticks == me.start_ticks && l.boot_id == me.boot_id
}

/// A thread's lease, held by this process until the guard is dropped or the head move that
/// releases it commits ([`LeaseGuard::disarm`]).
#[derive(Debug)]
pub(crate) struct LeaseGuard<'s> {
    store: &'s Store,
    thread: ThreadId,
    me: Lease,
    armed: bool,
}

impl<'s> LeaseGuard<'s> {
    /// Takes the lease of the active thread `thread`; returns the guard and the head found in
    /// the same transaction.
    ///
    /// # Errors
    /// [`StepError::Busy`] while another live process holds it; [`ThreadError::NotActive`] or
    /// [`ThreadError::NotFound`] for a thread that is not active.
    pub(crate) fn acquire(
        store: &'s Store,
        thread: &ThreadId,
        me: Lease,
    ) -> Result<(LeaseGuard<'s>, NodeId), StepError> {
        let (t, lease) = (thread.clone(), me.clone());
        let found = store
            .write_grouped(move |w| {
                let (thread, me) = (&t, &lease);
                let Some(rec) = w.thread(thread)? else {
                    return Ok(Err(Held::Gone));
                };
                if let Some(l) = w.lease(thread)?
                    && !is_mine(&l, me)
                {
                    if lease_is_live(&l) {
                        return Ok(Err(Held::Busy(l.pid)));
                    }
                    tracing::warn!(
                        tag = "NVEE459T",
                        thread = %thread,
                        owner = l.pid,
                        "took over the step lease of a process that is gone"
                    );
                }
                match w.thread_state(thread)?.phase {
                    Phase::Queued => return Ok(Err(Held::Queued)),
                    Phase::Paused => return Ok(Err(Held::Paused)),
                    Phase::Ready => {}
                }
                w.set_lease(thread, me)?;
                Ok(Ok(rec.head))
            })
            .map_err(ThreadError::from)?;
        match found {
            Ok(head) => Ok((
                LeaseGuard {
                    store,
                    thread: thread.clone(),
                    me,
                    armed: true,
                },
                head,
            )),
            Err(Held::Busy(pid)) => Err(StepError::Busy {
                thread: thread.to_string(),
                pid,
            }),
            Err(Held::Queued) => Err(StepError::Queued {
                thread: thread.to_string(),
            }),
            Err(Held::Paused) => Err(StepError::Paused {
                thread: thread.to_string(),
            }),
            Err(Held::Gone) => Err(match store.history_of(thread).map_err(ThreadError::from)? {
                Some(h) => ThreadError::NotActive {
                    thread: thread.to_string(),
                    reason: h.reason.to_string(),
                },
                None => ThreadError::NotFound(thread.to_string()),
            }
            .into()),
        }
    }

    /// The lease this guard holds.
    pub(crate) fn lease(&self) -> &Lease {
        &self.me
    }

    /// The lease was released by a committed head move: nothing left to do on drop.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for LeaseGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // A lease left behind by a failure here is taken over later: its owner is gone.
        let (thread, me) = (self.thread.clone(), self.me.clone());
        let _ = self.store.write_grouped(move |w| {
            if let Some(l) = w.lease(&thread)?
                && is_mine(&l, &me)
            {
                w.remove_lease(&thread)?;
            }
            Ok(())
        });
    }
}

/// Whether process `pid` exists (`kill(pid, 0)` succeeds or fails only for permission).
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: signal 0 checks for existence and sends nothing.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// This host's boot id (Linux), or "" when unknown.
pub fn boot_id() -> String {
    // The boot does not change while this process runs: read once.
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
    .clone()
}

/// The start time of process `pid` in clock ticks since boot (Linux), or 0 when unknown.
pub fn start_ticks(pid: u32) -> u64 {
    // This process's own start time is read once (a runner takes a lease per step).
    static MINE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    if pid == std::process::id() {
        return *MINE.get_or_init(|| read_start_ticks(pid));
    }
    read_start_ticks(pid)
}

fn read_start_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Field 22, counted after the ")" that ends the command name.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        assert!(pid_alive(std::process::id()));
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(start_ticks(std::process::id()) > 0);
        }
    }
}
