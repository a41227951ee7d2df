//! PostgreSQL servers for the tests of the PostgreSQL store.
//!
//! [`server`] gives the test process one server, started on first use and shared by every test
//! running on its threads (`cargo test`) or by the one test of the process (`cargo nextest`).
//! A test takes a database of its own with [`PgServer::fresh_database`] and connects to the
//! URL it returns.
//!
//! - With `UWF_TEST_PG=postgres://…` (a server where that user may `CREATE DATABASE`), the
//!   databases are created there, named `uwf_test_<pid>_<n>`, and left behind.
//! - Otherwise the harness starts a private server from the PostgreSQL binaries (`pg_config
//!   --bindir`, else the highest `/usr/lib/postgresql/*/bin`): a data directory under the
//!   system's temporary directory, listening on a free port of 127.0.0.1 only (and a Unix socket
//!   in that directory), trust authentication as user `postgres`, durability off (`fsync`,
//!   `synchronous_commit`, `full_page_writes`), `max_connections=300` (pools of tests on many
//!   threads). `initdb` runs once per target directory and PostgreSQL version: its
//!   result is kept in `CARGO_TARGET_TMPDIR` as a template (under a file lock, so concurrent
//!   test processes wait for the first) and each process copies it.
//! - `initdb`, `pg_ctl` and `postgres` refuse to run as root: as root they run as the `postgres`
//!   system user (through `setpriv`, else `runuser`), which owns the data directory.
//! - A private server ends with the test process, however it ends: a reaper shell, spawned in
//!   a process group of its own before the server starts, waits for end of file on a pipe whose
//!   only writer is this process (the kernel closes it when the process exits or is killed),
//!   then stops the server (`pg_ctl stop -m immediate`) and removes the directory.
//!
//! When no server can be had, [`server`] returns `None` after one line on stderr saying why
//! (the tests that need it return early), unless `CI` is set: then it panics.
//!
//! [`PgServer::restart`] cuts every connection to the server, including those of the other
//! tests running on threads of the same process: a test that restarts the server takes one of
//! its own with [`dedicated`].

#![allow(dead_code)] // Not every helper is used by every test.
#![allow(unsafe_code)] // `geteuid`, which cannot fail.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable naming an existing server to use instead of a private one.
pub const ENV_URL: &str = "UWF_TEST_PG";

/// The test server of this process, started on first use; None (after printing one line to
/// stderr saying the PostgreSQL tests are skipped and why) when no server can be had and CI is
/// not set; panics with a clear message when CI is set (env `CI` non-empty) and none can be had.
pub fn server() -> Option<&'static PgServer> {
    static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
    let server = SERVER.get_or_init(|| {
        let server = match std::env::var(ENV_URL) {
            Ok(url) if !url.is_empty() => PgServer::external(url),
            _ => PgServer::private(""),
        };
        if let Err(why) = &server
            && !in_ci()
        {
            skip_note(why);
        }
        server
    });
    match server {
        Ok(server) => Some(server),
        Err(why) => {
            assert!(
                !in_ci(),
                "the PostgreSQL tests need a server (CI is set): {why}"
            );
            None
        }
    }
}

/// A private server of the caller's own, stopped and removed when it is dropped (or when the
/// process ends): for tests that [`restart`](PgServer::restart) it, which would otherwise cut
/// the connections of the other tests sharing [`server`]. None (after a note on stderr) when
/// none can be started and CI is not set, or when `UWF_TEST_PG` is set (a machine without local
/// binaries); panics when CI is set and `UWF_TEST_PG` is not.
pub fn dedicated() -> Option<PgServer> {
    dedicated_with("")
}

