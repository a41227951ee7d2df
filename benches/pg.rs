//! The PostgreSQL store beside redb, in the same run, against a private local server started by
//! the test harness (`tests/it/pg.rs`) with durable settings (`fsync`, `synchronous_commit`,
//! `full_page_writes` on), as redb's commits are durable:
//! - `pg_put`: 100,000 generated nodes (the fixed-seed generator of `cas`) put in batches of
//!   10,000, one commit a batch, into a fresh store (a fresh database);
//! - `pg_cli_get`: one `uwf cas get <id>` process (`UWF_STORE` names the store);
//! - `pg_walk` and `pg_cli_walk`: the walk of the long chain (a quarter of the nodes) of a
//!   100,000-node store (with `UWF_BENCH_PG_1M=1`, a 1M-node store with its 250k chain), by
//!   `Store::walk` and by `uwf cas walk`;
//! - `pg_thread_step`: one `uwf thread step T --agent "uwf agent scripted --script F"` process;
//! - `runners`: four `uwf run --until-idle -j 4` processes (a root of their own each, one
//!   `UWF_STORE`) with the in-process scripted agent over 200 threads × 10 steps of a ten-role
//!   line (`UWF_BENCH_PG_THREADS`, `UWF_BENCH_PG_JOBS`), timed three times
//!   (`UWF_BENCH_PG_RUNS`) outside criterion (a run is a few seconds plus its setup), with the
//!   CPU time of the runners and of the server;
//! - `round trips`: what bounds the per-process figures: the time of one round trip and of one
//!   connection, and the round trips (`sendto` calls, by strace) of one `cas get` and one
//!   `thread step` process;
//! - `start`: `thread start --batch` of 100,000 threads (`UWF_BENCH_PG_START`) in one process, into
//!   a fresh store, timed three times.
//!
//! With `UWF_BENCH_PG_STATS=1` the server loads `pg_stat_statements` and the statements of one
//! `thread step`, one `cas get` and the runners are printed (calls and mean time each).
//! `UWF_BENCH_ONLY=put,get,walk,step,runners,start,rtt` picks groups. With `UWF_BENCH_PG_POOLER=1`
//! (and `pgbouncer` installed), `cas get` and `thread step` processes are also timed through
//! PgBouncer in session mode, beside the same processes connecting directly.
//!
//! ```sh
//! cargo build --release --bin uwf && cargo bench --bench pg
//! UWF_BENCH_PG_1M=1 cargo bench --bench pg
//! ```

#![allow(clippy::unwrap_used)] // A bench fails loudly on an unexpected error.

mod common;
#[path = "common/data.rs"]
mod data;
#[path = "common/nodegen.rs"]
mod nodegen;
#[path = "../tests/it/pg.rs"]
mod pg;

use common::{stdout_of, uwf_bin};
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uwf::cas::NodeId;
use uwf::store::{Prepared, Store};

/// Nodes a put (one commit each).
const BATCH: usize = 10_000;
/// Nodes of the batch-put bench.
const PUT_NODES: usize = 100_000;
/// The fixed clock of every put.
const NOW_MS: u64 = 1_700_000_000_000;
/// The server options making the harness's server durable (it turns them off for tests).
const DURABLE: &str = "-c fsync=on -c synchronous_commit=on -c full_page_writes=on";

fn on(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

fn env_num(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The two backends, as `UWF_STORE` values and open stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Redb,
    Postgres,
}

impl Backend {
    const BOTH: [Backend; 2] = [Backend::Redb, Backend::Postgres];

    fn name(self) -> &'static str {
        match self {
            Backend::Redb => "redb",
            Backend::Postgres => "postgres",
        }
    }
}

/// A store of either backend: where it is (`UWF_STORE`) and the open handle.
struct Place {
    backend: Backend,
    /// The redb file or the database URL.
    store_env: String,
    /// The root (`UWF_HOME`) of the processes run on it.
    home: PathBuf,
    /// The database's name, to drop it (PostgreSQL).
    db: Option<String>,
}

/// The server and what the bench made on it.
struct Bench {
    server: pg::PgServer,
    /// PgBouncer in front of the server (`UWF_BENCH_PG_POOLER=1`).
    pooler: Option<Pooler>,
    stats: bool,
    tmp: tempfile::TempDir,
    next: std::cell::Cell<usize>,
}

