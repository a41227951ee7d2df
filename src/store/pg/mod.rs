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

use crate::cas::NodeId;
use crate::cas::bootstrap::META;
use crate::store::error::{Result, StoreError};
use crate::store::node::{Prepared, PutOutcome, StoredNode, WalkEvent, WalkStats};
use crate::store::records::{
    HistoryEntry, Lease, RegistryEntry, Removal, ThreadRecord, ThreadState, WorkflowLimits,
};
use crate::store::records::{Record, dec, enc};
use crate::workflow::ThreadId;
use postgres::types::{ToSql, Type};
use postgres::{Client, Statement};
use std::collections::{HashMap, HashSet, VecDeque};
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
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u64 = MIGRATIONS.len() as u64;

/// How long a lease lives without its holder renewing it.
const LEASE_TTL: &str = "30 seconds";
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
    &str => TEXT,
    String => TEXT,
    &[u8] => BYTEA,
    Vec<u8> => BYTEA,
    Vec<i32> => INT4_ARRAY,
    Vec<i64> => INT8_ARRAY,
    Vec<&[u8]> => BYTEA_ARRAY,
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

    /// The lease of thread `id`, with whether its expiry is ahead.
    fn lease(&mut self, pg: &Pg, id: &ThreadId) -> Result<Option<Lease>> {
        let r = self
            .opt(
                "SELECT rec, expires_at > now() FROM uwf_leases WHERE thread = $1",
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
            return;
        }
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
    /// Connects to the server of `url`, creating or migrating the schema when needed.
    ///
    /// # Errors
    /// [`StoreError::Server`] naming the server for a bad URL, a refused connection or a
    /// failed login; [`StoreError::TooNew`] for a newer schema.
    pub(crate) fn open(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Pg> {
        let pg = Pg::connect(url, env)?;
        pg.migrate()?;
        Ok(pg)
    }

    /// Connects to the server of `url` when its database holds a uwf store of a schema this
    /// binary knows; `None` when it holds none (nothing is created).
    ///
    /// # Errors
    /// As [`Pg::open`].
    pub(crate) fn open_existing(
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Pg>> {
        let pg = Pg::connect(url, env)?;
        match pg.schema_version()? {
            None => Ok(None),
            Some(v) if v > SCHEMA_VERSION => Err(pg.too_new(v)),
            Some(v) if v < SCHEMA_VERSION => {
                pg.migrate()?;
                Ok(Some(pg))
            }
            Some(_) => Ok(Some(pg)),
        }
    }

    fn connect(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Pg> {
        let config = config_of(url, env)?;
        Ok(Pg {
            server: server_name(&config),
            config,
            tls: tls()?,
            idle: Mutex::new(Vec::new()),
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
            drop_outside_runtime(idle);
        }
        err
    }

    /// A session: an idle one, else a new connection.
    pub(crate) fn conn(&self) -> Result<Conn<'_>> {
        while let Some(s) = self.idle.lock().expect("pool lock").pop() {
            if !s.client.is_closed() {
                return Ok(Conn {
                    pg: self,
                    session: Some(s),
                });
            }
        }
        let client = self
            .config
            .connect(self.tls.clone())
            .map_err(|e| self.err(&e))?;
        Ok(Conn {
            pg: self,
            session: Some(Session {
                client,
                statements: HashMap::new(),
                staging: false,
            }),
        })
    }

    fn migrate(&self) -> Result<()> {
        let mut c = self.conn()?;
        let found = schema_version_fast(&mut c.client).map_err(|e| self.err(&e))?;
        if found == Some(SCHEMA_VERSION) {
            return Ok(());
        }
        if let Some(v) = found
            && v > SCHEMA_VERSION
        {
            return Err(self.too_new(v));
        }
        // The schema, its version and the bootstrap schemas in one transaction, under a lock
        // that makes concurrent first uses wait for the first.
        let mut w = PgWriter::begin(self, &mut c)?;
        w.s()?
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(|e| self.err(&e))?;
        // Another process may have migrated while this one waited for the lock.
        let from = schema_version(&mut w.s()?.client)
            .map_err(|e| self.err(&e))?
            .unwrap_or(0);
        if from > SCHEMA_VERSION {
            return Err(self.too_new(from));
        }
        if from == SCHEMA_VERSION {
            return w.commit();
        }
        for (_, sql) in &MIGRATIONS[from as usize..] {
            w.s()?.client.batch_execute(sql).map_err(|e| self.err(&e))?;
        }
        w.s()?
            .client
            .execute(
                "INSERT INTO uwf_meta (key, value) VALUES ('schema_version', $1)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&i(SCHEMA_VERSION)],
            )
            .map_err(|e| self.err(&e))?;
        if from == 0 {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let nodes = crate::store::node::bootstrap_nodes();
            w.put(&nodes.iter().map(|p| (p, now)).collect::<Vec<_>>())?;
        }
        w.commit()
    }

    fn too_new(&self, found: u64) -> StoreError {
        StoreError::TooNew {
            path: self.server.clone().into(),
            found,
            supported: SCHEMA_VERSION,
        }
    }

    /// Updates the planner's statistics of the node table (after a bulk load).
    pub(crate) fn analyze(&self) -> Result<()> {
        let mut c = self.conn()?;
        c.client
            .batch_execute("ANALYZE uwf_nodes")
            .map_err(|e| self.err(&e))
    }

    /// The schema version of the server's database (`None` before the first use).
    pub(crate) fn schema_version(&self) -> Result<Option<u64>> {
        let mut c = self.conn()?;
        schema_version(&mut c.client).map_err(|e| self.err(&e))
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

    pub(crate) fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        if let Some(n) = self
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            return Ok(Some(n.clone()));
        }
        let mut c = self.conn()?;
        let row = c
            .opt(
                "SELECT type, ts, seq, digest, payload FROM uwf_nodes WHERE id = $1",
                &[&key(id)],
            )
            .map_err(|e| self.err(&e))?;
        let n = row.map(|r| node_of(id, &r)).transpose()?;
        // Schemas are read again and again (every step reads its role's), and garbage
        // collection never removes one: kept like the nodes this process wrote.
        if let Some(n) = &n
            && n.type_id == META
        {
            self.remember(vec![n.clone()]);
        }
        Ok(n)
    }

    /// The stored nodes of `ids`, in one query.
    pub(crate) fn get_many(&self, ids: &[NodeId]) -> Result<Vec<StoredNode>> {
        let keys: Vec<i64> = ids.iter().map(|&id| key(id)).collect();
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT type, ts, seq, digest, payload, id FROM uwf_nodes WHERE id = ANY($1)",
                &[&keys],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| node_of(unkey(r.get(5)), r)).collect()
    }

    /// The node `head`, then, while the node is of type `step`, the node its first reference
    /// names, at most `lim` of them, in one query ([`CHAIN`]): a thread's chain read ahead,
    /// each node with its first reference.
    pub(crate) fn chain(
        &self,
        head: NodeId,
        step: NodeId,
        lim: i32,
    ) -> Result<Vec<(StoredNode, Option<NodeId>)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(CHAIN, &[&key(head), &key(step), &lim])
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| {
                let next: Option<i64> = r.get(6);
                Ok((node_of(unkey(r.get(5)), r)?, next.map(unkey)))
            })
            .collect()
    }

    pub(crate) fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        let mut c = self.conn()?;
        let row = c
            .opt("SELECT type FROM uwf_nodes WHERE id = $1", &[&key(id)])
            .map_err(|e| self.err(&e))?;
        Ok(row.map(|r| unkey(r.get(0))))
    }

    pub(crate) fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        let keys: Vec<i64> = ids.iter().map(|&id| key(id)).collect();
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT id, digest FROM uwf_nodes WHERE id = ANY($1)",
                &[&keys],
            )
            .map_err(|e| self.err(&e))?;
        let found: HashMap<i64, Option<[u8; 32]>> = rows
            .iter()
            .map(|r| (r.get(0), digest_of(r.get(1))))
            .collect();
        Ok(keys
            .iter()
            .map(|k| found.get(k).copied().flatten())
            .collect())
    }

    pub(crate) fn has(&self, id: NodeId) -> Result<bool> {
        Ok(self.type_of(id)?.is_some())
    }

    pub(crate) fn node_count(&self) -> Result<u64> {
        let mut c = self.conn()?;
        let r = c
            .query("SELECT count(*) FROM uwf_nodes", &[])
            .map_err(|e| self.err(&e))?;
        Ok(u(r[0].get(0)))
    }

    /// Up to 10 ids in `lo..=hi`, in id order.
    pub(crate) fn ids_in(&self, lo: u64, hi: u64) -> Result<Vec<NodeId>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT id FROM uwf_nodes WHERE id BETWEEN $1 AND $2 ORDER BY id LIMIT 10",
                &[&key(NodeId(lo)), &key(NodeId(hi))],
            )
            .map_err(|e| self.err(&e))?;
        Ok(rows.iter().map(|r| unkey(r.get(0))).collect())
    }

    pub(crate) fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        // Whether the node is stored and its references, in one round trip.
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT refs FROM uwf_nodes WHERE id = $1", &[&key(id)])
            .map_err(|e| self.err(&e))?;
        Ok(rows
            .first()
            .map(|r| r.get::<_, Vec<i64>>(0).into_iter().map(unkey).collect()))
    }

    pub(crate) fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT id FROM uwf_nodes WHERE type = $1 ORDER BY seq",
                &[&key(type_id)],
            )
            .map_err(|e| self.err(&e))?;
        Ok(rows.iter().map(|r| unkey(r.get(0))).collect())
    }

    /// Everything `root` reaches: one recursive query returns the reachable nodes with their
    /// references, and the breadth-first order (references in schema order) is taken here,
    /// as on redb. Missing nodes are reported, never skipped.
    pub(crate) fn walk(
        &self,
        root: NodeId,
        visit: &mut dyn FnMut(WalkEvent, Option<NodeId>) -> Result<()>,
    ) -> Result<WalkStats> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT id, present, refs FROM uwf_walk($1)", &[&key(root)])
            .map_err(|e| self.err(&e))?;
        drop(c);
        let mut graph: HashMap<i64, (bool, Vec<i64>)> = HashMap::with_capacity(rows.len());
        for r in &rows {
            graph.insert(r.get(0), (r.get(1), r.get(2)));
        }
        drop(rows);
        let mut stats = WalkStats::default();
        let mut seen: HashSet<i64> = HashSet::with_capacity(graph.len());
        let mut queue = VecDeque::from([(key(root), None)]);
        seen.insert(key(root));
        while let Some((k, parent)) = queue.pop_front() {
            match graph.get(&k) {
                Some((true, refs)) => {
                    stats.visited += 1;
                    visit(WalkEvent::Node(unkey(k)), None)?;
                    for r in refs {
                        if seen.insert(*r) {
                            queue.push_back((*r, Some(unkey(k))));
                        }
                    }
                }
                _ => {
                    visit(WalkEvent::Missing(unkey(k)), parent)?;
                    stats.missing += 1;
                }
            }
        }
        Ok(stats)
    }

    /// Every node in `order` ("id" or "seq"), streamed in pages of 8,192 rows.
    pub(crate) fn for_each_node<E: From<StoreError>>(
        &self,
        by_seq: bool,
        mut f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut after = i64::MIN;
        let mut first = true;
        loop {
            let rows = {
                let mut c = self.conn()?;
                let sql = match (by_seq, first) {
                    (true, _) => {
                        "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                         WHERE seq > $1 ORDER BY seq LIMIT 8192"
                    }
                    (false, true) => {
                        "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                         WHERE id >= $1 ORDER BY id LIMIT 8192"
                    }
                    (false, false) => {
                        "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                         WHERE id > $1 ORDER BY id LIMIT 8192"
                    }
                };
                c.query(sql, &[&after]).map_err(|e| self.err(&e))?
            };
            first = false;
            let Some(last) = rows.last() else {
                return Ok(());
            };
            after = if by_seq { last.get(3) } else { last.get(0) };
            for r in &rows {
                let n = StoredNode {
                    id: unkey(r.get(0)),
                    type_id: unkey(r.get(1)),
                    timestamp: u(r.get(2)),
                    seq: u(r.get(3)),
                    digest: digest_of(r.get(4)).ok_or(StoreError::Corrupt(unkey(r.get(0))))?,
                    payload_cbor: r.get(5),
                };
                f(n)?;
            }
        }
    }

    // ---- records ----

    pub(crate) fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.conn()?.record(self, THREAD, id.as_str())
    }

    pub(crate) fn threads(&self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        self.conn()?.records(self, THREADS)
    }

    pub(crate) fn thread_state(&self, id: &ThreadId) -> Result<ThreadState> {
        Ok(self
            .conn()?
            .record(self, STATE, id.as_str())?
            .unwrap_or_default())
    }

    pub(crate) fn thread_states(&self) -> Result<Vec<(ThreadId, ThreadState)>> {
        self.conn()?.records(self, STATES)
    }

    pub(crate) fn lease(&self, id: &ThreadId) -> Result<Option<Lease>> {
        self.conn()?.lease(self, id)
    }

    pub(crate) fn leases(&self) -> Result<Vec<(ThreadId, Lease)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT rec, expires_at > now(), thread FROM uwf_leases ORDER BY thread",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((ThreadId::from_stored(r.get(2)), lease_of_row(r, 0)?)))
            .collect()
    }

    pub(crate) fn workflow_limits(&self) -> Result<Vec<(String, WorkflowLimits)>> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT name, rec FROM uwf_limits ORDER BY name", &[])
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((r.get(0), dec(r.get(1))?)))
            .collect()
    }

    pub(crate) fn registry(&self) -> Result<Vec<(String, NodeId)>> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT name, workflow FROM uwf_registry ORDER BY name", &[])
            .map_err(|e| self.err(&e))?;
        Ok(rows.iter().map(|r| (r.get(0), unkey(r.get(1)))).collect())
    }

    pub(crate) fn registry_history(&self, name: &str) -> Result<Vec<RegistryEntry>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT rec FROM uwf_registry_history WHERE name = $1 ORDER BY seq",
                &[&name],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    pub(crate) fn all_registry_history(&self) -> Result<Vec<(String, RegistryEntry)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT name, rec FROM uwf_registry_history ORDER BY name, seq",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| Ok((r.get(0), dec(r.get(1))?)))
            .collect()
    }

    pub(crate) fn for_each_history<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(HistoryEntry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut after = 0i64;
        loop {
            let rows = {
                let mut c = self.conn()?;
                c.query(
                    "SELECT seq, rec FROM uwf_history WHERE seq > $1 ORDER BY seq LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| self.err(&e))?
            };
            let Some(last) = rows.last() else {
                return Ok(());
            };
            after = last.get(0);
            for r in &rows {
                f(dec(r.get(1))?)?;
            }
        }
    }

    pub(crate) fn history_of(&self, id: &ThreadId) -> Result<Option<HistoryEntry>> {
        let mut c = self.conn()?;
        let r = c
            .opt(
                "SELECT rec FROM uwf_history WHERE thread = $1 ORDER BY seq DESC LIMIT 1",
                &[&id.as_str()],
            )
            .map_err(|e| self.err(&e))?;
        r.map(|r| dec(r.get(0))).transpose()
    }

    pub(crate) fn removal_mark(&self) -> Result<u64> {
        let mut c = self.conn()?;
        let r = c
            .query("SELECT coalesce(max(seq), 0) FROM uwf_removals", &[])
            .map_err(|e| self.err(&e))?;
        Ok(u(r[0].get(0)))
    }

    pub(crate) fn removals_since(&self, from: u64) -> Result<Vec<Removal>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT rec FROM uwf_removals WHERE seq > $1 ORDER BY seq",
                &[&i(from)],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    /// Counts for `uwf store info`: nodes, active threads, history entries, registry names,
    /// leases.
    pub(crate) fn counts(&self) -> Result<[u64; 5]> {
        let mut c = self.conn()?;
        let r = c
            .query(
                "SELECT (SELECT count(*) FROM uwf_nodes), (SELECT count(*) FROM uwf_threads),
                        (SELECT count(*) FROM uwf_history), (SELECT count(*) FROM uwf_registry),
                        (SELECT count(*) FROM uwf_leases)",
                &[],
            )
            .map_err(|e| self.err(&e))?;
        Ok([0, 1, 2, 3, 4].map(|k| u(r[0].get(k))))
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
                    if let Ok(mut c) = pg.conn() {
                        let _ = c.execute(
                            "UPDATE uwf_leases SET expires_at = now() + $2::text::interval
                             WHERE holder = $1",
                            &[&holder, &LEASE_TTL],
                        );
                    }
                }
            });
    }
}

