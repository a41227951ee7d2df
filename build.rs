//! Link settings of the `uwf` binary that make a process start sooner (BENCHMARKS.md, "Process
//! start"); the library, the tests and the benches link as before.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    // How the binary links the C library, for the test that checks it (`tests/it/binary.rs`).
    println!("cargo::rustc-env=UWF_LINKED_LIBC={}", link());
}

/// Gives the binary its link settings; whether it links the C library "static" or "dynamic".
fn link() -> &'static str {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // Only a binary that the dynamic loader of glibc starts, where these were measured.
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return "dynamic";
    }
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if static_crt {
        keep_weak_lookups();
        return "static";
    }
    // A position-dependent executable: rustc links a position-independent one, whose 37,000
    // absolute addresses in tables (vtables, string slices, clap's and serde's static data) the
    // dynamic loader rewrites at every start, about 640 KB of pages written before `main`.
    // Linked at a fixed address, they are final in the file and read only when used. The
    // binary's own code and data then load at the same address every run (no address
    // randomisation for them; the stack, the heap and the mapped files keep theirs).
    println!("cargo::rustc-link-arg-bins=-no-pie");
    let lld = default_lld(&var);
    // The functions short commands run, together at the front of the code (`link/start.order`,
    // written by `link/start-order.sh`): a short process then maps a few pages of code instead
    // of pages spread over the whole binary. Only with the linker rustc uses by default on this
    // target (its own lld), which reads the file; a name the binary lacks is skipped.
    let order = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("link/start.order");
    println!("cargo::rerun-if-changed={}", order.display());
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    // (`-Wl,` splits its argument at commas.)
    if lld && order.is_file() && !order.to_string_lossy().contains(',') {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
    // Linked statically against the C library, when its archives are installed (Debian's and
    // Ubuntu's `libc6-dev` has them): no dynamic loader at start, which otherwise maps
    // `libc.so.6` and `libm.so.6` and binds their symbols before `main`, about a third of what
    // a short command costs above `/bin/true`. rustc links the C library only dynamically on
    // this target (`+crt-static` would need `--target`, or it breaks the proc macros), so the
    // libraries rustc names (`-lc`, `-lm`, `-lgcc_s`, …) are found, for the binary alone, in
    // a directory of the build's own where each is the static archive (`libgcc_s` the
    // unwinder, `libgcc_eh.a`); with `-static` the C compiler then starts the program without
    // the loader. Only for a native build with rustc's own lld, where this was measured, and
    // not with `UWF_DYNAMIC_LIBC=1` (a binary meant for machines with another glibc: see
    // ARCHITECTURE.md, "Process start").
    println!("cargo::rerun-if-env-changed=UWF_DYNAMIC_LIBC");
    let native = var("TARGET") == var("HOST");
    let Some(eh) = native.then(|| archive("libgcc_eh.a")).flatten() else {
        return "dynamic";
    };
    if lld
        && var("UWF_DYNAMIC_LIBC") != "1"
        && let Some(dir) = static_libs(&eh, &PathBuf::from(var("OUT_DIR")))
    {
        println!("cargo::rustc-link-arg-bins=-static");
        println!("cargo::rustc-link-arg-bins=-L{}", dir.display());
        // The C compiler's own helpers, which the C library's archive may call.
        println!("cargo::rustc-link-arg-bins=-lgcc");
        keep_weak_lookups();
        return "static";
    }
    // Otherwise the unwinder linked in (as `-static-libgcc` does) instead of loading
    // libgcc_s.so.1, whose start runs a CPU detection (`cpuid`, which traps to the hypervisor
    // on a virtual machine) that nothing here uses. Only for a native build whose C compiler
    // knows the archive; otherwise the binary links libgcc_s as before.
    println!("cargo::rustc-link-arg-bins=-Wl,--whole-archive");
    println!("cargo::rustc-link-arg-bins={}", eh.display());
    println!("cargo::rustc-link-arg-bins=-Wl,--no-whole-archive");
    "dynamic"
}

/// In a static link: the C library's functions that std calls only where they exist, through
/// weak references, kept in the binary. A static link takes from an archive only what
/// something names, and a weak reference names nothing, so without this std would find
/// neither: `Command::current_dir` would make it `fork` the whole process instead of
/// `posix_spawn` (every agent a runner starts runs in its thread's directory), and
/// thread-local destructors would take std's fallback.
fn keep_weak_lookups() {
    for name in [
        "posix_spawn_file_actions_addchdir_np",
        "__cxa_thread_atexit_impl",
    ] {
        println!("cargo::rustc-link-arg-bins=-Wl,--undefined={name}");
    }
}

/// A directory where each library rustc links the binary with on this target is the C
/// library's static archive, or `None` when the C compiler lacks one of them.
fn static_libs(eh: &Path, out: &Path) -> Option<PathBuf> {
    let dir = out.join("static-libs");
    std::fs::create_dir_all(&dir).ok()?;
    let symlink = |name: &str, target: &Path| {
        let at = dir.join(name);
        let _ = std::fs::remove_file(&at);
        std::os::unix::fs::symlink(target, &at).ok()
    };
    symlink("libgcc_s.a", eh)?;
    for name in ["c", "m", "rt", "pthread", "dl", "util"] {
        let file = format!("lib{name}.a");
        symlink(&file, &archive(&file)?)?;
    }
    Some(dir)
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

/// Where the C compiler that links the binary keeps the archive `file`, if it has one.
fn archive(file: &str) -> Option<PathBuf> {
    let cc = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg(format!("-print-file-name={file}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // A compiler without the file prints its bare name.
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