impl Bench {
    fn new() -> Option<Bench> {
        let stats = on("UWF_BENCH_PG_STATS");
        let mut opts = DURABLE.to_string();
        if stats {
            opts.push_str(
                " -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all",
            );
        }
        let server = pg::dedicated_with(&opts)?;
        let pooler = on("UWF_BENCH_PG_POOLER")
            .then(|| Pooler::start(&server))
            .flatten();
        let b = Bench {
            server,
            pooler,
            stats,
            tmp: tempfile::tempdir().unwrap(),
            next: std::cell::Cell::new(0),
        };
        let mut admin = b.admin();
        for s in [
            "fsync",
            "synchronous_commit",
            "full_page_writes",
            "server_version",
        ] {
            let v: String = admin.query_one(&format!("SHOW {s}"), &[]).unwrap().get(0);
            eprintln!("server: {s} = {v}");
        }
        if stats {
            admin
                .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .unwrap();
        }
        Some(b)
    }

    fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.server.admin_url(), postgres::NoTls).unwrap()
    }

    /// A fresh, empty store of `backend` with a root of its own.
    fn place(&self, backend: Backend) -> Place {
        let n = self.next.get();
        self.next.set(n + 1);
        let home = self.tmp.path().join(format!("{}-{n}", backend.name()));
        std::fs::create_dir_all(&home).unwrap();
        match backend {
            Backend::Redb => Place {
                backend,
                store_env: home.join(uwf::store::DB_FILE).display().to_string(),
                home,
                db: None,
            },
            Backend::Postgres => {
                let url = self.server.fresh_database();
                let db = url.rsplit('/').next().unwrap().to_string();
                Place {
                    backend,
                    store_env: url,
                    home,
                    db: Some(db),
                }
            }
        }
    }

    /// Removes a place's store (its file, its database).
    fn remove(&self, p: Place) {
        let _ = std::fs::remove_dir_all(&p.home);
        if let Some(db) = p.db {
            self.admin()
                .batch_execute(&format!("DROP DATABASE \"{db}\" WITH (FORCE)"))
                .unwrap();
        }
    }

    /// The server's CPU time so far: the postmaster's and that of the backends it reaped, plus
    /// the live backends' (from /proc; the server runs on this machine).
    fn server_cpu(&self) -> Duration {
        let mut c = self.admin();
        let me: i32 = c.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        let ppid = proc_stat(me as u32).map_or(0, |f| f[1] as u32);
        drop(c);
        let mut ticks = proc_stat(ppid).map_or(0, |f| f[11] + f[12] + f[13] + f[14]);
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(f) = proc_stat(pid)
                && f[1] as u32 == ppid
            {
                ticks += f[11] + f[12];
            }
        }
        Duration::from_millis(ticks * 10)
    }

    /// Prints the statements run since the last call (with `UWF_BENCH_PG_STATS=1`).
    fn statements(&self, what: &str) {
        if !self.stats {
            return;
        }
        let mut c = self.admin();
        let rows = c
            .query(
                "SELECT calls, mean_exec_time, regexp_replace(query, '\\s+', ' ', 'g')
                 FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
                 ORDER BY total_exec_time DESC LIMIT 25",
                &[],
            )
            .unwrap();
        let total: i64 = c
            .query_one(
                "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
                 WHERE query NOT LIKE '%pg_stat_statements%'",
                &[],
            )
            .unwrap()
            .get(0);
        eprintln!("statements of {what}: {total} calls");
        for r in rows {
            let q: String = r.get(2);
            let q: String = q.chars().take(110).collect();
            eprintln!(
                "  {:>7} × {:>7.3} ms  {q}",
                r.get::<_, i64>(0),
                r.get::<_, f64>(1)
            );
        }
        self.reset_statements();
    }

    fn reset_statements(&self) {
        if self.stats {
            self.admin()
                .batch_execute("SELECT pg_stat_statements_reset()")
                .unwrap();
        }
    }
}

/// The fields of /proc/PID/stat after the command name (index 0 is the state, 1 the parent,
/// 11–14 utime, stime, cutime, cstime in ticks).
fn proc_stat(pid: u32) -> Option<Vec<u64>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    Some(
        rest.split(' ')
            .map(|f| f.parse::<i64>().unwrap_or(0).max(0) as u64)
            .collect(),
    )
}

