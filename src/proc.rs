//! This machine's processes as a lease records them: whether a pid lives, the boot id, a
//! process's start time. It imports nothing of the crate; the store's lease rules read it.

/// Whether process `pid` exists (`kill(pid, 0)` succeeds or fails only for permission).
pub(crate) fn pid_alive(pid: u32) -> bool {
    // This process, without a signal.
    if pid == self::pid() {
        return true;
    }
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
    boot().to_string()
}

/// [`boot_id`], read once a process (the boot does not change while it runs).
pub(crate) fn boot() -> &'static str {
    static BOOT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}

/// This process's id and start time, read once (a runner takes a lease a step, and looks at
/// the store's leases every second).
fn me() -> (u32, u64) {
    static ME: std::sync::OnceLock<(u32, u64)> = std::sync::OnceLock::new();
    *ME.get_or_init(|| {
        let pid = std::process::id();
        (pid, read_start_ticks(pid))
    })
}

/// This process's id, without a system call after the first.
pub(crate) fn pid() -> u32 {
    me().0
}

/// The start time of process `pid` in clock ticks since boot (Linux), or 0 when unknown.
pub fn start_ticks(pid: u32) -> u64 {
    match me() {
        (mine, ticks) if mine == pid => ticks,
        _ => read_start_ticks(pid),
    }
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

/// Milliseconds since the epoch, by the system clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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
