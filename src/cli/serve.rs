//! `uwf serve`: the web view of the store, with its token (the server is `crate::serve`).

use super::{CliError, CliResult, Env};
use crate::store::Store;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

// Arguments of `uwf serve`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// The address to listen on; anything but a loopback address makes the view reachable
    /// from other machines (a warning says so).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// The port; 0 picks a free one (the URL on stderr names it).
    #[arg(long, value_name = "N", default_value_t = 7878)]
    port: u16,
}

/// `uwf serve`: opens the store read-only, prints `serving <root> at <url>?token=<token>` on
/// stderr and answers until the process is stopped.
pub(crate) fn serve(env: &Env, a: ServeArgs) -> CliResult {
    let db = env.db_path();
    // The view never creates a store (a read of any other command would).
    if env.server_url().is_none() && !db.exists() {
        return Err(CliError::of(
            crate::ErrorKind::NotFound,
            format!("no store at {}", db.display()),
        )
        .hint("start a thread or register a workflow first; UWF_HOME names the root"));
    }
    let store = match env.server_url() {
        Some(url) => match Store::open_url_existing(url, &|k| std::env::var(k).ok())? {
            Some(s) => s,
            None => {
                return Err(CliError::of(
                    crate::ErrorKind::NotFound,
                    format!("no store at {}", crate::store::mask_url(url)),
                )
                .hint("start a thread or register a workflow first"));
            }
        },
        None => Store::open_read_only(&db)?,
    };
    if !a.bind.is_loopback() {
        eprintln!(
            "warning: listening on {}, reachable from other machines; every request needs the token",
            a.bind
        );
    }
    let addr = SocketAddr::new(a.bind, a.port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| CliError::new(format!("cannot listen on {addr}: {e}")))?;
        let local = listener.local_addr()?;
        let host = match local.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            ip => ip,
        };
        let url = match host {
            IpAddr::V6(ip) => format!("http://[{ip}]:{}/", local.port()),
            IpAddr::V4(ip) => format!("http://{ip}:{}/", local.port()),
        };
        let token = crate::serve::token();
        eprintln!("serving {} at {url}?token={token}", env.root.display());
        crate::serve::run(
            listener,
            crate::serve::Context {
                store,
                root: env.root.clone(),
                cwd: env.cwd.clone(),
                loopback: a.bind.is_loopback(),
                token,
                exe: std::env::current_exe()?,
                env: child_env(env),
                clock: env.shared_clock(),
            },
        )
        .await
        .map_err(|e| CliError::of(crate::ErrorKind::Internal, format!("serve: {e}")))
    })
}

/// What the view's writes run with: the root, and the store this process was pointed at.
fn child_env(env: &Env) -> Vec<(String, String)> {
    let mut vars = vec![("UWF_HOME".to_string(), env.root.display().to_string())];
    if env.store.is_some() {
        let s = match env.server_url() {
            Some(url) => url.to_string(),
            None => env.db_path().display().to_string(),
        };
        vars.push(("UWF_STORE".to_string(), s));
    }
    vars
}
