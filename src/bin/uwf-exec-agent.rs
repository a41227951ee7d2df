//! `uwf-exec-agent PARENT PROGRAM ARGS…`: how `uwf run` starts an agent. It sets the
//! parent-death signal and execs the agent (see `uwf::engine::exec_shim`); a binary of its own,
//! far smaller than `uwf`, so that starting each agent costs little.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    uwf::engine::exec_shim(&args);
}
