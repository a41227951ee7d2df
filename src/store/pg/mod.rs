//! The store on a PostgreSQL server, chosen by a `postgres://` or `postgresql://` URL.
//!
//! The schema is `migrations/pg/*.sql`, applied in order on first use under an advisory lock
//! and recorded in `uwf_meta.schema_version`; a server whose schema is newer than this binary
//! knows is refused. Nodes are rows keyed by their id (top bit flipped, so bigint order is id
//! order) with the canonical payload CBOR, type, first-write time and BLAKE3 digest; their
//! references (in schema order, found in the payload at put time) are kept in the row too, so a
//! walk is one recursive query (`uwf_walk`) that probes one index a node.
//! The thread-layer records keep the MessagePack encodings of `records.rs`.
//!
//! Connections come from a small pool of sessions, each with its prepared statements. A write
//! transaction takes a transaction-scoped advisory lock on each thread (and registry name) it
//! reads or writes, so a compare-and-swap of a head stays one across processes and machines,
//! as on redb. A lease carries an expiry that its holder renews while it lives
//! ([`HEARTBEAT`]); a holder on another machine is judged by it.

pub(crate) mod backend;
pub(crate) mod gc;
mod listen;
mod migrate;
mod nodes;
mod records;
mod verify;
mod write;

pub use listen::Listener;
pub(crate) use write::PgWriter;

use crate::cas::NodeId;
use crate::cas::bootstrap::META;
use crate::model::ThreadId;
use crate::store::error::{Result, StoreError};
use crate::store::node::{Prepared, PutOutcome, StoredNode, WalkStats};
use crate::store::records::{
    HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use crate::store::records::{Record, dec, enc};
use crate::store::usage::{Budget, StepCalls, UsageRow, UsageTotals};
use postgres::types::{ToSql, Type};
use postgres::{Client, Statement};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The schema files, in order: the schema version is the number of those applied.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001-initial.sql",
        include_str!("../../../migrations/pg/0001-initial.sql"),
    ),
    (
        "0002-limits.sql",
        include_str!("../../../migrations/pg/0002-limits.sql"),
    ),
    (
        "0003-refs-in-row.sql",
        include_str!("../../../migrations/pg/0003-refs-in-row.sql"),
    ),
    (
        "0004-gc.sql",
        include_str!("../../../migrations/pg/0004-gc.sql"),
    ),
    (
        "0005-plain-reads.sql",
        include_str!("../../../migrations/pg/0005-plain-reads.sql"),
    ),
    (
        "0006-usage.sql",
        include_str!("../../../migrations/pg/0006-usage.sql"),
    ),
    (
        "0007-step-minutes.sql",
        include_str!("../../../migrations/pg/0007-step-minutes.sql"),
    ),
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u64 = MIGRATIONS.len() as u64;

/// How long a lease lives without its holder renewing it.
const LEASE_TTL: &str = "30 seconds";
/// [`LEASE_TTL`] in milliseconds.
const LEASE_TTL_MS: i64 = 30_000;
/// How often a process renews the leases it holds.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(10);
/// Rows from which a put goes through `COPY` rather than one `INSERT` of arrays.
const COPY_FROM: usize = 512;
/// Puts of at most this many nodes are remembered by the process that wrote them.
const REMEMBER_BATCH: usize = 64;
/// The most nodes a process remembers having written.
const REMEMBER_MAX: usize = 4096;
/// The nodes of a chain read ahead in one query.
pub(crate) const CHAIN_PAGE: i32 = 50_000;
/// Idle sessions a process keeps.
const POOL_IDLE: usize = 16;
/// Connections a process opens before it waits for one to be given back (a server's stock
/// `max_connections` is 100, shared by every process).
const POOL_MAX: usize = 16;
/// How long a borrower waits for a connection at [`POOL_MAX`] before it opens one more anyway
/// (one that holds a connection while it asks for another must not wait forever).
const POOL_WAIT: Duration = Duration::from_secs(2);
/// The session advisory lock of the running collection.
pub(crate) const GC_LOCK: i64 = 0x7577_665f_6763_6f6e;
/// The transaction advisory lock a sweep takes exclusive and a writer that relies on a stored
/// node takes shared.
pub(crate) const SWEEP_LOCK: i64 = 0x7577_665f_7377_6570;
/// The advisory lock key under which the schema is created or migrated.
const MIGRATION_LOCK: i64 = 0x7577_665f_6d69_6772;

