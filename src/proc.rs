//! This machine's processes as a lease records them: whether a pid lives, the boot id, a
//! process's start time; and from them whether a lease's holder still runs.
//!
//! The process facts import nothing of the crate; the lease rules below them read only the
//! store's [`Lease`] record.

use crate::store::Lease;

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

/// Whether process `pid` exists (`kill(pid, 0)` succeeds or fails only for permission).
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
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

    #[test]
    fn a_lease_of_this_process_is_live_and_mine() {
        let me = lease_of(std::process::id(), 1);
        assert!(lease_is_live(&me));
        assert!(is_mine(&me.clone(), &me));
    }
}
