//! The `uwf` binary.
//!
//! It starts at C's `main` rather than at std's runtime start: that start finds the main
//! thread's stack bounds by reading `/proc/self/maps` and sets up a stack-overflow handler,
//! more than a tenth of a short command's whole run, and an agent's step starts `uwf` at least
//! once. What of std's start uwf relies on is done here instead: SIGPIPE ignored (a closed pipe
//! is an error each write handles; std gives the default back to the programs it starts), the
//! standard descriptors open (so that no file the process opens becomes its stdout), a panic
//! ending in exit code 101, and stdout flushed at exit (`std::process::exit` does it).
#![no_main]
// Setting a signal's disposition and checking a descriptor have no safe wrapper in std; each
// block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int};

#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    start_as_std_does();
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    #[allow(
        clippy::exit,
        reason = "the process's entry point: flushes stdout and exits"
    )]
    std::process::exit(code)
}

/// What std's runtime start does that uwf needs.
fn start_as_std_does() {
    // SAFETY: ignoring SIGPIPE installs no handler (no code runs on the signal), and nothing
    // else runs yet to race with the change.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    for fd in 0..3 {
        // SAFETY: F_GETFD only reads the descriptor's flags; `open` gets a valid C string.
        // A closed standard descriptor is filled with /dev/null, the lowest free number.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
            {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            }
        }
    }
}

fn run() -> c_int {
    // A bug must still end in one line on stderr and a non-zero exit.
    std::panic::set_hook(Box::new(|info| {
        // The store turns the database engine's panics on a damaged file into its one-line
        // damage error; nothing is printed for them here.
        if uwf::store::panic_is_caught(info) {
            return;
        }
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("internal error: {}{at}", msg.replace('\n', " "));
    }));
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == uwf::engine::GUARD_ARG) {
        uwf::engine::guard_main();
    }
    uwf::cli::run(args)
}