/// Whether `s` selects the PostgreSQL backend.
pub(crate) fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// A node id as stored: its top bit flipped, so that bigint order is id order.
pub(crate) fn key(id: NodeId) -> i64 {
    (id.0 ^ (1 << 63)) as i64
}

/// The node id of a stored key.
pub(crate) fn unkey(k: i64) -> NodeId {
    NodeId((k as u64) ^ (1 << 63))
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A parameter of a statement, with the server type it is sent as: a statement a session runs
/// for the first time goes out unprepared with these types (one round trip, no Parse of its
/// own), and is prepared when the session runs it again.
pub(crate) trait Param: ToSql + Sync {
    /// The server type of the value.
    fn ty(&self) -> Type;
}

macro_rules! params {
    ($($t:ty => $ty:ident),* $(,)?) => {
        $(impl Param for $t {
            fn ty(&self) -> Type {
                Type::$ty
            }
        })*
    };
}

params!(
    bool => BOOL,
    i32 => INT4,
    i64 => INT8,
    Option<i64> => INT8,
    Option<i32> => INT4,
    Option<&str> => TEXT,
    Option<Vec<i64>> => INT8_ARRAY,
    f64 => FLOAT8,
    &str => TEXT,
    String => TEXT,
    &[u8] => BYTEA,
    Vec<u8> => BYTEA,
    Vec<i32> => INT4_ARRAY,
    Vec<i64> => INT8_ARRAY,
    Vec<Option<i64>> => INT8_ARRAY,
    Vec<f64> => FLOAT8_ARRAY,
    Vec<&[u8]> => BYTEA_ARRAY,
    Vec<Vec<u8>> => BYTEA_ARRAY,
    Vec<&str> => TEXT_ARRAY,
);

/// A connection to the server with its statements: prepared ones, and `None` for those run
/// once, unprepared.
pub(crate) struct Session {
    client: Client,
    statements: HashMap<&'static str, Option<Statement>>,
    /// Whether the session's temporary table for COPY exists.
    staging: bool,
}

impl Session {
    /// The prepared statement of `sql`, preparing it on its second use; `None` on its first.
    fn stmt(
        &mut self,
        sql: &'static str,
    ) -> std::result::Result<Option<Statement>, postgres::Error> {
        match self.statements.get(sql) {
            Some(Some(s)) => Ok(Some(s.clone())),
            Some(None) => {
                let s = self.client.prepare(sql)?;
                self.statements.insert(sql, Some(s.clone()));
                Ok(Some(s))
            }
            None => {
                self.statements.insert(sql, None);
                Ok(None)
            }
        }
    }

    fn query(
        &mut self,
        sql: &'static str,
        params: &[&dyn Param],
    ) -> std::result::Result<Vec<postgres::Row>, postgres::Error> {
        match self.stmt(sql)? {
            Some(s) => self.client.query(&s, &plain(params)),
            None => self.client.query_typed(sql, &typed(params)),
        }
    }

    fn execute(
        &mut self,
        sql: &'static str,
        params: &[&dyn Param],
    ) -> std::result::Result<u64, postgres::Error> {
        match self.stmt(sql)? {
            Some(s) => self.client.execute(&s, &plain(params)),
            None => {
                let mut it = self.client.query_typed_raw(
                    sql,
                    params.iter().map(|p| (*p as &(dyn ToSql + Sync), p.ty())),
                )?;
                while postgres::fallible_iterator::FallibleIterator::next(&mut it)?.is_some() {}
                Ok(it.rows_affected().unwrap_or(0))
            }
        }
    }

    fn opt(
        &mut self,
        sql: &'static str,
        params: &[&dyn Param],
    ) -> std::result::Result<Option<postgres::Row>, postgres::Error> {
        match self.stmt(sql)? {
            Some(s) => self.client.query_opt(&s, &plain(params)),
            None => self.client.query_typed_opt(sql, &typed(params)),
        }
    }
}

fn plain<'a>(params: &[&'a dyn Param]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|p| *p as &(dyn ToSql + Sync)).collect()
}

fn typed<'a>(params: &[&'a dyn Param]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .map(|p| (*p as &(dyn ToSql + Sync), p.ty()))
        .collect()
}

