//! Store benchmarks at 1k, 100k, (with `UWF_BENCH_1M=1`) 1M and (with `UWF_BENCH_10M=1`) 10M
//! nodes.
//!
//! The data is generated from a fixed seed: threads made of a StartNode (referencing one of a
//! few Workflow nodes) and a chain of StepNodes, each step referencing its start, the previous
//! step, an output text node and a detail text node through `ocas_ref` fields. Payloads are
//! 0.2–2 KB. The first thread holds a quarter of the nodes: it is the "long thread-like chain"
//! the walk follows.
//!
//! Each size's store is built once in a temporary directory (or in `$UWF_BENCH_DIR/<size>`,
//! kept and reused across runs when that variable is set) and shared by the get, walk, reindex
//! and verify benches; batch put writes fresh stores.
//!
//! At 10M the payloads are 0.2–1 KB, the nodes are generated and stored chunk by chunk
//! (`UWF_BENCH_BATCH` nodes a put, `UWF_BENCH_BULK` nodes a commit; the load's put time is
//! printed: that is the 10M batch put), `get` draws from a sample of 100,000 ids and `verify`
//! runs once.
//!
//! `cli_get`, `cli_walk` and `cli_reindex` spawn the release `uwf` binary (`uwf cas get <id>`,
//! `uwf cas walk` of the long thread, `uwf cas reindex`) against each size's store;
//! `sqlite_walk` runs SQLite's recursive CTE over the same nodes through the `sqlite3` shell.
//! `UWF_BENCH_CACHE_MB` sets the page cache of the bench's store handle.

#[path = "common/data.rs"]
mod data;
#[path = "common/nodegen.rs"]
mod nodegen;
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use data::Rng;
use nodegen::{Data, Gen, generate};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uwf::cas::NodeId;
use uwf::store::{Prepared, Store};

/// Nodes per transaction in the bulk load (the batch size of a bulk loader such as import).
const BATCH: usize = 10_000;
/// The fixed clock of every put.
const NOW_MS: u64 = 1_700_000_000_000;
/// Gets per measured iteration.
const GETS: usize = 1_000;

/// Generates `n` nodes and stores them chunk by chunk ([`batch`] nodes a transaction), timing
/// the puts alone; keeps a sample of the ids. With `store_them` false the nodes are only
/// generated (a store built before).
fn generate_streaming(store: &Store, n: usize, store_them: bool) -> Data {
    let mut g = Gen::new(store, n);
    let mut sample = Vec::new();
    let every = (n / 100_000).max(1);
    let (mut put_time, mut gen_time) = (Duration::ZERO, Duration::ZERO);
    let mut seen = 0usize;
    let mut bulk = store.bulk(bulk_commit());
    loop {
        let t = Instant::now();
        let chunk = g.chunk(batch());
        gen_time += t.elapsed();
        if chunk.is_empty() {
            break;
        }
        for p in &chunk {
            if seen.is_multiple_of(every) {
                sample.push(p.id);
            }
            seen += 1;
        }
        if store_them {
            let t = Instant::now();
            bulk.put(&chunk, NOW_MS).expect("put");
            put_time += t.elapsed();
        }
    }
    let t = Instant::now();
    bulk.finish().expect("commit");
    put_time += t.elapsed();
    if store_them {
        eprintln!(
            "generated {n} nodes in {gen_time:.1?}; put them in {put_time:.1?} ({:.0} nodes/s, batches of {})",
            n as f64 / put_time.as_secs_f64(),
            batch()
        );
    }
    Data {
        nodes: Vec::new(),
        sample,
        long_head: g.long_head,
        long_len: g.long_len,
    }
}

