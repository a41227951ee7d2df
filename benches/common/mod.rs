//! What the bench binaries share.

use std::path::{Path, PathBuf};

/// The `uwf` binary to measure: `UWF_BENCH_BIN` (another build, e.g. an earlier commit's), else
/// the release build beside the bench.
pub fn uwf_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("UWF_BENCH_BIN") {
        return PathBuf::from(b);
    }
    // target/release/deps/<bench>-… → target/release/uwf
    let exe = std::env::current_exe().expect("bench executable");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("uwf");
    assert!(
        bin.exists(),
        "build the binary first: cargo build --release ({})",
        bin.display()
    );
    bin
}

/// Runs `cmd`, which must succeed (else the bench stops, naming `what` and printing the
/// command's standard error); its standard output.
pub fn stdout_of(cmd: &mut std::process::Command, what: &str) -> Vec<u8> {
    let out = cmd
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
