//! Store benchmarks at 1k, 100k and (with `UWF_BENCH_1M=1`) 1M nodes.
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
//! `cli_get` spawns the release `uwf` binary for one `uwf cas get <id>` against the largest
//! store built in the run.

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uwf::cas::bootstrap::ids;
use uwf::cas::value::Map;
use uwf::cas::{NodeId, Value};
use uwf::store::{Prepared, Store};

/// Nodes per transaction in the bulk load (the batch size of a bulk loader such as import).
const BATCH: usize = 10_000;
/// The fixed clock of every put.
const NOW_MS: u64 = 1_700_000_000_000;
/// Gets per measured iteration.
const GETS: usize = 1_000;

/// splitmix64: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

const WORDS: &[&str] = &[
    "the",
    "agent",
    "reviewed",
    "patch",
    "and",
    "found",
    "that",
    "function",
    "returns",
    "error",
    "when",
    "input",
    "is",
    "empty",
    "so",
    "we",
    "added",
    "a",
    "test",
    "for",
    "case",
    "build",
    "passes",
    "now",
    "next",
    "step",
    "refactor",
    "module",
    "store",
    "index",
    "walk",
    "node",
    "thread",
    "workflow",
    "role",
    "output",
    "schema",
    "commit",
    "branch",
    "merge",
    "review",
    "summary",
    "plan",
    "implement",
    "verify",
    "done",
];