/// A [`dedicated`] server started with the server options `extra` after the harness's own (a
/// later `-c` wins): e.g. `-c fsync=on -c synchronous_commit=on -c full_page_writes=on` for a
/// durable server, as the benches use.
pub fn dedicated_with(extra: &str) -> Option<PgServer> {
    match PgServer::private(extra) {
        Ok(server) => Some(server),
        Err(why) if in_ci() && std::env::var_os(ENV_URL).is_none_or(|v| v.is_empty()) => {
            panic!("the PostgreSQL tests need a private server (CI is set): {why}")
        }
        Err(why) => {
            skip_note(&why);
            None
        }
    }
}

/// A PostgreSQL server for tests: a private one this harness started, or the one of
/// `UWF_TEST_PG`.
pub struct PgServer {
    kind: Kind,
    port: u16,
    /// Numbers the databases of [`PgServer::fresh_database`].
    next: AtomicU64,
}

enum Kind {
    /// The server of `UWF_TEST_PG`, by its URL.
    External(String),
    Private(Private),
}

/// A server this harness started.
struct Private {
    bin: PathBuf,
    /// The directory of this server: `data/` (the cluster), `log`, the Unix socket.
    root: PathBuf,
    /// Whether the PostgreSQL programs run as the `postgres` user (this process is root).
    as_postgres: bool,
    /// The reaper and the write end of its pipe: closing it stops the server.
    reaper: Mutex<Option<(Child, ChildStdin)>>,
}

impl PgServer {
    /// A URL (postgres://user@127.0.0.1:PORT/DBNAME, no password needed: trust auth on a
    /// private server) of a new, empty database created for the caller; unique name each call.
    pub fn fresh_database(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("uwf_test_{}_{n}", std::process::id());
        let admin = self.admin_url();
        let mut client = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to the test server at {admin}: {e}"));
        let quoted = quote_ident(&name);
        let mut execute = |sql: &str| {
            client.batch_execute(sql).unwrap_or_else(|e| {
                panic!("cannot create database {name} at {admin}: {}", db_error(&e))
            })
        };
        // A database left by a dead process with the same pid, on a server that outlives runs
        // (CREATE and DROP DATABASE each run outside a transaction: two statements).
        if !self.is_private() {
            execute(&format!("DROP DATABASE IF EXISTS {quoted}"));
        }
        execute(&format!("CREATE DATABASE {quoted}"));
        self.url_of(&name)
    }

    /// The URL of the maintenance database (`postgres`).
    pub fn admin_url(&self) -> String {
        self.url_of("postgres")
    }

