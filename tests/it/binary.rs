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

#[test]
fn the_binary_starts_without_the_loader_when_linked_statically() {
    let path = env!("CARGO_BIN_EXE_uwf");
    let loader = names_an_interpreter(&std::fs::read(path).unwrap());
    match env!("UWF_LINKED_LIBC") {
        "static" => assert!(!loader, "linked statically, yet {path} names a loader"),
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

/// The check itself, on a binary of this system that is linked dynamically.
#[test]
fn a_dynamically_linked_program_names_the_loader() {
    let sh = std::fs::read("/bin/sh").unwrap();
    assert!(names_an_interpreter(&sh));
}
