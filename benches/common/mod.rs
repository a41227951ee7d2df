//! What the bench binaries share.

use std::path::{Path, PathBuf};

/// The `uwf` binary to measure: `UWF_BENCH_BIN` (another build, e.g. an earlier commit's), else
/// the release build beside the bench.
pub fn uwf_bin() -> PathBuf {
    if let Some(b) = bin_from_env("UWF_BENCH_BIN") {
        return b;
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

/// The binary that the variable `var` names, made absolute (its name kept, a link not
/// followed): the agents of a bench run it from their threads' working directories, where a
/// relative path would name nothing.
pub fn bin_from_env(var: &str) -> Option<PathBuf> {
    let b = PathBuf::from(std::env::var_os(var)?);
    let abs = std::path::absolute(&b).unwrap_or_else(|e| panic!("{var}={}: {e}", b.display()));
    assert!(abs.is_file(), "{var}={}: no such file", b.display());
    Some(abs)
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
