fn main() {
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
    std::process::exit(uwf::cli::run(args));
}