/// The record of one thread.
const THREAD: &str = "SELECT rec FROM uwf_threads WHERE id = $1";
/// Every active thread's record.
const THREADS: &str = "SELECT id, rec FROM uwf_threads ORDER BY id";
/// The state of one thread.
const STATE: &str = "SELECT rec FROM uwf_thread_state WHERE thread = $1";
/// Every thread state.
const STATES: &str = "SELECT thread, rec FROM uwf_thread_state ORDER BY thread";

impl Session {
    /// The record `sql` selects by `key` (`SELECT rec … WHERE … = $1`).
    fn record<T: Record>(&mut self, pg: &Pg, sql: &'static str, key: &str) -> Result<Option<T>> {
        let r = self.opt(sql, &[&key]).map_err(|e| pg.err(&e))?;
        r.map(|r| dec(r.get(0))).transpose()
    }

    /// The records `sql` selects with their threads (`SELECT thread, rec …`).
    fn records<T: Record>(&mut self, pg: &Pg, sql: &'static str) -> Result<Vec<(ThreadId, T)>> {
        let rows = self.query(sql, &[]).map_err(|e| pg.err(&e))?;
        rows.iter()
            .map(|r| Ok((ThreadId::from_stored(r.get(0)), dec(r.get(1))?)))
            .collect()
    }

    /// The lease of thread `id`, with its expiry.
    fn lease(&mut self, pg: &Pg, id: &ThreadId) -> Result<Option<Lease>> {
        let r = self
            .opt(
                "SELECT rec, (extract(epoch FROM expires_at - now()) * 1000)::int8 FROM uwf_leases WHERE thread = $1",
                &[&id.as_str()],
            )
            .map_err(|e| pg.err(&e))?;
        r.map(|r| lease_of_row(&r, 0)).transpose()
    }
}

/// A session borrowed from the pool, given back when dropped unless its connection closed.
pub(crate) struct Conn<'a> {
    pg: &'a Pg,
    session: Option<Session>,
}

impl std::ops::Deref for Conn<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        self.session.as_ref().expect("a live session")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        self.session.as_mut().expect("a live session")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(s) = self.session.take() else { return };
        if !s.client.is_closed()
            && let Ok(mut idle) = self.pg.idle.lock()
            && idle.len() < POOL_IDLE
        {
            idle.push(s);
            self.pg.freed.notify_one();
            return;
        }
        self.pg.closed(1);
        drop_outside_runtime(s);
    }
}

/// Drops `t` (sessions) where the synchronous client may block: on a thread of its own when
/// this one runs an async runtime, which the client's own must not be nested in.
fn drop_outside_runtime<T: Send + 'static>(t: T) {
    if tokio::runtime::Handle::try_current().is_ok() {
        let _ = std::thread::spawn(move || drop(t)).join();
    } else {
        drop(t);
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut().unwrap_or_else(|e| e.into_inner()));
        drop_outside_runtime(idle);
    }
}

/// A PostgreSQL store: where it is, how to connect, and the idle sessions.
pub(crate) struct Pg {
    config: postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// The URL without its password, for messages.
    server: String,
    idle: Mutex<Vec<Session>>,
    /// Connections open, idle or borrowed.
    open: std::sync::atomic::AtomicUsize,
    /// Signalled when a session is given back or a connection closed.
    freed: std::sync::Condvar,
    /// Who this process is, for the leases it renews.
    holder: OnceLock<String>,
    /// Nodes this process wrote lately and schemas it read (nodes never change; a collection
    /// keeps young nodes and every schema).
    written: Mutex<HashMap<NodeId, StoredNode>>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.server)
    }
}

/// The connection settings of `url` completed from libpq's variables (`PGHOST`, `PGPORT`,
/// `PGUSER`, `PGPASSWORD`, `PGDATABASE`) where the URL leaves them out.
fn config_of(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<postgres::Config> {
    let with_port;
    let url = match env("PGPORT").filter(|p| p.parse::<u16>().is_ok()) {
        Some(port) => {
            with_port = port_into(url, &port);
            with_port.as_str()
        }
        None => url,
    };
    let mut c: postgres::Config = url
        .parse()
        .map_err(|e: postgres::Error| StoreError::Server {
            server: mask_url(url),
            message: format!("not a PostgreSQL URL: {e}"),
            retry: false,
        })?;
    if c.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(h) if h.starts_with('/') => c.host_path(h),
            Some(h) => c.host(&h),
            None => c.host("localhost"),
        };
    }
    if c.get_ports().is_empty()
        && let Some(p) = env("PGPORT").and_then(|p| p.parse().ok())
    {
        c.port(p);
    }
    if c.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".into());
        c.user(&user);
    }
    if c.get_password().is_none()
        && let Some(p) = env("PGPASSWORD")
    {
        c.password(p);
    }
    if c.get_dbname().is_none()
        && let Some(d) = env("PGDATABASE")
    {
        c.dbname(&d);
    }
    c.connect_timeout(Duration::from_secs(10));
    c.keepalives(true);
    c.keepalives_idle(Duration::from_secs(30));
    c.application_name("uwf");
    Ok(c)
}