/// CPU time of this process.
fn own_cpu() -> Duration {
    let f = proc_stat(std::process::id()).unwrap();
    Duration::from_millis((f[11] + f[12]) * 10)
}

/// CPU time of this process's reaped children.
fn children_cpu() -> Duration {
    let f = proc_stat(std::process::id()).unwrap();
    Duration::from_millis((f[13] + f[14]) * 10)
}

impl Place {
    fn open(&self) -> Store {
        match self.backend {
            Backend::Redb => Store::open(Path::new(&self.store_env)).unwrap(),
            Backend::Postgres => Store::open_url(&self.store_env, &|_| None).unwrap(),
        }
    }

    /// A `uwf` process on this store.
    fn cmd(&self, home: &Path) -> Command {
        let mut c = Command::new(uwf_bin());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", home)
            .env("HOME", home)
            .env("UWF_STORE", &self.store_env)
            .stdin(Stdio::null());
        c
    }

    /// Runs `uwf args` on this store and root; its standard output.
    fn uwf(&self, args: &[&str]) -> String {
        let what = format!("uwf {args:?} on {}", self.backend.name());
        String::from_utf8(stdout_of(self.cmd(&self.home).args(args), &what)).unwrap()
    }
}

/// PgBouncer in session mode in front of the bench's private server (`UWF_BENCH_PG_POOLER=1`,
/// `pgbouncer` from Debian's package): a process's connection then gets a backend the pooler
/// keeps (its caches warm) instead of a new one forked for it.
struct Pooler {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Pooler {
    fn start(server: &pg::PgServer) -> Option<Pooler> {
        let bin = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file());
        let Some(bin) = bin.filter(|_| server.is_private()) else {
            eprintln!(
                "pooler: no pgbouncer (or not a private server): the pooled lines are skipped"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ini = dir.path().join("pgbouncer.ini");
        let users = dir.path().join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").unwrap();
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host=127.0.0.1 port={}\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {}\n\
                 pool_mode = session\nmax_client_conn = 200\ndefault_pool_size = 40\n",
                server.port(),
                users.display()
            ),
        )
        .unwrap();
        // PgBouncer refuses to run as root: as the server's user, then.
        let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
        let mut cmd = if root {
            Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            let mut c = Command::new("setpriv");
            c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
                .arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        let child = cmd
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pooler = Pooler {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                eprintln!("pooler: pgbouncer (session pooling) on 127.0.0.1:{port}");
                return Some(pooler);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("pgbouncer did not listen on 127.0.0.1:{port}");
    }

    /// `p` reached through the pooler.
    fn place(&self, p: &Place) -> Place {
        Place {
            backend: p.backend,
            store_env: format!(
                "postgres://postgres@127.0.0.1:{}/{}",
                self.port,
                p.db.as_deref().unwrap()
            ),
            home: p.home.clone(),
            db: None,
        }
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `uwf args` [`PROCESS_RUNS`] times on `p`; prints the wall time and the client's and
/// the server's CPU a process.
fn per_process(b: &Bench, p: &Place, what: &str, args: &[&str]) {
    let (cpu0, server0, t) = (children_cpu(), b.server_cpu(), Instant::now());
    for _ in 0..PROCESS_RUNS {
        black_box(p.uwf(args));
    }
    let wall = t.elapsed() / PROCESS_RUNS;
    let (cpu, server) = (children_cpu() - cpu0, b.server_cpu() - server0);
    eprintln!(
        "{what}: {wall:.2?} a process; CPU {:.2?} (client), {:.2?} (server)",
        cpu / PROCESS_RUNS,
        server / PROCESS_RUNS
    );
}

/// Processes timed by [`per_process`].
const PROCESS_RUNS: u32 = 50;

fn load(store: &Store, nodes: &[Prepared]) {
    let mut bulk = store.bulk(1);
    for b in nodes.chunks(BATCH) {
        bulk.put(b, NOW_MS).unwrap();
    }
    bulk.finish().unwrap();
}

/// 1. Batch put: fresh stores, [`PUT_NODES`] nodes in batches of [`BATCH`].
fn bench_put(c: &mut Criterion, b: &Bench, nodes: &[Prepared]) {
    let mut g = c.benchmark_group("pg_put");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(nodes.len() as u64));
    for backend in Backend::BOTH {
        // CPU time of the puts: this process's and the server's.
        let cpu = std::cell::Cell::new((Duration::ZERO, Duration::ZERO, 0u64));
        g.bench_function(BenchmarkId::new(backend.name(), nodes.len()), |bn| {
            bn.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let p = b.place(backend);
                    let s = p.open();
                    let (me, server) = (own_cpu(), b.server_cpu());
                    let t = Instant::now();
                    load(&s, nodes);
                    total += t.elapsed();
                    let (c, sv, n) = cpu.get();
                    cpu.set((c + own_cpu() - me, sv + b.server_cpu() - server, n + 1));
                    drop(s);
                    b.remove(p);
                }
                total
            })
        });
        let (c, sv, n) = cpu.get();
        eprintln!(
            "put on {}: CPU a load of {} nodes: bench process {:.0} ms, server {:.0} ms",
            backend.name(),
            nodes.len(),
            c.as_secs_f64() * 1e3 / n as f64,
            sv.as_secs_f64() * 1e3 / n as f64
        );
    }
    g.finish();
}

