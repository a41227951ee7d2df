//! The `uwf` binary as built: on Linux with glibc, linked statically against the C library
//! where the build found its archives (`build.rs`), so that a process starts without the
//! dynamic loader.

use std::process::Command;

/// A 64-bit little-endian ELF file's bytes, read at offsets.
struct Elf(Vec<u8>);

impl Elf {
    fn read(path: impl AsRef<std::path::Path>) -> Elf {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[..4], b"\x7fELF", "an ELF file");
        assert_eq!(bytes[4], 2, "64-bit");
        Elf(bytes)
    }

    fn u16(&self, at: usize) -> usize {
        u16::from_le_bytes(self.0[at..at + 2].try_into().unwrap()) as usize
    }

    fn u32(&self, at: usize) -> usize {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap()) as usize
    }

    fn u64(&self, at: usize) -> usize {
        u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap()) as usize
    }

    /// Whether it names a program interpreter (the dynamic loader).
    fn names_an_interpreter(&self) -> bool {
        const PT_INTERP: usize = 3;
        let (at, size, count) = (self.u64(32), self.u16(54), self.u16(56));
        (0..count).any(|i| self.u32(at + i * size) == PT_INTERP)
    }

    /// Whether it defines the symbol `name` in its symbol table (not merely refers to it, as
    /// a weak reference that a static link left unresolved does).
    fn defines(&self, name: &str) -> bool {
        const SHT_SYMTAB: usize = 2;
        let (shoff, shsize, shnum) = (self.u64(40), self.u16(58), self.u16(60));
        let section = |i: usize| shoff + i * shsize;
        let symtab = (0..shnum)
            .map(section)
            .find(|&h| self.u32(h + 4) == SHT_SYMTAB)
            .expect("the binary has a symbol table");
        let (at, size) = (self.u64(symtab + 24), self.u64(symtab + 32));
        let strings = self.u64(section(self.u32(symtab + 40)) + 24);
        (at..at + size).step_by(24).any(|sym| {
            let start = strings + self.u32(sym);
            let end = start + self.0[start..].iter().position(|&b| b == 0).unwrap();
            &self.0[start..end] == name.as_bytes() && self.u16(sym + 6) != 0
        })
    }
}

#[test]
fn the_binary_starts_without_the_loader_when_linked_statically() {
    let path = env!("CARGO_BIN_EXE_uwf");
    let elf = Elf::read(path);
    let loader = elf.names_an_interpreter();
    match env!("UWF_LINKED_LIBC") {
        "static" => {
            assert!(!loader, "linked statically, yet {path} names a loader");
            // What std looks up as weak symbols (`build.rs`): without the first, every
            // agent a runner starts in its thread's directory would fork the runner.
            for name in [
                "posix_spawn_file_actions_addchdir_np",
                "__cxa_thread_atexit_impl",
            ] {
                assert!(elf.defines(name), "{path} lacks {name}");
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
    assert!(Elf::read("/bin/sh").names_an_interpreter());
    let me = Elf::read(std::env::current_exe().unwrap());
    assert!(me.defines("main"));
    assert!(!me.defines("posix_spawn_file_actions_addchdir_np"));
    assert!(!me.defines("no such symbol"));
}
