//! `uwf mcp --http [ADDR]`: the same server over Streamable HTTP, on a loopback address only,
//! every request carrying the bearer token the server prints when it starts.

use super::tools::Uwf;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::net::SocketAddr;
use std::sync::Arc;

/// A token of 160 random bits, as hex.
fn token() -> String {
    let (a, b) = (crate::thread::random_bytes(), crate::thread::random_bytes());
    a.iter()
        .chain(b.iter())
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// The address to listen on: `addr`, which must be a loopback one.
///
/// # Errors
/// Not an address, or not a loopback one.
pub(super) fn loopback(addr: &str) -> Result<SocketAddr, String> {
    let a: SocketAddr = addr
        .parse()
        .map_err(|_| format!("--http {addr}: not an address such as 127.0.0.1:8808"))?;
    if !a.ip().is_loopback() {
        return Err(format!(
            "--http {addr}: uwf mcp serves HTTP on a loopback address only (127.0.0.1, ::1)"
        ));
    }
    Ok(a)
}

/// Serves `server` at `http://ADDR/mcp` until the process is stopped; prints the URL and the
/// token on stderr first.
///
/// # Errors
/// The address cannot be bound.
pub(super) async fn serve(server: Uwf, addr: SocketAddr) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let at = listener.local_addr().map_err(|e| e.to_string())?;
    let secret: Arc<str> = token().into();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let want = secret.clone();
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let want = want.clone();
                    async move { authorized(&want, req, next).await }
                },
            ));
    eprintln!(
        "uwf mcp: serving Streamable HTTP at http://{at}/mcp; token {secret} (send \"Authorization: Bearer {secret}\")"
    );
    axum::serve(listener, router)
        .await
        .map_err(|e| format!("the HTTP server failed: {e}"))
}

/// Lets a request through only with the server's bearer token.
async fn authorized(want: &str, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // The same time whatever the token's first wrong byte.
    let ok = given.is_some_and(|g| {
        g.len() == want.len()
            && g.bytes()
                .zip(want.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if ok {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required: the one uwf mcp --http printed when it started\n",
        )
            .into_response()
    }
}