/// A store of each backend holding the same `n` generated nodes.
struct Fixture {
    n: usize,
    places: Vec<(Place, Store)>,
    sample: Vec<NodeId>,
    long_head: NodeId,
    long_len: u64,
}

fn fixture(b: &Bench, n: usize) -> Fixture {
    let places: Vec<(Place, Store)> = Backend::BOTH
        .iter()
        .map(|&k| {
            let p = b.place(k);
            let s = p.open();
            (p, s)
        })
        .collect();
    let mut g = nodegen::Gen::new(&places[0].1, n);
    let mut sample = Vec::new();
    let mut took = [Duration::ZERO; 2];
    loop {
        let chunk = g.chunk(BATCH);
        if chunk.is_empty() {
            break;
        }
        sample.extend(chunk.iter().step_by(97).map(|p| p.id));
        for (i, (_, s)) in places.iter().enumerate() {
            let t = Instant::now();
            s.put(&chunk, NOW_MS).unwrap();
            took[i] += t.elapsed();
        }
    }
    // Statistics for the planner, as a loader should leave them: without them (autovacuum's
    // ANALYZE comes up to a minute later) the walk's recursive term may be planned as a hash
    // join over a sequential scan of `uwf_edges` at every level of the chain.
    for (p, _) in &places {
        if p.backend == Backend::Postgres {
            let t = Instant::now();
            let mut c = postgres::Client::connect(&p.store_env, postgres::NoTls).unwrap();
            c.batch_execute("ANALYZE").unwrap();
            eprintln!("fixture {n}: ANALYZE on postgres in {:.1?}", t.elapsed());
        }
    }
    for (i, (p, s)) in places.iter().enumerate() {
        eprintln!(
            "fixture {n}: {} nodes on {} put in {:.1?} ({:.0} nodes/s, batches of {BATCH})",
            s.node_count().unwrap(),
            p.backend.name(),
            took[i],
            n as f64 / took[i].as_secs_f64()
        );
    }
    let (long_head, long_len) = (g.long_head, g.long_len);
    drop(g);
    Fixture {
        n,
        places,
        sample,
        long_head,
        long_len,
    }
}

/// 2. One `uwf cas get <id>` process.
fn bench_cli_get(c: &mut Criterion, b: &Bench, f: &Fixture) {
    let id = f.sample[f.sample.len() / 2].to_string();
    let mut g = c.benchmark_group("pg_cli_get");
    g.sample_size(30);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    for (p, _) in &f.places {
        g.bench_function(BenchmarkId::new(p.backend.name(), f.n), |bn| {
            bn.iter(|| black_box(p.uwf(&["cas", "get", &id])))
        });
    }
    g.finish();
    // What a process costs: the floor of any process (`uwf --version`) and a get, directly
    // and through the pooler.
    for (p, _) in &f.places {
        let name = p.backend.name();
        per_process(b, p, &format!("uwf --version on {name}"), &["--version"]);
        per_process(
            b,
            p,
            &format!("uwf cas get on {name}"),
            &["cas", "get", &id],
        );
        if let (Some(pooler), Backend::Postgres) = (&b.pooler, p.backend) {
            let pooled = pooler.place(p);
            per_process(
                b,
                &pooled,
                "uwf cas get on postgres through pgbouncer",
                &["cas", "get", &id],
            );
        }
    }
    if let Some((p, _)) = f
        .places
        .iter()
        .find(|(p, _)| p.backend == Backend::Postgres)
    {
        b.reset_statements();
        p.uwf(&["cas", "get", &id]);
        b.statements("one `uwf cas get`");
    }
}