impl Pg {
    /// `verify` on a server: every node re-hashed (id and digest), its payload checked for
    /// canonical CBOR, its type for a stored schema and its stored references against those
    /// its schema finds in the payload; one pass in write order, 8,192 rows a query.
    pub(crate) fn verify(
        &self,
        schemas: &dyn crate::store::backend::Types,
        progress: crate::store::report::Progress<'_>,
    ) -> Result<crate::store::report::VerifyReport> {
        use crate::store::report::Damage;
        let pg = self;
        use crate::cas::{cbor, hash};
        let total = pg.node_count()?;
        let mut report = crate::store::report::VerifyReport::default();
        let mut types: HashMap<NodeId, Option<Arc<crate::store::types::TypeInfo>>> = HashMap::new();
        let mut after = i64::MIN;
        loop {
            let rows = {
                let mut c = pg.conn()?;
                c.query(
                    "SELECT n.id, n.type, n.seq, n.digest, n.payload,
                            n.refs
                     FROM uwf_nodes n WHERE n.seq > $1 ORDER BY n.seq LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| pg.err(&e))?
            };
            let Some(last) = rows.last() else { break };
            after = last.get(2);
            for r in &rows {
                let (id, type_id) = (unkey(r.get(0)), unkey(r.get(1)));
                let digest: &[u8] = r.get(3);
                let payload: &[u8] = r.get(4);
                let edges: Vec<i64> = r.get(5);
                report.nodes += 1;
                let self_typed = type_id == id;
                let actual = hash::id_for(type_id, self_typed, payload);
                if actual != id {
                    report.push(Damage::WrongId { id, actual });
                }
                if hash::digest(type_id, self_typed, payload)[..] != *digest {
                    report.push(Damage::BadDigest(id));
                }
                if !cbor::decode(payload).is_ok_and(|v| cbor::encode(&v) == payload) {
                    report.push(Damage::BadPayload(id));
                }
                let mut found = Vec::new();
                let known = if self_typed || type_id == META {
                    true
                } else {
                    let info = match types.get(&type_id) {
                        Some(i) => i.clone(),
                        None => {
                            let i = match schemas.type_info(type_id) {
                                Ok(i) => Some(i),
                                Err(StoreError::UnknownType(_)) => None,
                                Err(e) => return Err(e),
                            };
                            if let Some(Err(e)) = i.as_ref().map(|i| i.plan()) {
                                report.push(Damage::BadSchema {
                                    type_id,
                                    message: e.to_string(),
                                });
                            }
                            types.insert(type_id, i.clone());
                            i
                        }
                    };
                    match info {
                        Some(i) => i
                            .plan()
                            .is_ok_and(|p| p.ids_in_cbor(payload, &mut found).is_ok()),
                        None => {
                            report.push(Damage::MissingType { id, type_id });
                            false
                        }
                    }
                };
                if known && !found.iter().map(|&f| key(f)).eq(edges.iter().copied()) {
                    report.push(Damage::WrongRefs(id));
                }
            }
            progress(report.nodes, total);
        }
        progress(report.nodes, total);
        Ok(report)
    }