/// The bulk-load batch: [`BATCH`], or `$UWF_BENCH_BATCH`.
fn batch() -> usize {
    std::env::var("UWF_BENCH_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(BATCH)
}

/// Nodes per commit of a bulk load: `$UWF_BENCH_BULK` (0, the default: one transaction per
/// [`batch`]).
fn bulk_commit() -> usize {
    std::env::var("UWF_BENCH_BULK")
        .ok()
        .and_then(|b| b.parse().ok())
        .filter(|&b| b > 0)
        .unwrap_or(1)
}

fn load(store: &Store, nodes: &[Prepared]) {
    let mut bulk = store.bulk(bulk_commit());
    let t = Instant::now();
    for b in nodes.chunks(batch()) {
        bulk.put(b, NOW_MS).expect("put");
    }
    let puts = t.elapsed();
    bulk.finish().expect("commit");
    eprintln!(
        "puts {puts:.1?}, last commit {:.1?}",
        t.elapsed().saturating_sub(puts)
    );
}

/// One size's shared store and data.
struct Fixture {
    n: usize,
    _dir: Option<tempfile::TempDir>,
    root: PathBuf,
    store: Store,
    data: Data,
}

fn fixture(n: usize) -> Fixture {
    if let Some(mb) = std::env::var("UWF_BENCH_CACHE_MB")
        .ok()
        .and_then(|m| m.parse::<usize>().ok())
    {
        uwf::store::set_cache_size(mb << 20);
    }
    let (dir, root) = match std::env::var_os("UWF_BENCH_DIR") {
        Some(d) => (None, Path::new(&d).join(n.to_string())),
        None => {
            let d = tempfile::tempdir().expect("tempdir");
            let root = d.path().to_path_buf();
            (Some(d), root)
        }
    };
    let path = root.join(uwf::store::DB_FILE);
    let existed = path.exists();
    let store = Store::open(&path).expect("open");
    let full = existed && store.node_count().expect("count") as usize >= n;
    let data = if n > 1_000_000 {
        generate_streaming(&store, n, !full)
    } else {
        let t = Instant::now();
        let data = generate(&store, n);
        eprintln!("generated {n} nodes in {:.1?}", t.elapsed());
        if !full {
            let t = Instant::now();
            load(&store, &data.nodes);
            eprintln!("loaded {n} nodes in {:.1?}", t.elapsed());
        }
        data
    };
    let meta = std::fs::metadata(&path).expect("store file");
    let used = std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
    eprintln!(
        "store {}: {} nodes, {} bytes long, {} bytes on disk ({:.0} B/node)",
        path.display(),
        store.node_count().expect("count"),
        meta.len(),
        used,
        used as f64 / n as f64
    );
    Fixture {
        n,
        _dir: dir,
        root,
        store,
        data,
    }
}

fn sizes() -> Vec<usize> {
    let on = |v: &str| std::env::var_os(v).is_some_and(|v| v != "0");
    let mut s = vec![1_000, 100_000];
    if on("UWF_BENCH_1M") {
        s.push(1_000_000);
    }
    if on("UWF_BENCH_10M") {
        s.push(10_000_000);
    }
    s
}

fn bench_put(c: &mut Criterion, f: &Fixture) {
    let mut g = c.benchmark_group("put_batch");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(f.n as u64));
    g.sample_size(10);
    if f.n >= 100_000 {
        g.measurement_time(Duration::from_secs(1));
    }
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().expect("tempdir");
                let s = Store::open(&dir.path().join(uwf::store::DB_FILE)).expect("open");
                let t = Instant::now();
                load(&s, &f.data.nodes);
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

fn bench_get(c: &mut Criterion, f: &Fixture) {
    let mut rng = Rng(42);
    let picks: Vec<NodeId> = (0..GETS)
        .map(|_| f.data.sample[rng.below(f.data.sample.len() as u64) as usize])
        .collect();
    let mut g = c.benchmark_group("get");
    g.throughput(Throughput::Elements(GETS as u64));
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| {
            for id in &picks {
                black_box(f.store.get(*id).expect("get").expect("present"));
            }
        })
    });
    g.finish();
}

fn bench_walk(c: &mut Criterion, f: &Fixture) {
    let mut g = c.benchmark_group("walk");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(f.data.long_len));
    if f.n >= 100_000 {
        g.sample_size(10);
    }
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| {
            let st = f.store.walk(f.data.long_head, |e| {
                black_box(e);
            });
            let st = st.expect("walk");
            assert_eq!(st.visited, f.data.long_len);
            assert_eq!(st.missing, 0);
        })
    });
    g.finish();
}

fn bench_reindex(c: &mut Criterion, f: &Fixture) {
    let total = f.store.node_count().expect("count");
    let mut g = c.benchmark_group("reindex");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(total));
    g.sample_size(10);
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| assert_eq!(f.store.reindex(&|_, _| {}).expect("reindex"), total))
    });
    g.finish();
}

fn bench_verify(c: &mut Criterion, f: &Fixture) {
    let total = f.store.node_count().expect("count");
    if f.n > 1_000_000 {
        // A minute or more a pass: timed once.
        let t = Instant::now();
        let r = f.store.verify(&|_, _| {}).expect("verify");
        let e = t.elapsed();
        assert!(r.is_clean(), "{:?}", r.damage.first());
        eprintln!(
            "verify/{}: {e:.2?} once ({:.0} nodes/s)",
            f.n,
            total as f64 / e.as_secs_f64()
        );
        return;
    }
    let mut g = c.benchmark_group("verify");
    g.sampling_mode(SamplingMode::Flat);
    g.throughput(Throughput::Elements(total));
    g.sample_size(10);
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| {
            let r = f.store.verify(&|_, _| {}).expect("verify");
            assert!(r.is_clean(), "{:?}", r.damage.first());
        })
    });
    g.finish();
}

/// One `uwf` process on the fixture's store; returns its standard output.
fn uwf(f: &Fixture, args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_uwf"))
        .args(args)
        .env_clear()
        .env("UWF_HOME", &f.root)
        .output()
        .expect("spawn uwf");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn bench_cli_get(c: &mut Criterion, f: &Fixture) {
    let id = f.data.sample[f.data.sample.len() / 2].to_string();
    let mut g = c.benchmark_group("cli_get");
    g.sample_size(50);
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| uwf(f, &["cas", "get", &id]))
    });
    g.finish();
}