/// `url` with `port` after its host when it names a host without a port (the parser would
/// take 5432 for it, where libpq takes `PGPORT`).
fn port_into(url: &str, port: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(end);
    let host = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    // An IPv6 literal's colons are inside its brackets.
    let bare = host.rsplit_once(']').map_or(host, |(_, after)| after);
    if host.is_empty() || bare.contains(':') || host.contains(',') {
        return url.to_string();
    }
    format!("{scheme}://{auth}:{port}{tail}")
}

/// `url` with any password replaced by `***`.
pub(crate) fn mask_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let Some((cred, host)) = auth.rsplit_once('@') else {
        return url.to_string();
    };
    let user = cred.split_once(':').map_or(cred, |(u, _)| u);
    format!("{scheme}://{user}@{host}{tail}")
}

/// The password in `url`, if it has one (for masking it in logs).
pub(crate) fn url_password(url: &str) -> Option<String> {
    let c: postgres::Config = url.parse().ok()?;
    c.get_password()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| !p.is_empty())
}

/// The server named in messages: `postgres://user@host:port/db`, never the password.
fn server_name(c: &postgres::Config) -> String {
    let host = match c.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{}:{}/{}",
        c.get_user().unwrap_or(""),
        host,
        port,
        c.get_dbname().or(c.get_user()).unwrap_or("")
    )
}

/// TLS through rustls with the platform's roots. The roots are read (about a millisecond and
/// 150 files on Linux) only when a server accepts TLS: a server without it (`sslmode=prefer`,
/// the default) or `sslmode=disable` costs nothing.
fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Internal(format!("TLS setup: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(LazyVerifier {
            provider,
            inner: OnceLock::new(),
        }))
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The platform's certificate verifier, made when first used.
#[derive(Debug)]
struct LazyVerifier {
    provider: Arc<rustls::crypto::CryptoProvider>,
    inner: OnceLock<std::result::Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyVerifier {
    fn get(&self) -> std::result::Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.inner
            .get_or_init(|| rustls_platform_verifier::Verifier::new(self.provider.clone()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl rustls::client::danger::ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl Pg {
    pub(super) fn connect(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Pg> {
        let config = config_of(url, env)?;
        Ok(Pg {
            server: server_name(&config),
            config,
            tls: tls()?,
            idle: Mutex::new(Vec::new()),
            open: std::sync::atomic::AtomicUsize::new(0),
            freed: std::sync::Condvar::new(),
            holder: OnceLock::new(),
            written: Mutex::new(HashMap::new()),
        })
    }

    /// The server, for messages (no password).
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// A store error for a failure of the server or the connection. A lost connection drops
    /// the idle sessions too: a server that restarted has cut them all.
    pub(crate) fn err(&self, e: &postgres::Error) -> StoreError {
        let err = error_at(&self.server, e);
        if e.is_closed()
            || e.code() == Some(&postgres::error::SqlState::ADMIN_SHUTDOWN)
            || matches!(err, StoreError::Server { retry: true, .. }) && e.as_db_error().is_none()
        {
            let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|p| p.into_inner()));
            self.closed(idle.len());
            drop_outside_runtime(idle);
        }
        err
    }

    /// Counts `n` connections closed, and wakes a borrower waiting for room.
    fn closed(&self, n: usize) {
        if n > 0 {
            let _ = self
                .open
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| {
                    Some(o.saturating_sub(n))
                });
            self.freed.notify_all();
        }
    }

    /// A session: an idle one, else a new connection.
    pub(crate) fn conn(&self) -> Result<Conn<'_>> {
        let deadline = std::time::Instant::now() + POOL_WAIT;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            while let Some(s) = idle.pop() {
                if !s.client.is_closed() {
                    return Ok(Conn {
                        pg: self,
                        session: Some(s),
                    });
                }
                self.closed(1);
            }
            let now = std::time::Instant::now();
            if self.open.load(Ordering::Relaxed) < POOL_MAX || now >= deadline {
                break;
            }
            idle = self
                .freed
                .wait_timeout(idle, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        drop(idle);
        let client = match self.config.connect(self.tls.clone()) {
            Ok(c) => c,
            Err(e) => {
                self.closed(1);
                return Err(self.err(&e));
            }
        };
        Ok(Conn {
            pg: self,
            session: Some(Session {
                client,
                statements: HashMap::new(),
                staging: false,
            }),
        })
    }

    /// Updates the planner's statistics of the node table (after a bulk load).
    pub(crate) fn analyze(&self) -> Result<()> {
        let mut c = self.conn()?;
        c.client
            .batch_execute("ANALYZE uwf_nodes")
            .map_err(|e| self.err(&e))
    }

    // ---- nodes ----

    /// Keeps nodes this process has just committed (or schemas it read), for the reads that
    /// follow.
    fn remember(&self, nodes: Vec<StoredNode>) {
        if nodes.is_empty() {
            return;
        }
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if w.len() + nodes.len() > REMEMBER_MAX {
            w.clear();
        }
        w.extend(nodes.into_iter().map(|n| (n.id, n)));
    }

    /// Renews the expiry of the leases this process holds, every [`HEARTBEAT`], on a thread of
    /// its own started with the first lease taken.
    fn start_heartbeat(self: &Arc<Self>, holder: &str) {
        let pg = Arc::downgrade(self);
        let holder = holder.to_string();
        let _ = std::thread::Builder::new()
            .name("uwf-lease-heartbeat".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(HEARTBEAT);
                    let Some(pg) = pg.upgrade() else { return };
                    // Rows a write of this process holds are skipped, not waited for: that write
                    // sets or removes them, and the renewal never takes row locks in an order of
                    // its own against it (no deadlock); a row skipped is renewed next time, well
                    // within the expiry.
                    if let Ok(mut c) = pg.conn() {
                        let _ = c.execute(
                            "UPDATE uwf_leases SET expires_at = now() + $2::text::interval
                             WHERE thread IN (SELECT thread FROM uwf_leases WHERE holder = $1
                                              FOR UPDATE SKIP LOCKED)",
                            &[&holder, &LEASE_TTL],
                        );
                    }
                }
            });
    }
}

