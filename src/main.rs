fn main() {
    std::process::exit(uwf::cli::run(std::env::args_os().collect()));
}