fn text(rng: &mut Rng, len: usize, tag: u64) -> String {
    let mut s = format!("#{tag} ");
    while s.len() < len {
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        s.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    s.truncate(len);
    s
}

fn obj(fields: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

/// The generated nodes, in write order, and the head of the long thread.
struct Data {
    nodes: Vec<Prepared>,
    long_head: NodeId,
    /// Nodes reachable from `long_head`.
    long_len: u64,
}

/// Generates `n` nodes (not counting the bootstrap schemas) with a fixed seed.
fn generate(store: &Store, n: usize) -> Data {
    let id = |s: &str| NodeId::parse(s).expect("builtin id");
    let (text_t, start_t, step_t, wf_t) = (
        id(ids::TEXT),
        id(ids::START_NODE),
        id(ids::STEP_NODE),
        id(ids::WORKFLOW),
    );
    let mut rng = Rng(0x5EED_0000_0000_0001);
    let mut nodes: Vec<Prepared> = Vec::with_capacity(n);
    let push = |nodes: &mut Vec<Prepared>, t: NodeId, v: Value| {
        let p = store.prepare(t, &v, false).expect("prepare");
        let id = p.id;
        nodes.push(p);
        id
    };
    let mut workflows = Vec::new();
    for w in 0..4.min(n) {
        let mut r = Rng(w as u64);
        let v = obj(vec![
            ("name", Value::str(format!("wf-{w}"))),
            ("description", Value::str(text(&mut r, 300, w as u64))),
            ("roles", obj(vec![])),
            ("graph", obj(vec![])),
        ]);
        workflows.push(push(&mut nodes, wf_t, v));
    }
    let long_target = n / 4;
    let mut long_head = workflows[0];
    let mut long_len = 0u64;
    let mut thread = 0u64;
    while nodes.len() < n {
        let first = thread == 0;
        let before = nodes.len();
        let wf = workflows[rng.below(workflows.len() as u64) as usize];
        let cwd = format!("/home/dev/projects/p{}", rng.below(1000));
        let plen = rng.range(200, 800) as usize;
        let start = push(
            &mut nodes,
            start_t,
            obj(vec![
                ("workflow", Value::str(wf.to_wire())),
                ("prompt", Value::str(text(&mut rng, plen, thread))),
                ("cwd", Value::str(cwd.clone())),
            ]),
        );
        let steps = if first {
            usize::MAX
        } else {
            rng.range(5, 60) as usize
        };
        let mut prev = Value::Null;
        let mut t0 = NOW_MS - 86_400_000 + thread * 1000;
        for s in 0..steps {
            let budget = if first { before + 1 + long_target } else { n };
            if nodes.len() + 3 > budget || nodes.len() + 3 > n {
                break;
            }
            let tag = thread << 20 | s as u64;
            let out_len = rng.range(200, 2000) as usize;
            let output = push(&mut nodes, text_t, Value::str(text(&mut rng, out_len, tag)));
            let det_len = rng.range(200, 2000) as usize;
            let detail = push(&mut nodes, text_t, Value::str(text(&mut rng, det_len, tag)));
            let dur = rng.range(500, 120_000);
            let mut f = vec![
                ("start", Value::str(start.to_wire())),
                ("prev", prev.clone()),
                ("role", Value::str(["planner", "coder", "reviewer"][s % 3])),
                ("output", Value::str(output.to_wire())),
                ("detail", Value::str(detail.to_wire())),
                ("agent", Value::str("hermes")),
                ("startedAtMs", Value::Number(t0 as f64)),
                ("completedAtMs", Value::Number((t0 + dur) as f64)),
                ("cwd", Value::str(cwd.clone())),
                ("assembledPrompt", Value::Null),
            ];
            if s > 0 {
                let l = rng.range(40, 200) as usize;
                f.push(("edgePrompt", Value::str(text(&mut rng, l, tag))));
            }
            t0 += dur;
            let step = push(&mut nodes, step_t, obj(f));
            prev = Value::str(step.to_wire());
            if first {
                long_head = step;
                long_len += 3;
            }
        }
        if first {
            long_len += 2; // the start node and its workflow
        }
        // Pad with text nodes when the budget ends mid-thread.
        while nodes.len() < n && nodes.len() - before < 2 {
            let l = rng.range(200, 2000) as usize;
            let tag = u64::MAX - nodes.len() as u64;
            push(&mut nodes, text_t, Value::str(text(&mut rng, l, tag)));
        }
        thread += 1;
    }
    nodes.truncate(n);
    Data {
        nodes,
        long_head,
        long_len,
    }
}

/// The bulk-load batch: [`BATCH`], or `$UWF_BENCH_BATCH`.
fn batch() -> usize {
    std::env::var("UWF_BENCH_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(BATCH)
}

fn load(store: &Store, nodes: &[Prepared]) {
    for b in nodes.chunks(batch()) {
        store.put(b, NOW_MS).expect("put");
    }
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
    let t = Instant::now();
    let data = generate(&store, n);
    eprintln!("generated {n} nodes in {:.1?}", t.elapsed());
    let bootstrap = store.node_count().expect("count") as usize;
    if !existed || bootstrap < n {
        let t = Instant::now();
        load(&store, &data.nodes);
        eprintln!("loaded {n} nodes in {:.1?}", t.elapsed());
    }
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "store {}: {} nodes, {} bytes ({:.0} B/node)",
        path.display(),
        store.node_count().expect("count"),
        size,
        size as f64 / n as f64
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
    let mut s = vec![1_000, 100_000];
    if std::env::var_os("UWF_BENCH_1M").is_some_and(|v| v != "0") {
        s.push(1_000_000);
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
        .map(|_| f.data.nodes[rng.below(f.n as u64) as usize].id)
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

fn bench_cli_get(c: &mut Criterion, f: &Fixture) {
    let bin = env!("CARGO_BIN_EXE_uwf");
    let id = f.data.nodes[f.n / 2].id.to_string();
    let mut g = c.benchmark_group("cli_get");
    g.sample_size(50);
    g.bench_function(BenchmarkId::from_parameter(f.n), |b| {
        b.iter(|| {
            let out = std::process::Command::new(bin)
                .args(["cas", "get", &id])
                .env_clear()
                .env("UWF_HOME", &f.root)
                .output()
                .expect("spawn uwf");
            assert!(out.status.success());
        })
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
        if on("put") {
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
    }
}

criterion_group!(cas, benches);
criterion_main!(cas);