/// 3. The walk of the long chain: `Store::walk` and `uwf cas walk`.
fn bench_walk(c: &mut Criterion, f: &Fixture) {
    let mut g = c.benchmark_group("pg_walk");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(f.long_len));
    for (p, s) in &f.places {
        g.bench_function(BenchmarkId::new(p.backend.name(), f.n), |bn| {
            bn.iter(|| {
                let st = s
                    .walk(f.long_head, |e| {
                        black_box(e);
                    })
                    .unwrap();
                assert_eq!((st.visited, st.missing), (f.long_len, 0));
            })
        });
    }
    g.finish();
    let head = f.long_head.to_string();
    let mut g = c.benchmark_group("pg_cli_walk");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(f.long_len));
    for (p, _) in &f.places {
        g.bench_function(BenchmarkId::new(p.backend.name(), f.n), |bn| {
            bn.iter(|| {
                let out = p.uwf(&["cas", "walk", &head]);
                assert!(out.len() as u64 >= 13 * f.long_len);
            })
        });
    }
    g.finish();
}

/// A fresh store of `backend` with the ten-role workflow put; the agent command.
fn workflow_place(b: &Bench, backend: Backend) -> (Place, String) {
    let p = b.place(backend);
    let (wf, script) = pg::ten_roles();
    let wf_path = p.home.join("ten.yaml");
    let script_path = p.home.join("ten.script.yaml");
    std::fs::write(&wf_path, wf).unwrap();
    std::fs::write(&script_path, script).unwrap();
    p.uwf(&["workflow", "put", wf_path.to_str().unwrap()]);
    let agent = format!(
        "{} agent scripted --script {}",
        uwf_bin().display(),
        script_path.display()
    );
    (p, agent)
}