    /// `reindex` on a server: the references of every node found again in its payload and
    /// written where they differ (the type index is the `uwf_nodes_type` index, which the server keeps). Returns
    /// the number of nodes.
    pub(crate) fn reindex(
        &self,
        schemas: &dyn crate::store::backend::Types,
        progress: crate::store::report::Progress<'_>,
    ) -> Result<u64> {
        let pg = self;
        let total = pg.node_count()?;
        let mut types: HashMap<NodeId, Option<Arc<crate::store::types::TypeInfo>>> = HashMap::new();
        let mut after = i64::MIN;
        let mut n = 0u64;
        loop {
            let rows = {
                let mut c = pg.conn()?;
                c.query(
                    "SELECT n.id, n.type, n.seq, n.payload,
                            n.refs
                     FROM uwf_nodes n WHERE n.seq > $1 ORDER BY n.seq LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| pg.err(&e))?
            };
            let Some(last) = rows.last() else { break };
            after = last.get(2);
            let mut fixes: Vec<(i64, Vec<i64>)> = Vec::new();
            for r in &rows {
                let (id, type_id) = (unkey(r.get(0)), unkey(r.get(1)));
                let payload: &[u8] = r.get(3);
                let edges: Vec<i64> = r.get(4);
                n += 1;
                let refs = if type_id == id || type_id == META {
                    Vec::new()
                } else {
                    let info = match types.get(&type_id) {
                        Some(i) => i.clone(),
                        None => {
                            let i = match schemas.type_info(type_id) {
                                Ok(i) => Some(i),
                                Err(StoreError::UnknownType(_)) => None,
                                Err(e) => return Err(e),
                            };
                            types.insert(type_id, i.clone());
                            i
                        }
                    };
                    match info {
                        Some(i) => crate::store::node::refs_in(&i, id, payload)?,
                        None => Vec::new(),
                    }
                };
                let want: Vec<i64> = refs.iter().map(|&r| key(r)).collect();
                if want != edges {
                    fixes.push((key(id), want));
                }
            }
            if !fixes.is_empty() {
                let mut c = pg.conn()?;
                let mut w = PgWriter::begin(pg, &mut c)?;
                for (id, want) in &fixes {
                    w.s()?
                        .execute("UPDATE uwf_nodes SET refs = $2 WHERE id = $1", &[id, want])
                        .map_err(|e| pg.err(&e))?;
                }
                w.commit()?;
            }
            progress(n, total);
        }
        Ok(n)
    }
}