    /// Restarts the server (`pg_ctl restart -m fast`), for connection-loss tests; only for the
    /// private server (panics for `UWF_TEST_PG`: check [`PgServer::is_private`] first). Every
    /// connection to the server is cut; see [`dedicated`].
    pub fn restart(&self) {
        let Kind::Private(p) = &self.kind else {
            panic!("restart needs a private server, not the one of {ENV_URL}; check is_private()")
        };
        let out = p
            .tool("pg_ctl")
            .args(["restart", "-m", "fast", "-w", "-t", "60", "-D"])
            .arg(p.root.join("data"))
            .arg("-l")
            .arg(p.root.join("log"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run pg_ctl restart: {e}"));
        assert!(
            out.status.success(),
            "pg_ctl restart failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            p.log_tail()
        );
    }

    /// Whether this is a private server this harness started (false for UWF_TEST_PG).
    pub fn is_private(&self) -> bool {
        matches!(self.kind, Kind::Private(_))
    }

    /// The TCP port of the server (on 127.0.0.1 for a private one).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's URL with `db` as the database.
    fn url_of(&self, db: &str) -> String {
        match &self.kind {
            Kind::External(url) => with_database(url, db),
            Kind::Private(_) => format!("postgres://postgres@127.0.0.1:{}/{db}", self.port),
        }
    }

    /// The server of `UWF_TEST_PG`.
    fn external(url: String) -> Result<PgServer, String> {
        if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
            return Err(format!("{ENV_URL}={url:?} is not a postgres:// URL"));
        }
        let config: postgres::Config = url
            .parse()
            .map_err(|e| format!("{ENV_URL}={url:?} is not a PostgreSQL URL: {e}"))?;
        let port = config.get_ports().first().copied().unwrap_or(5432);
        Ok(PgServer {
            kind: Kind::External(url),
            port,
            next: AtomicU64::new(0),
        })
    }

    /// Starts a private server, with the server options `extra` after the harness's own.
    fn private(extra: &str) -> Result<PgServer, String> {
        let bin = bindir()?;
        let as_postgres = is_root();
        let root = tempfile::Builder::new()
            .prefix("uwf-pg-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?
            .keep();
        if as_postgres {
            run(Command::new("chown").arg("postgres:").arg(&root))
                .map_err(|e| format!("{e} (as root the server runs as the postgres user)"))?;
        }
        // From here on, dropping `p` (on an error too) stops the server and removes `root`.
        let p = Private {
            reaper: Mutex::new(Some(reaper(&bin, &root, as_postgres)?)),
            bin,
            root,
            as_postgres,
        };
        p.prepare_data()?;
        let port = p.start(extra)?;
        Ok(PgServer {
            kind: Kind::Private(p),
            port,
            next: AtomicU64::new(0),
        })
    }
}

impl Private {
    /// A command running PostgreSQL program `tool`, as the `postgres` user when root, in the
    /// server's directory (the caller's may be closed to that user).
    fn tool(&self, tool: &str) -> Command {
        let mut cmd = run_as(self.as_postgres, &self.bin.join(tool));
        cmd.current_dir(&self.root);
        cmd
    }

    /// Creates `data/`: a copy of the cached template, or `initdb` (which then fills the cache).
    fn prepare_data(&self) -> Result<(), String> {
        let data = self.root.join("data");
        let Ok(cache) = Template::lock(&self.bin, self.as_postgres) else {
            return self.initdb();
        };
        if cache.dir.is_dir() {
            if run(Command::new("cp").arg("-a").arg(&cache.dir).arg(&data)).is_ok() {
                return Ok(());
            }
            let _ = std::fs::remove_dir_all(&data);
        }
        self.initdb()?;
        cache.store(&data);
        Ok(())
    }

    fn initdb(&self) -> Result<(), String> {
        run(self
            .tool("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(self.root.join("data")))
    }

    /// Starts the server on a free port of 127.0.0.1 (another one if that fails), with the
    /// server options `extra` after the harness's own, and waits until it accepts connections;
    /// returns the port.
    fn start(&self, extra: &str) -> Result<u16, String> {
        let mut why = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let opts = format!(
                "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off \
                 -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 {extra}",
                shell_quote(&self.root.to_string_lossy())
            );
            let out = self
                .tool("pg_ctl")
                .args(["start", "-w", "-t", "60", "-D"])
                .arg(self.root.join("data"))
                .arg("-l")
                .arg(self.root.join("log"))
                .arg("-o")
                .arg(opts)
                .output()
                .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
            if out.status.success() {
                return Ok(port);
            }
            why = format!(
                "pg_ctl start failed: {}{}",
                String::from_utf8_lossy(&out.stderr).trim(),
                self.log_tail()
            );
        }
        Err(why)
    }

    /// The end of the server's log, for an error message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.root.join("log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join("\n");
        if tail.is_empty() {
            tail
        } else {
            format!("\nserver log:\n{tail}")
        }
    }
}

impl Drop for Private {
    /// Stops the server and removes its directory (through the reaper), and waits for that.
    fn drop(&mut self) {
        let reaper = self
            .reaper
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((mut child, stdin)) = reaper {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// The template cluster in `CARGO_TARGET_TMPDIR`, locked for as long as this lives.
struct Template {
    dir: PathBuf,
    _lock: std::fs::File,
}

impl Template {
    /// Locks the template of this PostgreSQL version and owner (waiting for another process
    /// that is making it).
    fn lock(bin: &Path, as_postgres: bool) -> Result<Template, String> {
        let version = Command::new(bin.join("pg_ctl"))
            .arg("--version")
            .output()
            .map_err(|e| e.to_string())?;
        let key: String = format!(
            "{}-{}",
            String::from_utf8_lossy(&version.stdout).trim(),
            if as_postgres { "postgres" } else { "self" }
        )
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pg-template");
        std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
        let lock =
            std::fs::File::create(cache.join(format!("{key}.lock"))).map_err(|e| e.to_string())?;
        lock.lock().map_err(|e| e.to_string())?;
        Ok(Template {
            dir: cache.join(key),
            _lock: lock,
        })
    }

    /// Keeps a copy of the fresh cluster `data` as the template (best effort: the next process
    /// runs initdb again when this fails).
    fn store(&self, data: &Path) {
        let partial = self.dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        if run(Command::new("cp").arg("-a").arg(data).arg(&partial)).is_ok() {
            let _ = std::fs::rename(&partial, &self.dir);
        }
        let _ = std::fs::remove_dir_all(&partial);
    }
}

/// Spawns the reaper of the server in `root`: once its stdin reaches end of file (this process
/// closed the returned pipe or ended) it stops the server and removes `root`. In a process group
/// of its own, so that a signal to the test's group (Ctrl-C, a test runner's timeout) leaves it
/// to do that.
fn reaper(bin: &Path, root: &Path, as_postgres: bool) -> Result<(Child, ChildStdin), String> {
    let script = r#"root=$1; shift; cat >/dev/null
if [ -f "$root/data/postmaster.pid" ]; then "$@" -D "$root/data" stop -m immediate -w; fi
rm -rf "$root""#;
    let pg_ctl = run_as(as_postgres, &bin.join("pg_ctl"));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg("uwf-pg-reaper")
        .arg(root)
        .arg(pg_ctl.get_program())
        .args(pg_ctl.get_args())
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn the reaper (sh): {e}"))?;
    let stdin = child.stdin.take().expect("stdin is piped");
    Ok((child, stdin))
}

/// A command running `program`, through `setpriv` (else `runuser`) as the `postgres` user when
/// `as_postgres`.
fn run_as(as_postgres: bool, program: &Path) -> Command {
    if !as_postgres {
        return Command::new(program);
    }
    let mut cmd;
    if Path::new("/usr/bin/setpriv").exists() || on_path("setpriv") {
        cmd = Command::new("setpriv");
        cmd.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]);
    } else {
        cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]);
    }
    cmd.arg(program);
    cmd
}

/// Runs `cmd` to completion; its stderr in the error.
fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The directory of the PostgreSQL server programs: `pg_config --bindir`, else the highest
/// version under `/usr/lib/postgresql` (Debian's `pg_config` may come from libpq-dev alone).
fn bindir() -> Result<PathBuf, String> {
    let has_server = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_server(&dir) {
            return Ok(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has_server(d))
        .collect();
    versions.sort();
    versions.pop().map(|(_, d)| d).ok_or_else(|| {
        "no PostgreSQL server binaries (initdb, pg_ctl) from pg_config --bindir or in \
         /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql; or set UWF_TEST_PG)"
            .to_string()
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The one line saying the PostgreSQL tests are skipped, written past the test harness's
/// capture of `eprintln!`.
fn skip_note(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "note: the PostgreSQL tests are skipped: {}",
        why.replace('\n', " ")
    );
}

/// A free TCP port of 127.0.0.1 (bound, then released).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// The server's message in a PostgreSQL error (its `Display` says only "db error").
fn db_error(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `s` as one word for `sh`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `url` (`postgres://user@host:port/db?params`) with database `db`.
fn with_database(url: &str, db: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let query_at = rest.find('?').unwrap_or(rest.len());
    let path_at = rest[..query_at].find('/').unwrap_or(query_at);
    format!(
        "{}{}/{db}{}",
        &url[..start],
        &rest[..path_at],
        &rest[query_at..]
    )
}

#[test]
fn with_database_replaces_only_the_path() {
    assert_eq!(
        with_database("postgres://u:p@h:5/x?sslmode=disable", "y"),
        "postgres://u:p@h:5/y?sslmode=disable"
    );
    assert_eq!(with_database("postgresql://h", "y"), "postgresql://h/y");
    assert_eq!(
        with_database("postgres://h/?a=b", "y"),
        "postgres://h/y?a=b"
    );
}

#[test]
fn a_fresh_database_is_empty_and_distinct_from_another() {
    let Some(server) = server() else { return };
    let (a, b) = (server.fresh_database(), server.fresh_database());
    assert_ne!(a, b);
    let mut a = postgres::Client::connect(&a, postgres::NoTls).unwrap();
    let mut b = postgres::Client::connect(&b, postgres::NoTls).unwrap();
    let tables = "SELECT count(*) FROM pg_tables \
                  WHERE schemaname NOT IN ('pg_catalog', 'information_schema')";
    let count = |c: &mut postgres::Client| c.query_one(tables, &[]).unwrap().get::<_, i64>(0);
    assert_eq!(count(&mut a), 0);
    a.batch_execute("CREATE TABLE t (x int)").unwrap();
    assert_eq!(count(&mut a), 1);
    assert_eq!(count(&mut b), 0);
    let db = |c: &mut postgres::Client| {
        c.query_one("SELECT current_database()", &[])
            .unwrap()
            .get::<_, String>(0)
    };
    assert_ne!(db(&mut a), db(&mut b));
    if server.is_private() {
        let listen = a
            .query_one("SHOW listen_addresses", &[])
            .unwrap()
            .get::<_, String>(0);
        assert_eq!(listen, "127.0.0.1");
    }
}

#[test]
fn restart_keeps_the_data_written_before_it() {
    let Some(server) = dedicated() else { return };
    let url = server.fresh_database();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE TABLE t (x text); INSERT INTO t VALUES ('kept')")
        .unwrap();
    server.restart();
    assert!(
        c.query_one("SELECT 1", &[]).is_err(),
        "the old connection survived the restart"
    );
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let x: String = c.query_one("SELECT x FROM t", &[]).unwrap().get(0);
    assert_eq!(x, "kept");
}

#[test]
fn a_dropped_dedicated_server_is_stopped_and_removed() {
    let Some(server) = dedicated() else { return };
    let Kind::Private(p) = &server.kind else {
        unreachable!("dedicated servers are private")
    };
    let root = p.root.clone();
    assert!(root.join("data/postmaster.pid").is_file());
    let admin = server.admin_url();
    postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    drop(server);
    assert!(!root.exists(), "{} left behind", root.display());
    assert!(postgres::Client::connect(&admin, postgres::NoTls).is_err());
}

/// A ten-role line workflow (`ten`: r0 → … → r9) and a scripted-agent script giving each
/// role one note, for the many-runner test and benchmark.
pub fn ten_roles() -> (String, String) {
    let roles: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    let mut wf = String::from("name: ten\ndescription: ten roles in a row\nroles:\n");
    let mut script = String::new();
    for r in &roles {
        wf.push_str(&format!(
            "  {r}: {{description: a role, goal: go, capabilities: [], procedure: do it, output: a note, frontmatter: {{type: object, properties: {{note: {{type: string}}}}, required: [note]}}}}\n"
        ));
        script.push_str(&format!("{r}:\n  - note: {r} done\n"));
    }
    wf.push_str("graph:\n  $START: {_: {role: r0, prompt: start}}\n");
    for (i, r) in roles.iter().enumerate() {
        let next = roles.get(i + 1).map_or("$END", String::as_str);
        wf.push_str(&format!("  {r}: {{_: {{role: {next}, prompt: next}}}}\n"));
    }
    (wf, script)
}