/// A store error for a failure of the server at `server`: retryable when the connection was
/// lost or the server aborted the transaction for a conflict (deadlock, serialization).
pub(crate) fn error_at(server: &str, e: &postgres::Error) -> StoreError {
    use postgres::error::SqlState;
    let retry = e.is_closed()
        || e.code().is_some_and(|c| {
            *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::TOO_MANY_CONNECTIONS
                || c.code().starts_with("08")
        })
        || e.code().is_none() && e.as_db_error().is_none();
    let message = match e.as_db_error() {
        Some(d) => d.message().to_string(),
        None => {
            let mut m = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(s) = src {
                m = format!("{m}: {s}");
                src = s.source();
            }
            m
        }
    };
    StoreError::Server {
        server: server.to_string(),
        message,
        retry,
    }
}

fn digest_of(b: &[u8]) -> Option<[u8; 32]> {
    b.try_into().ok()
}

fn node_of(id: NodeId, r: &postgres::Row) -> Result<StoredNode> {
    Ok(StoredNode {
        id,
        type_id: unkey(r.get(0)),
        timestamp: u(r.get(1)),
        seq: u(r.get(2)),
        digest: digest_of(r.get(3)).ok_or(StoreError::Corrupt(id))?,
        payload_cbor: r.get(4),
    })
}

/// A lease whose column `at` holds its record and `at + 1` the ms left until its expiry by the
/// server's clock (`(extract(epoch FROM expires_at - now()) * 1000)::int8`).
fn lease_of_row(r: &postgres::Row, at: usize) -> Result<Lease> {
    lease_expiring(r.get(at), r.get(at + 1))
}

/// Lease record `rec`, whose expiry is `left_ms` away by the server's clock: the expiry is kept
/// by this machine's clock, so that hosts whose clocks differ judge it alike.
pub(crate) fn lease_expiring(rec: &[u8], left_ms: i64) -> Result<Lease> {
    let mut l: Lease = dec(rec)?;
    l.expires_ms = Some(crate::proc::now_ms().saturating_add_signed(left_ms));
    Ok(l)
}