/// A connection listening for the store's changes ([`crate::store::Store::on_change`]). It stops when
/// dropped.
pub struct Listener {
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Pg {
    /// Calls `f` whenever a transaction that started a thread or freed a lease commits
    /// (`LISTEN uwf_threads`), on a thread and a connection of its own, reconnecting after a
    /// lost connection (and calling `f` then, since changes may have been missed).
    pub(crate) fn listen(self: &Arc<Self>, f: impl Fn() + Send + 'static) -> Listener {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let pg = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("uwf-listen".into())
            .spawn(move || {
                let stopped = || flag.load(std::sync::atomic::Ordering::Relaxed);
                while !stopped() {
                    let Some(p) = pg.upgrade() else { return };
                    let client = p.config.connect(p.tls.clone());
                    drop(p);
                    let Ok(mut client) = client else {
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    };
                    if client.batch_execute("LISTEN uwf_threads").is_err() {
                        continue;
                    }
                    f();
                    let mut n = client.notifications();
                    use postgres::fallible_iterator::FallibleIterator;
                    while !stopped() {
                        // A new iterator each time: one whose time limit passed waits no more.
                        match n.timeout_iter(Duration::from_millis(250)).next() {
                            Ok(Some(_)) => f(),
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                }
            });
        Listener { stop }
    }
}

/// The schema version, in one round trip when the schema exists (every command asks first);
/// `None` when it does not. Only outside a transaction: a missing table is an error.
fn schema_version_fast(c: &mut Client) -> std::result::Result<Option<u64>, postgres::Error> {
    match c.query_typed(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    ) {
        Ok(r) => Ok(r.first().map(|r| u(r.get(0)))),
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The schema version recorded in the database, if any. The catalog is read by a query (not
/// `to_regclass`, whose cache may not have seen a table another session just created).
fn schema_version(c: &mut Client) -> std::result::Result<Option<u64>, postgres::Error> {
    let has: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                            WHERE schemaname = current_schema() AND tablename = 'uwf_meta')",
            &[],
        )?
        .get(0);
    if !has {
        return Ok(None);
    }
    let r = c.query_opt(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    )?;
    Ok(r.map(|r| u(r.get(0))))
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

fn lease_of_row(r: &postgres::Row, at: usize) -> Result<Lease> {
    let mut l: Lease = dec(r.get(at))?;
    l.unexpired = Some(r.get(at + 1));
    Ok(l)
}

/// A thread's rows as its transaction found them after taking its lock: each the stored
/// record's bytes, or `None` where there is none.
struct Pre {
    thread: Option<Vec<u8>>,
    /// With whether its expiry is ahead.
    lease: Option<(Vec<u8>, bool)>,
    state: Option<Vec<u8>>,
}

/// A statement reading thread `id`'s record, lease and state in one row (for a simple query,
/// whose values come as text: the id is written in the statement).
fn thread_rows(id: &str) -> String {
    let q = id.replace('\'', "''");
    format!(
        "SELECT (SELECT rec FROM uwf_threads WHERE id = '{q}'),
                l.rec, l.expires_at > now(),
                (SELECT rec FROM uwf_thread_state WHERE thread = '{q}')
         FROM (SELECT 1) s LEFT JOIN uwf_leases l ON l.thread = '{q}'"
    )
}

/// The rows [`thread_rows`] read; `None` if a value is not a bytea's text form.
fn pre_of(r: &postgres::SimpleQueryRow) -> Option<Pre> {
    // Absent: `Some(None)`.
    let bytes = |i: usize| r.get(i).map_or(Some(None), |v| unhex(v).map(Some));
    Some(Pre {
        thread: bytes(0)?,
        lease: bytes(1)?.map(|rec| (rec, r.get(2) == Some("t"))),
        state: bytes(3)?,
    })
}

/// The row the last statement of a simple query returned, if it returned one.
pub(crate) fn last_row(
    msgs: Vec<postgres::SimpleQueryMessage>,
) -> Option<postgres::SimpleQueryRow> {
    // The rows of each statement come before its completion.
    let (mut row, mut last) = (None, None);
    for m in msgs {
        match m {
            postgres::SimpleQueryMessage::Row(r) => row = Some(r),
            postgres::SimpleQueryMessage::CommandComplete(_) => last = row.take(),
            _ => {}
        }
    }
    last
}

/// The bytes of a `bytea` in the server's text form (`\x` and hex digits).
fn unhex(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("\\x")?.as_bytes();
    if h.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    h.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The chain of a thread ending at `$1`: the node, then, while it is of type `$2` (a step),
/// the node its first reference names (a StepNode's `prev`, or for the first step its
/// StartNode); at most `$3` nodes, each with that first reference (where a reader goes on
/// from). What it returns is only read ahead: the reader checks each link itself. Each link
/// is a `LATERAL` look-up by the primary key (a subquery with `LIMIT` is never flattened into
/// a join), so the plan is index probes whatever the statistics say, and a prepared statement
/// is not planned again at each call.
pub(super) const CHAIN: &str =
    "WITH RECURSIVE c(id, type, ts, seq, digest, payload, refs, depth) AS (
        SELECT n.id, n.type, n.ts, n.seq, n.digest, n.payload, n.refs, 1
        FROM uwf_nodes n WHERE n.id = $1
      UNION ALL
        SELECT n.id, n.type, n.ts, n.seq, n.digest, n.payload, n.refs, c.depth + 1
        FROM c CROSS JOIN LATERAL
             (SELECT * FROM uwf_nodes m WHERE m.id = c.refs[1] LIMIT 1) n
        WHERE c.type = $2 AND c.depth < $3
    )
    SELECT type, ts, seq, digest, payload, id, refs[1] FROM c";

/// The advisory lock key of a thread or registry name.
fn lock_key(kind: u8, name: &str) -> i64 {
    twox_hash::XxHash64::oneshot(u64::from(kind), name.as_bytes()) as i64
}

/// One write transaction on the server: see [`crate::store::Writer`].
pub(crate) struct PgWriter<'c> {
    pg: &'c Pg,
    /// The session; reached through [`PgWriter::s`], which opens the transaction first.
    sess: &'c mut Session,
    /// Whether `BEGIN` has gone out: it goes with the first statement.
    begun: bool,
    /// The nodes of small puts this transaction inserted, remembered by the process once it
    /// commits ([`Pg::get`] answers them without a round trip).
    written: Vec<StoredNode>,
    locked: HashSet<i64>,
    /// The thread whose lock opened the transaction and its rows, read in the same round trip
    /// (dropped at the transaction's first write to that thread).
    pre: Option<(String, Pre)>,
    done: bool,
    /// Whether a NOTIFY is due at commit: a thread started, moved, ended or changed state, or
    /// a lease was freed.
    notify: bool,
}

impl Drop for PgWriter<'_> {
    fn drop(&mut self) {
        if self.begun && !self.done {
            let _ = self.sess.client.batch_execute("ROLLBACK");
            // A temporary table created in this transaction is gone with it.
            self.sess.staging = false;
        }
    }
}

impl<'c> PgWriter<'c> {
    /// A transaction on `s`. Its `BEGIN` goes out with its first statement (in the same round
    /// trip when that is an advisory lock), and a transaction that ran none sends nothing.
    pub(crate) fn begin(pg: &'c Pg, s: &'c mut Session) -> Result<PgWriter<'c>> {
        Ok(PgWriter {
            pg,
            sess: s,
            begun: false,
            written: Vec::new(),
            locked: HashSet::new(),
            pre: None,
            done: false,
            notify: false,
        })
    }

    /// The session, inside the transaction.
    pub(crate) fn s(&mut self) -> Result<&mut Session> {
        if !self.begun {
            self.sess
                .client
                .batch_execute("BEGIN")
                .map_err(|e| self.pg.err(&e))?;
            self.begun = true;
        }
        Ok(self.sess)
    }

    pub(crate) fn commit(mut self) -> Result<()> {
        if !self.begun {
            self.done = true;
            return Ok(());
        }
        let end = if self.notify {
            "NOTIFY uwf_threads; COMMIT"
        } else {
            "COMMIT"
        };
        // Failed (a NOTIFY cancelled, say), the transaction is rolled back when the writer drops.
        self.sess
            .client
            .batch_execute(end)
            .map_err(|e| self.pg.err(&e))?;
        self.done = true;
        self.pg.remember(std::mem::take(&mut self.written));
        Ok(())
    }

    fn e(&self) -> impl Fn(postgres::Error) -> StoreError + '_ {
        |e| self.pg.err(&e)
    }

    /// Thread `id`'s rows as the transaction's first lock read them, unless it wrote them since.
    fn pre_of(&self, id: &ThreadId) -> Option<&Pre> {
        self.pre
            .as_ref()
            .filter(|(t, _)| t == id.as_str())
            .map(|(_, p)| p)
    }

    /// Forgets thread `id`'s rows read with the first lock: the transaction writes them.
    fn forget_pre(&mut self, id: &ThreadId) {
        if self.pre_of(id).is_some() {
            self.pre = None;
        }
    }

    /// Takes the transaction's advisory lock of `name` once.
    fn lock(&mut self, kind: u8, name: &str) -> Result<()> {
        let k = lock_key(kind, name);
        if !self.locked.insert(k) {
            return Ok(());
        }
        if !self.begun {
            // One round trip for both (the key is a number, written as one), and for a
            // thread's lock its record, lease and state too. Begun even if the lock fails: the
            // BEGIN went through, and dropping the writer rolls it back.
            self.begun = true;
            let mut sql = format!("BEGIN; SELECT pg_advisory_xact_lock({k})");
            if kind == 0 {
                sql = format!("{sql}; {}", thread_rows(name));
            }
            let msgs = self
                .sess
                .client
                .simple_query(&sql)
                .map_err(|e| self.pg.err(&e))?;
            if kind == 0 {
                self.pre = last_row(msgs)
                    .as_ref()
                    .and_then(pre_of)
                    .map(|p| (name.to_string(), p));
            }
            return Ok(());
        }
        self.s()?
            .execute("SELECT pg_advisory_xact_lock($1)", &[&k])
            .map_err(|e| self.pg.err(&e))?;
        Ok(())
    }

    /// Puts nodes with their timestamps; see [`crate::store::Store::put`].
    pub(crate) fn put(&mut self, items: &[(&Prepared, u64)]) -> Result<Vec<PutOutcome>> {
        let mut out = vec![PutOutcome::Existed; items.len()];
        if items.is_empty() {
            return Ok(out);
        }
        // The first of each id in the batch; a repeat must have the same bytes.
        let mut first: HashMap<u64, usize> = HashMap::with_capacity(items.len());
        for (n, (p, _)) in items.iter().enumerate() {
            match first.get(&p.id.0) {
                Some(&f) if items[f].0.digest != p.digest => {
                    return Err(StoreError::HashCollision(p.id));
                }
                Some(_) => {}
                None => {
                    first.insert(p.id.0, n);
                }
            }
        }
        // Each id once, in the order given: inserted unless stored, then what was stored is
        // checked (same bytes, earliest timestamp).
        let fresh: Vec<usize> = (0..items.len())
            .filter(|&n| first[&items[n].0.id.0] == n)
            .collect();
        let col = |f: &dyn Fn(&Prepared, u64) -> i64| -> Vec<i64> {
            fresh.iter().map(|&n| f(items[n].0, items[n].1)).collect()
        };
        let (id, ty, ts) = (
            col(&|p, _| key(p.id)),
            col(&|p, _| key(p.type_id)),
            col(&|_, t| i(t)),
        );
        let digest: Vec<&[u8]> = fresh.iter().map(|&n| &items[n].0.digest[..]).collect();
        let payload: Vec<&[u8]> = fresh
            .iter()
            .map(|&n| items[n].0.payload_cbor.as_slice())
            .collect();
        let refs: Vec<Vec<i64>> = fresh
            .iter()
            .map(|&n| items[n].0.refs.iter().map(|&r| key(r)).collect())
            .collect();
        // Rows in the order given (their sequence numbers are write order); an id another
        // transaction wrote meanwhile is left to it and checked below. A large batch goes
        // through COPY (binary) into a temporary table first.
        let inserted = if fresh.len() >= COPY_FROM {
            self.copy_rows(&id, &ty, &ts, &digest, &payload, &refs)?
        } else {
            // The references of all rows in one array, each row's as a slice `lo..=hi`
            // (1-based; `lo > hi` is an empty slice).
            let (mut flat, mut lo, mut hi) = (Vec::new(), Vec::new(), Vec::new());
            for r in &refs {
                lo.push(flat.len() as i32 + 1);
                flat.extend_from_slice(r);
                hi.push(flat.len() as i32);
            }
            self.s()?
                .query(
                    "INSERT INTO uwf_nodes (id, type, ts, digest, payload, refs)
                     SELECT id, type, ts, digest, payload, ($6::bigint[])[lo:hi]
                     FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bytea[], $5::bytea[],
                                 $7::int[], $8::int[])
                          WITH ORDINALITY AS t(id, type, ts, digest, payload, lo, hi, o)
                     ORDER BY o
                     ON CONFLICT (id) DO NOTHING
                     RETURNING id, seq",
                    &[&id, &ty, &ts, &digest, &payload, &flat, &lo, &hi],
                )
                .map_err(self.e())?
        };
        let inserted: HashMap<i64, i64> = inserted.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut stored = Vec::new();
        for &n in &fresh {
            if inserted.contains_key(&key(items[n].0.id)) {
                out[n] = PutOutcome::Inserted;
            } else {
                stored.push(key(items[n].0.id));
            }
        }
        if fresh.len() <= REMEMBER_BATCH {
            for &n in &fresh {
                let (p, ts) = items[n];
                if let Some(&seq) = inserted.get(&key(p.id)) {
                    self.written.push(StoredNode {
                        id: p.id,
                        type_id: p.type_id,
                        timestamp: ts,
                        seq: u(seq),
                        digest: p.digest,
                        payload_cbor: p.payload_cbor.clone(),
                    });
                }
            }
        }
        if stored.is_empty() {
            return Ok(out);
        }
        // With whether a collection is running (`uwf_gc_owner`), for the nodes put again.
        let rows = self
            .s()?
            .query(
                "SELECT id, digest, ts, EXISTS (SELECT 1 FROM uwf_gc_owner)
                 FROM uwf_nodes WHERE id = ANY($1)",
                &[&stored],
            )
            .map_err(self.e())?;
        let mut earlier: Vec<(i64, i64)> = Vec::new();
        let mut seen: HashSet<i64> = HashSet::with_capacity(rows.len());
        for r in &rows {
            let id = unkey(r.get(0));
            let n = first[&id.0];
            let d: &[u8] = r.get(1);
            if d != items[n].0.digest {
                return Err(StoreError::HashCollision(id));
            }
            if items[n].1 < u(r.get(2)) {
                earlier.push((key(id), i(items[n].1)));
            }
            seen.insert(key(id));
        }
        // A node stored when the insert ran and gone since was removed by a running collection.
        let gc_running = rows.first().is_none_or(|r| r.get::<_, bool>(3));
        if gc_running || seen.len() < stored.len() {
            // Kept by the running collection from now on; one it removed meanwhile is put anew
            // (under the lock `touch` takes, no sweep removes it again before this commits).
            let pg = self.pg;
            let kept = gc::touch(pg, &mut self.s()?.client, &stored)?;
            let again: Vec<usize> = fresh
                .iter()
                .copied()
                .filter(|&n| out[n] != PutOutcome::Inserted && !kept.contains(&key(items[n].0.id)))
                .collect();
            if !again.is_empty() {
                let retry: Vec<(&Prepared, u64)> = again.iter().map(|&n| items[n]).collect();
                for (n, o) in again.iter().zip(self.put(&retry)?) {
                    out[*n] = o;
                }
            }
        }
        for (k, ts) in earlier {
            // What this process remembers of the node is its old time: forgotten.
            self.pg
                .written
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&unkey(k));
            self.written.retain(|n| n.id != unkey(k));
            self.s()?
                .execute(
                    "UPDATE uwf_nodes SET ts = $2 WHERE id = $1 AND ts > $2",
                    &[&k, &ts],
                )
                .map_err(self.e())?;
        }
        Ok(out)
    }

    /// Inserts rows through `COPY … FROM STDIN BINARY` into a temporary table of the session,
    /// then into `uwf_nodes` with sequence numbers in their order, skipping ids present;
    /// returns the inserted ids with their sequence numbers.
    fn copy_rows(
        &mut self,
        id: &[i64],
        ty: &[i64],
        ts: &[i64],
        digest: &[&[u8]],
        payload: &[&[u8]],
        refs: &[Vec<i64>],
    ) -> Result<Vec<postgres::Row>> {
        use postgres::types::Type;
        let pg = self.pg;
        if !self.s()?.staging {
            self.s()?
                .client
                .batch_execute(
                    "CREATE TEMP TABLE IF NOT EXISTS uwf_staging (
                        seq bigint, id bigint, type bigint, ts bigint, digest bytea, payload bytea,
                        refs bigint[]
                     ) ON COMMIT DELETE ROWS",
                )
                .map_err(|e| pg.err(&e))?;
            self.s()?.staging = true;
        }
        // The rows' sequence numbers, in the order given, taken first: the insert below then
        // needs no sort of whole rows. The table's write lock comes before them, as it does
        // for an INSERT drawing its own, so that a write mark (`LOCK … IN SHARE MODE`) waits
        // for this transaction.
        self.s()?
            .client
            .batch_execute("LOCK TABLE uwf_nodes IN ROW EXCLUSIVE MODE")
            .map_err(|e| pg.err(&e))?;
        let n = i64::try_from(id.len()).unwrap_or(i64::MAX);
        let seqs: Vec<i64> = self
            .s()?
            .query(
                "SELECT nextval('uwf_node_seq') FROM generate_series(1, $1::bigint)",
                &[&n],
            )
            .map_err(self.e())?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let sink = self
            .s()?
            .client
            .copy_in(
                "COPY uwf_staging (seq, id, type, ts, digest, payload, refs) FROM STDIN BINARY",
            )
            .map_err(|e| pg.err(&e))?;
        let mut w = postgres::binary_copy::BinaryCopyInWriter::new(
            sink,
            &[
                Type::INT8,
                Type::INT8,
                Type::INT8,
                Type::INT8,
                Type::BYTEA,
                Type::BYTEA,
                Type::INT8_ARRAY,
            ],
        );
        for k in 0..id.len() {
            w.write(&[
                &seqs[k],
                &id[k],
                &ty[k],
                &ts[k],
                &digest[k],
                &payload[k],
                &refs[k],
            ])
            .map_err(|e| pg.err(&e))?;
        }
        w.finish().map_err(|e| pg.err(&e))?;
        let rows = self
            .s()?
            .query(
                "INSERT INTO uwf_nodes (id, seq, type, ts, digest, payload, refs)
                 SELECT id, seq, type, ts, digest, payload, refs FROM uwf_staging
                 ON CONFLICT (id) DO NOTHING
                 RETURNING id, seq",
                &[],
            )
            .map_err(self.e())?;
        self.s()?
            .execute("TRUNCATE uwf_staging", &[])
            .map_err(self.e())?;
        Ok(rows)
    }

    pub(crate) fn thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.lock(0, id.as_str())?;
        if let Some(p) = self.pre_of(id) {
            return p.thread.as_deref().map(dec).transpose();
        }
        let pg = self.pg;
        self.s()?.record(pg, THREAD, id.as_str())
    }

    pub(crate) fn threads(&mut self) -> Result<Vec<(ThreadId, ThreadRecord)>> {
        let pg = self.pg;
        self.s()?.records(pg, THREADS)
    }

    pub(crate) fn set_thread(&mut self, id: &ThreadId, rec: &ThreadRecord) -> Result<()> {
        self.lock(0, id.as_str())?;
        self.forget_pre(id);
        self.s()?
            .execute(
                "INSERT INTO uwf_threads (id, rec) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET rec = EXCLUDED.rec",
                &[&id.as_str(), &enc(rec)],
            )
            .map_err(self.e())?;
        self.notify = true;
        Ok(())
    }

    pub(crate) fn remove_thread(&mut self, id: &ThreadId) -> Result<Option<ThreadRecord>> {
        self.lock(0, id.as_str())?;
        self.forget_pre(id);
        let r = self
            .s()?
            .opt(
                "DELETE FROM uwf_threads WHERE id = $1 RETURNING rec",
                &[&id.as_str()],
            )
            .map_err(self.e())?;
        self.notify = true;
        r.map(|r| dec(r.get(0))).transpose()
    }

    pub(crate) fn thread_state(&mut self, id: &ThreadId) -> Result<ThreadState> {
        self.lock(0, id.as_str())?;
        if let Some(p) = self.pre_of(id) {
            return Ok(p.state.as_deref().map(dec).transpose()?.unwrap_or_default());
        }
        let pg = self.pg;
        Ok(self
            .s()?
            .record(pg, STATE, id.as_str())?
            .unwrap_or_default())
    }

    pub(crate) fn thread_states(&mut self) -> Result<Vec<(ThreadId, ThreadState)>> {
        let pg = self.pg;
        self.s()?.records(pg, STATES)
    }

    pub(crate) fn set_thread_state(&mut self, id: &ThreadId, st: &ThreadState) -> Result<()> {
        self.lock(0, id.as_str())?;
        self.forget_pre(id);
        if st.is_default() {
            return self.remove_thread_state(id);
        }
        self.s()?
            .execute(
                "INSERT INTO uwf_thread_state (thread, rec) VALUES ($1, $2)
                 ON CONFLICT (thread) DO UPDATE SET rec = EXCLUDED.rec",
                &[&id.as_str(), &enc(st)],
            )
            .map_err(self.e())?;
        self.notify = true;
        Ok(())
    }

    pub(crate) fn remove_thread_state(&mut self, id: &ThreadId) -> Result<()> {
        self.forget_pre(id);
        self.s()?
            .execute(
                "DELETE FROM uwf_thread_state WHERE thread = $1",
                &[&id.as_str()],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.lock(0, id.as_str())?;
        if let Some(p) = self.pre_of(id) {
            return p
                .lease
                .as_ref()
                .map(|(rec, unexpired)| {
                    let mut l: Lease = dec(rec)?;
                    l.unexpired = Some(*unexpired);
                    Ok(l)
                })
                .transpose();
        }
        let pg = self.pg;
        self.s()?.lease(pg, id)
    }

    pub(crate) fn set_lease(&mut self, id: &ThreadId, l: &Lease, pg: &Arc<Pg>) -> Result<()> {
        self.lock(0, id.as_str())?;
        self.forget_pre(id);
        let holder = format!("{}:{}:{}", l.boot_id, l.pid, l.start_ticks);
        self.s()?
            .execute(
                "INSERT INTO uwf_leases (thread, rec, holder, expires_at)
                 VALUES ($1, $2, $3, now() + $4::text::interval)
                 ON CONFLICT (thread) DO UPDATE
                 SET rec = EXCLUDED.rec, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at",
                &[&id.as_str(), &enc(l), &holder, &LEASE_TTL],
            )
            .map_err(self.e())?;
        if l.pid == std::process::id() && pg.holder.set(holder.clone()).is_ok() {
            pg.start_heartbeat(&holder);
        }
        Ok(())
    }

    pub(crate) fn remove_lease(&mut self, id: &ThreadId) -> Result<Option<Lease>> {
        self.lock(0, id.as_str())?;
        self.forget_pre(id);
        let r = self
            .s()?
            .opt(
                "DELETE FROM uwf_leases WHERE thread = $1 RETURNING rec, expires_at > now()",
                &[&id.as_str()],
            )
            .map_err(self.e())?;
        if r.is_some() {
            self.notify = true;
        }
        r.map(|r| lease_of_row(&r, 0)).transpose()
    }

    pub(crate) fn registry_get(&mut self, name: &str) -> Result<Option<NodeId>> {
        self.lock(1, name)?;
        let r = self
            .s()?
            .opt(
                "SELECT workflow FROM uwf_registry WHERE name = $1",
                &[&name],
            )
            .map_err(self.e())?;
        Ok(r.map(|r| unkey(r.get(0))))
    }

    pub(crate) fn set_registry_name(&mut self, name: &str, workflow: NodeId) -> Result<()> {
        self.lock(1, name)?;
        self.s()?
            .execute(
                "INSERT INTO uwf_registry (name, workflow) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET workflow = EXCLUDED.workflow",
                &[&name, &key(workflow)],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn append_registry_version(&mut self, name: &str, e: &RegistryEntry) -> Result<()> {
        self.s()?
            .execute(
                "INSERT INTO uwf_registry_history (name, rec) VALUES ($1, $2)",
                &[&name, &enc(e)],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn has_registry_history(&mut self, name: &str) -> Result<bool> {
        Ok(self
            .s()?
            .opt(
                "SELECT 1 FROM uwf_registry_history WHERE name = $1 LIMIT 1",
                &[&name],
            )
            .map_err(self.e())?
            .is_some())
    }

    pub(crate) fn remove_registry_name(&mut self, name: &str, purge: bool) -> Result<bool> {
        self.lock(1, name)?;
        let had = self
            .s()?
            .execute("DELETE FROM uwf_registry WHERE name = $1", &[&name])
            .map_err(self.e())?
            > 0;
        if purge {
            self.s()?
                .execute("DELETE FROM uwf_registry_history WHERE name = $1", &[&name])
                .map_err(self.e())?;
        }
        Ok(had)
    }

    pub(crate) fn append_history(&mut self, e: &HistoryEntry) -> Result<()> {
        self.s()?
            .execute(
                "INSERT INTO uwf_history (thread, rec) VALUES ($1, $2)",
                &[&e.thread, &enc(e)],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub(crate) fn remove_history_of(&mut self, id: &ThreadId) -> Result<usize> {
        let n = self
            .s()?
            .execute("DELETE FROM uwf_history WHERE thread = $1", &[&id.as_str()])
            .map_err(self.e())?;
        Ok(n as usize)
    }

    /// The history entries of thread `thread`, oldest first; only the latest with `latest`.
    pub(crate) fn history_entries_of(
        &mut self,
        thread: &str,
        latest: bool,
    ) -> Result<Vec<HistoryEntry>> {
        let sql = if latest {
            "SELECT rec FROM uwf_history WHERE thread = $1 ORDER BY seq DESC LIMIT 1"
        } else {
            "SELECT rec FROM uwf_history WHERE thread = $1 ORDER BY seq"
        };
        let rows = self.s()?.query(sql, &[&thread]).map_err(self.e())?;
        rows.iter().map(|r| dec(r.get(0))).collect()
    }

    pub(crate) fn set_workflow_limits(
        &mut self,
        name: &str,
        limits: Option<&WorkflowLimits>,
    ) -> Result<Option<WorkflowLimits>> {
        self.lock(2, name)?;
        let old = self
            .s()?
            .opt("SELECT rec FROM uwf_limits WHERE name = $1", &[&name])
            .map_err(self.e())?;
        match limits {
            Some(l) => self.s()?.execute(
                "INSERT INTO uwf_limits (name, rec) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET rec = EXCLUDED.rec",
                &[&name, &enc(l)],
            ),
            None => self
                .s()?
                .execute("DELETE FROM uwf_limits WHERE name = $1", &[&name]),
        }
        .map_err(self.e())?;
        old.map(|r| dec(r.get(0))).transpose()
    }

    pub(crate) fn lock_workflow(&mut self, key: &str) -> Result<()> {
        self.lock(3, key)
    }

    pub(crate) fn record_removal(&mut self, r: &Removal) -> Result<()> {
        self.s()?
            .execute("INSERT INTO uwf_removals (rec) VALUES ($1)", &[&enc(r)])
            .map_err(self.e())?;
        Ok(())
    }
}

/// What garbage collection, pins and counts (`pg_gc`) reach of a session and a transaction.
impl Session {
    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl PgWriter<'_> {
    /// The server, the transaction's client (the transaction begun) and the advisory lock
    /// keys it holds.
    pub(crate) fn parts(&mut self) -> Result<(&Pg, &mut Client, &mut HashSet<i64>)> {
        self.s()?;
        Ok((self.pg, &mut self.sess.client, &mut self.locked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bytea_in_text_form_is_decoded_or_refused() {
        assert_eq!(unhex("\\x00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(unhex("\\x"), Some(vec![]));
        assert_eq!(unhex("\\x0"), None);
        assert_eq!(unhex("\\xzz"), None);
        assert_eq!(unhex("00ff"), None);
    }

    #[test]
    fn a_url_is_masked_and_named_without_its_password() {
        assert_eq!(
            mask_url("postgres://bob:s3cret@db.example:5433/uwf?sslmode=require"),
            "postgres://bob@db.example:5433/uwf?sslmode=require"
        );
        assert_eq!(mask_url("postgresql://db/uwf"), "postgresql://db/uwf");
        let env = |_: &str| None;
        let c = config_of("postgres://bob:s3cret@db.example:5433/uwf", &env).unwrap();
        assert_eq!(server_name(&c), "postgres://bob@db.example:5433/uwf");
        assert!(!server_name(&c).contains("s3cret"));
    }

    #[test]
    fn libpq_variables_fill_what_the_url_leaves_out() {
        let env = |k: &str| match k {
            "PGHOST" => Some("10.1.2.3".to_string()),
            "PGPORT" => Some("6543".to_string()),
            "PGUSER" => Some("carol".to_string()),
            "PGPASSWORD" => Some("pw".to_string()),
            "PGDATABASE" => Some("flows".to_string()),
            _ => None,
        };
        let c = config_of("postgres://", &env).unwrap();
        assert_eq!(server_name(&c), "postgres://carol@10.1.2.3:6543/flows");
        assert_eq!(c.get_password(), Some(&b"pw"[..]));
        let c = config_of("postgres://dave@h/x", &env).unwrap();
        assert_eq!(server_name(&c), "postgres://dave@h:6543/x");
        // A port in the URL wins.
        let c = config_of("postgres://dave:pw@h:7000/x", &env).unwrap();
        assert_eq!(server_name(&c), "postgres://dave@h:7000/x");
        assert_eq!(c.get_password(), Some(&b"pw"[..]));
    }

    #[test]
    fn stored_keys_keep_id_order() {
        let ids = [0u64, 1, 1 << 62, (1 << 63) - 1, 1 << 63, u64::MAX];
        for w in ids.windows(2) {
            assert!(key(NodeId(w[0])) < key(NodeId(w[1])));
            assert_eq!(unkey(key(NodeId(w[0]))), NodeId(w[0]));
        }
    }
}
