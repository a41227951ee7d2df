//! Link settings of the `uwf` binary that make a process start sooner (BENCHMARKS.md, "Process
//! start"); the library, the tests and the benches link as before.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // Only a binary that the dynamic loader of glibc starts, where these were measured.
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" || static_crt {
        return;
    }
    // A position-dependent executable: rustc links a position-independent one, whose 37,000
    // absolute addresses in tables (vtables, string slices, clap's and serde's static data) the
    // dynamic loader rewrites at every start, about 640 KB of pages written before `main`.
    // Linked at a fixed address, they are final in the file and read only when used. The
    // binary's own code and data then load at the same address every run (no address
    // randomisation for them; the stack, the heap and the shared libraries keep theirs).
    println!("cargo::rustc-link-arg-bins=-no-pie");
    // The unwinder linked in (as `-static-libgcc` does) instead of loading libgcc_s.so.1,
    // whose start runs a CPU detection (`cpuid`, which traps to the hypervisor on a virtual
    // machine) that nothing here uses. Only for a native build whose C compiler knows the
    // archive; otherwise the binary links libgcc_s as before.
    if var("TARGET") == var("HOST")
        && let Some(eh) = libgcc_eh()
    {
        println!("cargo::rustc-link-arg-bins=-Wl,--whole-archive");
        println!("cargo::rustc-link-arg-bins={}", eh.display());
        println!("cargo::rustc-link-arg-bins=-Wl,--no-whole-archive");
    }
}

/// Where the C compiler that links the binary keeps `libgcc_eh.a`, if it has one.
fn libgcc_eh() -> Option<PathBuf> {
    let cc = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // A compiler without the file prints its bare name.
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
