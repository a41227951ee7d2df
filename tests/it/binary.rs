//! The `uwf` binary as built: on Linux with glibc, linked statically against the C library
//! where the build found its archives (`build.rs`), so that a process starts without the
//! dynamic loader.

use std::process::Command;

/// Whether the ELF file `elf` names a program interpreter (the dynamic loader).
fn names_an_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "an ELF file");
    assert_eq!(elf[4], 2, "64-bit");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[32..40].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(54), u16_at(56));
    const PT_INTERP: u32 = 3;
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == PT_INTERP
    })
}

/// Whether the ELF file `elf` defines the symbol `name` in its symbol table (not merely
/// refers to it, as a weak reference that a static link left unresolved does).
fn defines(elf: &[u8], name: &str) -> bool {
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shsize, shnum) = (u64_at(40), u16_at(58), u16_at(60));
    let section = |i: usize| shoff + i * shsize;
    const SHT_SYMTAB: usize = 2;
    let symtab = (0..shnum)
        .map(section)
        .find(|&h| u32_at(h + 4) == SHT_SYMTAB)
        .expect("the binary has a symbol table");
    let (at, size) = (u64_at(symtab + 24), u64_at(symtab + 32));
    let strings = u64_at(section(u32_at(symtab + 40)) + 24);
    (at..at + size).step_by(24).any(|sym| {
        let start = strings + u32_at(sym);
        let end = start + elf[start..].iter().position(|&b| b == 0).unwrap();
        &elf[start..end] == name.as_bytes() && u16_at(sym + 6) != 0
    })
}

#[test]
fn the_binary_starts_without_the_loader_when_linked_statically() {
    let path = env!("CARGO_BIN_EXE_uwf");
    let elf = std::fs::read(path).unwrap();
    let loader = names_an_interpreter(&elf);
    match env!("UWF_LINKED_LIBC") {
        "static" => {
            assert!(!loader, "linked statically, yet {path} names a loader");
            // What std looks up as weak symbols (`src/main.rs`): without the first, every
            // agent a runner starts in its thread's directory would fork the runner.
            for name in [
                "posix_spawn_file_actions_addchdir_np",
                "__cxa_thread_atexit_impl",
            ] {
                assert!(defines(&elf, name), "{path} lacks {name}");
            }
        }
        how => {
            assert_eq!(how, "dynamic");
            assert!(loader, "linked dynamically, yet {path} names no loader");
            // CI's machines have the archives (Debian's libc6-dev): a dynamic link there means
            // the build's static link broke.
            assert!(
                std::env::var_os("CI").is_none(),
                "the C library's static archives were not found or not used"
            );
        }
    }
    let out = Command::new(path).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("uwf "));
}

/// The checks themselves, on a binary of this system that is linked dynamically (and so only
/// refers to the C library's functions) and on this test binary.
#[test]
fn a_dynamically_linked_program_names_the_loader() {
    let sh = std::fs::read("/bin/sh").unwrap();
    assert!(names_an_interpreter(&sh));
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(defines(&me, "main"));
    assert!(!defines(&me, "posix_spawn_file_actions_addchdir_np"));
    assert!(!defines(&me, "no such symbol"));
}
