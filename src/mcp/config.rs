//! `uwf mcp config`: the snippet an MCP client's configuration takes to start `uwf mcp` on this
//! store. Nothing is written: the user pastes it where their client reads it.

use serde_json::json;
use std::path::Path;

/// The clients whose configuration `uwf mcp config` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Client {
    /// Claude Code: a `claude mcp add` command line, and the same as `.mcp.json`.
    ClaudeCode,
    /// Cursor: `.cursor/mcp.json` (a project's) or `~/.cursor/mcp.json`.
    Cursor,
    /// Any client that takes `mcpServers` JSON.
    Generic,
}

// The arguments of `uwf mcp config`.
#[derive(clap::Args, Debug)]
pub(crate) struct ConfigArgs {
    /// The client.
    #[arg(long, value_enum, default_value = "generic")]
    client: Client,
}

/// `uwf mcp config`.
///
/// # Errors
/// This program's path cannot be found.
pub(crate) fn config(a: &ConfigArgs, root: &Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let exe = exe.display().to_string();
    let mut env = serde_json::Map::new();
    // A client starts the server from a directory of its own: the root as an absolute path.
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    env.insert("UWF_HOME".into(), json!(root.display().to_string()));
    if let Ok(s) = std::env::var("UWF_STORE")
        && !s.is_empty()
    {
        env.insert("UWF_STORE".into(), json!(s));
    }
    let servers = json!({ "mcpServers": { "uwf": {
        "command": exe, "args": ["mcp"], "env": env
    }}});
    let pretty = serde_json::to_string_pretty(&servers).map_err(|e| e.to_string())?;
    let text = match a.client {
        Client::ClaudeCode => {
            let vars: String = env
                .iter()
                .map(|(k, v)| format!(" -e {k}={}", shell_word(v.as_str().unwrap_or(""))))
                .collect();
            format!(
                "# Claude Code: run this once (add --scope project to share it through .mcp.json):\nclaude mcp add uwf{vars} -- {} mcp\n\n# or put this in .mcp.json at the project's root:\n{pretty}\n",
                shell_word(&exe)
            )
        }
        Client::Cursor => format!(
            "# Cursor: put this in .cursor/mcp.json (this project) or ~/.cursor/mcp.json (every project):\n{pretty}\n"
        ),
        Client::Generic => format!("{pretty}\n"),
    };
    print!("{text}");
    Ok(())
}

/// `s` as one word of a POSIX shell.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-=:+,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