/// Whole `uwf cas walk` (the long thread, one line per node) and `uwf cas reindex` processes.
fn bench_cli_walk_reindex(c: &mut Criterion, f: &Fixture) {
    let head = f.data.long_head.to_string();
    let mut g = c.benchmark_group("cli_walk");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.throughput(Throughput::Elements(f.data.long_len));
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| {
            let out = uwf(f, &["cas", "walk", &head]);
            assert!(out.len() as u64 >= 13 * f.data.long_len);
        })
    });
    g.finish();
    let total = f.store.node_count().expect("count");
    let mut g = c.benchmark_group("cli_reindex");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.throughput(Throughput::Elements(total));
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| uwf(f, &["cas", "reindex"]))
    });
    g.finish();
}

/// SQLite's recursive CTE over the same nodes, the baseline of the walk: one table
/// `nodes(id INTEGER PRIMARY KEY, type, payload BLOB, refs)`, each row with a payload of its
/// node's length and its references as a JSON array, walked from the long thread's head with
/// `UNION` (each node once). Built once beside the store (`sqlite.db`) through the `sqlite3`
/// shell, which must be on `PATH` (skipped otherwise).
fn bench_sqlite_walk(c: &mut Criterion, f: &Fixture) {
    use std::io::Write;
    if std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_err()
    {
        eprintln!("sqlite_walk: no sqlite3 on PATH, skipped");
        return;
    }
    let db = f.root.join("sqlite.db");
    let sqlite = |sql: &str| {
        let out = std::process::Command::new("sqlite3")
            .arg(&db)
            .arg(sql)
            .output()
            .expect("sqlite3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let signed = |id: NodeId| id.0 as i64;
    if !db.exists() {
        let t = Instant::now();
        let csv = f.root.join("sqlite.csv");
        {
            let mut w = std::io::BufWriter::new(std::fs::File::create(&csv).expect("csv"));
            f.store
                .for_each_node_written_between::<uwf::store::StoreError>(0, u64::MAX, |n| {
                    let refs = f.store.refs(n.id)?.unwrap_or_default();
                    let refs: Vec<String> = refs.iter().map(|r| signed(*r).to_string()).collect();
                    writeln!(
                        w,
                        "{},{},{},\"[{}]\"",
                        signed(n.id),
                        signed(n.type_id),
                        n.payload_cbor.len(),
                        refs.join(",")
                    )
                    .expect("write");
                    Ok(())
                })
                .expect("nodes");
        }
        let tmp = db.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let script = format!(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;\n\
             CREATE TABLE raw(id INTEGER, type INTEGER, len INTEGER, refs TEXT);\n\
             .mode csv\n.import {} raw\n\
             CREATE TABLE nodes(id INTEGER PRIMARY KEY, type INTEGER, payload BLOB, refs TEXT);\n\
             INSERT INTO nodes SELECT id, type, zeroblob(len), refs FROM raw ORDER BY id;\n\
             DROP TABLE raw;\n",
            csv.display()
        );
        let mut child = std::process::Command::new("sqlite3")
            .arg(&tmp)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sqlite3");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("script");
        assert!(child.wait().expect("sqlite3").success());
        std::fs::rename(&tmp, &db).expect("rename");
        std::fs::remove_file(&csv).expect("csv");
        eprintln!("sqlite.db built in {:.1?}", t.elapsed());
    }
    let walk = format!(
        "WITH RECURSIVE walk(id) AS (SELECT {} UNION \
         SELECT j.value FROM walk JOIN nodes n ON n.id = walk.id, json_each(n.refs) j) \
         SELECT count(*) FROM walk JOIN nodes USING (id);",
        signed(f.data.long_head)
    );
    assert_eq!(
        sqlite(&walk).trim().parse::<u64>().expect("count"),
        f.data.long_len,
        "SQLite reaches the same nodes"
    );
    let mut g = c.benchmark_group("sqlite_walk");
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.throughput(Throughput::Elements(f.data.long_len));
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| sqlite(&walk))
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let only = std::env::var("UWF_BENCH_ONLY").ok();
    let on = |name: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x == name))
    };
    for n in sizes() {
        let f = fixture(n);
        if on("put") && !f.data.nodes.is_empty() {
            bench_put(c, &f);
        }
        if on("get") {
            bench_get(c, &f);
        }
        if on("walk") {
            bench_walk(c, &f);
        }
        if on("reindex") {
            bench_reindex(c, &f);
        }
        if on("verify") {
            bench_verify(c, &f);
        }
        if on("cli_get") {
            bench_cli_get(c, &f);
        }
        if on("cli_walk") {
            bench_cli_walk_reindex(c, &f);
        }
        if on("sqlite_walk") {
            bench_sqlite_walk(c, &f);
        }
    }
}

criterion_group!(cas, benches);
criterion_main!(cas);