/// `n` threads of `ten`, started in one `thread start --batch` process.
fn start_threads(p: &Place, n: usize) -> Vec<String> {
    let batch = p.home.join("batch.jsonl");
    let lines: String = (0..n)
        .map(|i| format!("{{\"prompt\":\"task {i}\"}}\n"))
        .collect();
    std::fs::write(&batch, lines).unwrap();
    p.uwf(&[
        "thread",
        "start",
        "ten",
        "--batch",
        batch.to_str().unwrap(),
        "-q",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// `thread start --batch` of 100,000 threads (`UWF_BENCH_PG_START`) in one process, into a
/// fresh store of each backend; plain timed runs (group 6).
fn bench_start(b: &Bench) {
    let n = env_num("UWF_BENCH_PG_START", 100_000);
    let runs = env_num("UWF_BENCH_PG_RUNS", 3);
    for backend in Backend::BOTH {
        let mut took = Vec::new();
        for _ in 0..runs {
            let (p, _) = workflow_place(b, backend);
            let t = Instant::now();
            let ids = start_threads(&p, n);
            took.push(t.elapsed());
            assert_eq!(ids.len(), n);
            b.remove(p);
        }
        took.sort();
        let median = took[took.len() / 2];
        eprintln!(
            "start/{}: thread start --batch of {n} threads: median {median:.2?} over {runs} runs \
             ({:.0} threads/s; all: {took:.2?})",
            backend.name(),
            n as f64 / median.as_secs_f64()
        );
    }
}

/// 5. One `uwf thread step` process with the in-process scripted agent.
fn bench_thread_step(c: &mut Criterion, b: &Bench) {
    let mut g = c.benchmark_group("pg_thread_step");
    g.sample_size(20);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    for backend in Backend::BOTH {
        let (p, agent) = workflow_place(b, backend);
        let cpu = std::cell::Cell::new((Duration::ZERO, Duration::ZERO, 0u64));
        g.bench_function(backend.name(), |bn| {
            bn.iter_custom(|iters| {
                let threads = start_threads(&p, (iters as usize).div_ceil(10));
                let mut total = Duration::ZERO;
                let (before, server_before) = (children_cpu(), b.server_cpu());
                for i in 0..iters as usize {
                    let t = Instant::now();
                    p.uwf(&["thread", "step", &threads[i / 10], "--agent", &agent]);
                    total += t.elapsed();
                }
                let (c, s, n) = cpu.get();
                cpu.set((
                    c + (children_cpu() - before),
                    s + (b.server_cpu() - server_before),
                    n + iters,
                ));
                total
            })
        });
        let (c, s, n) = cpu.get();
        eprintln!(
            "thread step on {}: CPU a process {:.2} ms (client), {:.2} ms (server)",
            backend.name(),
            c.as_secs_f64() * 1e3 / n as f64,
            s.as_secs_f64() * 1e3 / n as f64
        );
        if let (Some(pooler), Backend::Postgres) = (&b.pooler, backend) {
            // Directly and through the pooler, in the same way (steps of fresh threads).
            let pooled = pooler.place(&p);
            for (q, how) in [(&p, "directly"), (&pooled, "through pgbouncer")] {
                let threads = start_threads(&p, PROCESS_RUNS.div_ceil(10) as usize);
                let (cpu0, server0, t) = (children_cpu(), b.server_cpu(), Instant::now());
                for i in 0..PROCESS_RUNS as usize {
                    q.uwf(&["thread", "step", &threads[i / 10], "--agent", &agent]);
                }
                let wall = t.elapsed() / PROCESS_RUNS;
                let (cpu, server) = (children_cpu() - cpu0, b.server_cpu() - server0);
                eprintln!(
                    "thread step on postgres {how}: {wall:.2?} a process; CPU {:.2?} (client), \
                     {:.2?} (server)",
                    cpu / PROCESS_RUNS,
                    server / PROCESS_RUNS
                );
            }
        }
        if backend == Backend::Postgres {
            let t = start_threads(&p, 1);
            b.reset_statements();
            p.uwf(&["thread", "step", &t[0], "--agent", &agent]);
            b.statements("one `uwf thread step`");
        }
        b.remove(p);
    }
    g.finish();
}

/// 4. Four runners (a root each, one store) over N threads × 10 steps; plain timed runs.
fn bench_runners(b: &Bench) {
    let n = env_num("UWF_BENCH_PG_THREADS", 200);
    let jobs = env_num("UWF_BENCH_PG_JOBS", 4).to_string();
    let runs = env_num("UWF_BENCH_PG_RUNS", 3);
    for backend in Backend::BOTH {
        let mut rates = Vec::new();
        for _ in 0..runs {
            let (p, agent) = workflow_place(b, backend);
            start_threads(&p, n);
            b.reset_statements();
            let (cpu0, server0) = (children_cpu(), b.server_cpu());
            let t = Instant::now();
            let children: Vec<_> = (0..4)
                .map(|m| {
                    let home = p.home.join(format!("m{m}"));
                    std::fs::create_dir_all(&home).unwrap();
                    p.cmd(&home)
                        .args(["run", "--until-idle", "-j", &jobs, "--agent", &agent])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let (mut completed, mut errors) = (0, 0);
            for ch in children {
                let out = ch.wait_with_output().unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "{stdout}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let count = |field: &str| {
                    stdout
                        .split(&format!("\"{field}\":"))
                        .nth(1)
                        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                        .and_then(|s| s.parse::<usize>().ok())
                        .unwrap_or_else(|| panic!("no {field} count in {stdout}"))
                };
                completed += count("completed");
                errors += count("errors");
            }
            let took = t.elapsed();
            let (cpu, server) = (children_cpu() - cpu0, b.server_cpu() - server0);
            assert_eq!(completed, n, "every thread completed once");
            let steps = n * 10;
            let rate = steps as f64 / took.as_secs_f64();
            eprintln!(
                "runners/{}: 4 × uwf run -j {jobs}, {n} threads × 10 steps: {steps} steps in \
                 {took:.2?}: {rate:.0} steps/s; {errors} attempts retried (errors); CPU: \
                 runners {cpu:.2?} ({:.2} ms/step), server {server:.2?} ({:.2} ms/step)",
                backend.name(),
                cpu.as_secs_f64() * 1e3 / steps as f64,
                server.as_secs_f64() * 1e3 / steps as f64,
            );
            rates.push(rate);
            if backend == Backend::Postgres {
                b.statements("the four runners");
            }
            b.remove(p);
        }
        rates.sort_by(f64::total_cmp);
        eprintln!(
            "runners/{}: median {:.0} steps/s over {runs} runs",
            backend.name(),
            rates[rates.len() / 2]
        );
    }
}

/// What bounds a process's time on PostgreSQL: a round trip, a connection, and the round trips
/// of one process (`sendto` calls, counted by strace when it is on PATH).
fn bench_round_trips(c: &mut Criterion, b: &Bench) {
    let url = b.server.admin_url();
    let mut g = c.benchmark_group("pg_round_trip");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let select = client.prepare("SELECT 1").unwrap();
    g.bench_function("select_1", |bn| {
        bn.iter(|| black_box(client.query_one(&select, &[]).unwrap()))
    });
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS uwf_bench_commits (x int)")
        .unwrap();
    let insert = client
        .prepare("INSERT INTO uwf_bench_commits VALUES (1)")
        .unwrap();
    g.bench_function("insert_commit", |bn| {
        bn.iter(|| client.execute(&insert, &[]).unwrap())
    });
    g.bench_function("connect", |bn| {
        bn.iter(|| {
            let c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            black_box(c)
        })
    });
    g.finish();
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("round trips: no strace on PATH, not counted");
        return;
    }
    let (p, agent) = workflow_place(b, Backend::Postgres);
    let t = start_threads(&p, 1);
    let trace = |args: &[&str]| -> (usize, usize) {
        let file = p.home.join("strace.out");
        let status = Command::new("strace")
            .args([
                "-f",
                "-qq",
                "-e",
                "trace=connect,sendto,sendmsg,write",
                "-o",
            ])
            .arg(&file)
            .arg(uwf_bin())
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", &p.home)
            .env("HOME", &p.home)
            .env("UWF_STORE", &p.store_env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "strace uwf {args:?}");
        let text = std::fs::read_to_string(&file).unwrap();
        let connects = text
            .lines()
            .filter(|l| l.contains("connect(") && l.contains("127.0.0.1"))
            .count();
        // Writes to the server's sockets: sendto (std) and write(2) on a socket fd are both
        // counted; the process's own output goes to fd 1 and 2.
        let sends = text
            .lines()
            .filter(|l| {
                l.contains("sendto(")
                    || l.contains("sendmsg(")
                    || (l.contains(" write(")
                        && !l.contains(" write(1,")
                        && !l.contains(" write(2,"))
            })
            .count();
        (connects, sends)
    };
    let id = uwf::cas::bootstrap::by_name("uwf/StepNode")
        .unwrap()
        .id
        .to_string();
    let (cn, sn) = trace(&["cas", "get", &id]);
    eprintln!("round trips of one `uwf cas get`: {cn} connections, {sn} writes to the server");
    let (cn, sn) = trace(&["thread", "step", &t[0], "--agent", &agent]);
    eprintln!("round trips of one `uwf thread step`: {cn} connections, {sn} writes to the server");
    b.remove(p);
}

fn benches(c: &mut Criterion) {
    let only = std::env::var("UWF_BENCH_ONLY").ok();
    let want = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x == name))
    };
    let Some(b) = Bench::new() else {
        eprintln!("pg bench: no PostgreSQL server, skipped");
        return;
    };
    if want("rtt") {
        bench_round_trips(c, &b);
    }
    if want("put") {
        let scratch = tempfile::tempdir().unwrap();
        let prep = Store::open(&scratch.path().join(uwf::store::DB_FILE)).unwrap();
        let data = nodegen::generate(&prep, PUT_NODES);
        drop(prep);
        bench_put(c, &b, &data.nodes);
    }
    if want("get") || want("walk") {
        let n = if on("UWF_BENCH_PG_1M") {
            1_000_000
        } else {
            100_000
        };
        let f = fixture(&b, n);
        if want("get") {
            bench_cli_get(c, &b, &f);
        }
        if want("walk") {
            bench_walk(c, &f);
        }
        for (p, s) in f.places {
            drop(s);
            b.remove(p);
        }
    }
    if want("step") {
        bench_thread_step(c, &b);
    }
    if want("runners") {
        bench_runners(&b);
    }
    if want("start") {
        bench_start(&b);
    }
}

criterion_group!(pg_store, benches);
criterion_main!(pg_store);
