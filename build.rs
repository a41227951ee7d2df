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
    // The functions short commands run, together at the front of the code (`link/start.order`,
    // written by `link/start-order.sh`): a short process then maps a few pages of code instead
    // of pages spread over the whole binary. Only with the linker rustc uses by default on this
    // target (its own lld), which reads the file; a name the binary lacks is skipped.
    let order = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("link/start.order");
    println!("cargo::rerun-if-changed={}", order.display());
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    // (`-Wl,` splits its argument at commas.)
    if default_lld(&var) && order.is_file() && !order.to_string_lossy().contains(',') {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
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

/// Whether the binary is linked by rustc's own lld, as it is by default on x86_64 Linux with
/// glibc: no linker chosen by the build's configuration or its flags.
fn default_lld(var: &dyn Fn(&str) -> String) -> bool {
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("RUSTC_LINKER").is_empty()
        && !flags.split('\x1f').any(|f| {
            f.contains("linker") || f.contains("link-self-contained") || f.contains("fuse-ld")
        })
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
