//! `uwf mcp`: a Model Context Protocol server over stdio (or, with `--http`, Streamable HTTP on
//! loopback with a bearer token), on the official Rust SDK (`rmcp`).
//!
//! Each tool runs the command of the CLI it names (this binary, with the server's environment:
//! `UWF_HOME`, `UWF_STORE`, …) and answers with its output: JSON objects as they are, lists
//! wrapped as `{"items": […]}`, markdown as `{"markdown": …}`; a command that fails is a tool
//! error carrying its one-line message and `hint:` lines. Resources: a thread as markdown
//! (`uwf://thread/{id}`) and a workflow as YAML (`uwf://workflow/{name}`).
//!
//! Over HTTP (`http`), every request carries the random bearer token printed at start.
//!
//! A tool that runs a step never runs an arbitrary command a client names: `agent` may name an
//! agent of `config.yaml` or a built-in `uwf agent …` command; any other command only when the
//! server was started with `--allow-commands`.

mod config;
mod http;
mod tools;

pub(crate) use config::{ConfigArgs, config};

use rmcp::ServiceExt;
use std::path::PathBuf;

// The arguments of `uwf mcp`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct McpArgs {
    /// Let `thread_step` run any agent command a client names (otherwise only agents of
    /// config.yaml and the built-in `uwf agent …` commands).
    #[arg(long)]
    allow_commands: bool,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (a loopback address only;
    /// default 127.0.0.1 with a free port), every request with the bearer token printed at
    /// start.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0")]
    http: Option<String>,
    #[command(subcommand)]
    command: Option<McpCommand>,
}

// `uwf mcp …`.
#[derive(clap::Subcommand, Debug)]
#[command(defer = true)]
enum McpCommand {
    /// Print the snippet an MCP client's configuration takes to start `uwf mcp` (nothing is
    /// written).
    Config(ConfigArgs),
}

/// `uwf mcp`: serves until the client closes standard input.
///
/// # Errors
/// The protocol could not start (a client that sent no `initialize`), or I/O failed.
pub(crate) fn run(a: McpArgs, root: PathBuf) -> Result<(), String> {
    if let Some(McpCommand::Config(c)) = a.command {
        return config(&c, &root);
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let server = tools::Uwf::new(exe, root, a.allow_commands);
    let addr = a.http.as_deref().map(http::loopback).transpose()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    if let Some(addr) = addr {
        return rt.block_on(http::serve(server, addr));
    }
    rt.block_on(async move {
        let service = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| format!("the MCP session did not start: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| format!("the MCP session failed: {e}"))?;
        Ok(())
    })
}
