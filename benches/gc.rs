//! Garbage collection of a store where half of the nodes are garbage: 100k nodes, and 1M with
//! `UWF_BENCH_1M=1`.
//!
//! The store holds threads made of a StartNode and a chain of StepNodes, each step referencing
//! its start, the previous step, an output text node and a detail text node (payloads
//! 0.2–2 KB, fixed seed). Every other thread is active (a head in `threads`); the others were
//! removed, so their nodes (interleaved with the kept ones in write order) are garbage. Each
//! size's store is built once; every measured collection runs on a fresh copy of it.
//!
//! Besides criterion's timing of the collection (sizes below 1M), one run per size prints the
//! figures BENCHMARKS.md quotes: the time, nodes removed per second, and the file size before,
//! after the collection and after `compact`.

#[path = "common/data.rs"]
mod data;
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use data::{Rng, obj};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uwf::cas::bootstrap::ids;
use uwf::cas::{NodeId, Value};
use uwf::store::{GcOptions, GcReport, Lease, Prepared, Store, ThreadRecord};
use uwf::thread::ThreadId;

/// The fixed clock of every put; the collection runs a day later with no grace.
const NOW_MS: u64 = 1_700_000_000_000;
const BATCH: usize = 10_000;

const WORDS: &[&str] = &[
    "the", "agent", "reviewed", "patch", "and", "found", "that", "function", "returns", "error",
    "when", "input", "is", "empty", "so", "we", "added", "a", "test", "for", "case", "build",
];

fn text(rng: &mut Rng, len: usize, tag: u64) -> String {
    let mut s = format!("#{tag} ");
    while s.len() < len {
        s.push_str(WORDS[(rng.next() % WORDS.len() as u64) as usize]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

fn thread_id(i: u64) -> ThreadId {
    ThreadId::parse(&format!("06H0AAKR{i:018}")).expect("thread id")
}

/// Builds the store of `n` nodes at `path`.
fn build(path: &Path, n: usize) -> Store {
    let store = Store::open(path).expect("open");
    let id = |s: &str| NodeId::parse(s).expect("builtin id");
    let (text_t, start_t, step_t, wf_t) = (
        id(ids::TEXT),
        id(ids::START_NODE),
        id(ids::STEP_NODE),
        id(ids::WORKFLOW),
    );
    let mut rng = Rng(0x5EED_0000_0000_0002);
    let mut pending: Vec<Prepared> = Vec::with_capacity(BATCH);
    let mut written = 0usize;
    let mut heads: Vec<(u64, NodeId, NodeId)> = Vec::new();
    let flush = |pending: &mut Vec<Prepared>, heads: &mut Vec<(u64, NodeId, NodeId)>| {
        store
            .write(|w| {
                w.put(pending, NOW_MS)?;
                for (t, head, wf) in heads.iter() {
                    w.set_thread(
                        &thread_id(*t),
                        &ThreadRecord {
                            head: *head,
                            workflow: Some(*wf),
                            updated_ms: NOW_MS,
                        },
                    )?;
                }
                Ok(())
            })
            .expect("write");
        pending.clear();
        heads.clear();
    };
    let push = |pending: &mut Vec<Prepared>, t: NodeId, v: Value| {
        let p = store.prepare(t, &v, false).expect("prepare");
        let id = p.id;
        pending.push(p);
        id
    };
    let wf = push(
        &mut pending,
        wf_t,
        obj(vec![
            ("name", Value::str("wf")),
            ("description", Value::str("a workflow")),
            ("roles", obj(vec![])),
            ("graph", obj(vec![])),
        ]),
    );
    written += 1;
    store
        .write(|w| w.registry_set("wf", wf, NOW_MS))
        .expect("register");
    // Two threads at a time, one kept and one removed, their steps interleaved.
    let mut thread = 0u64;
    while written < n {
        let pair = [thread, thread + 1];
        thread += 2;
        let mut starts = Vec::new();
        for t in pair {
            let prompt = text(&mut rng, 300, t);
            starts.push(push(
                &mut pending,
                start_t,
                obj(vec![
                    ("workflow", Value::str(wf.to_wire())),
                    ("prompt", Value::str(prompt)),
                    ("cwd", Value::str("/home/dev/p")),
                ]),
            ));
            written += 1;
        }
        let steps = rng.range(5, 40);
        let mut prev = [Value::Null, Value::Null];
        for s in 0..steps {
            if written + 6 > n {
                break;
            }
            for (k, t) in pair.iter().enumerate() {
                let tag = t << 20 | s;
                let l = rng.range(200, 2000) as usize;
                let output = push(&mut pending, text_t, Value::str(text(&mut rng, l, tag)));
                let l = rng.range(200, 2000) as usize;
                let detail = push(&mut pending, text_t, Value::str(text(&mut rng, l, tag)));
                let step = push(
                    &mut pending,
                    step_t,
                    obj(vec![
                        ("start", Value::str(starts[k].to_wire())),
                        ("prev", prev[k].clone()),
                        (
                            "role",
                            Value::str(["planner", "coder", "reviewer"][s as usize % 3]),
                        ),
                        ("output", Value::str(output.to_wire())),
                        ("detail", Value::str(detail.to_wire())),
                        ("agent", Value::str("hermes")),
                        ("startedAtMs", Value::Number(NOW_MS as f64)),
                        ("completedAtMs", Value::Number(NOW_MS as f64)),
                        ("cwd", Value::str("/home/dev/p")),
                        ("assembledPrompt", Value::Null),
                    ]),
                );
                prev[k] = Value::str(step.to_wire());
                written += 3;
            }
        }
        // The first of the pair stays active; the second's nodes are garbage.
        let head = match &prev[0] {
            Value::String(s) => NodeId::parse(s).expect("id"),
            _ => starts[0],
        };
        heads.push((pair[0], head, wf));
        if pending.len() >= BATCH {
            flush(&mut pending, &mut heads);
        }
    }
    flush(&mut pending, &mut heads);
    store
}

fn sizes() -> Vec<usize> {
    let mut s = vec![100_000];
    if std::env::var_os("UWF_BENCH_1M").is_some_and(|v| v != "0") {
        s.push(1_000_000);
    }
    s
}

/// Collects; returns the report and how long the mark took (until the sweep's first report).
fn collect(store: &Store) -> (GcReport, Duration) {
    let t = Instant::now();
    let marked = std::cell::Cell::new(None);
    let r = store
        .gc(&GcOptions {
            now_ms: NOW_MS + 86_400_000,
            grace_ms: 0,
            dry_run: false,
            owner: Lease {
                pid: std::process::id(),
                since_ms: NOW_MS,
                boot_id: String::new(),
                start_ticks: 0,
                expires_ms: None,
            },
            owner_is_live: &|_| false,
            progress: &|_, _| {
                if marked.get().is_none() {
                    marked.set(Some(t.elapsed()));
                }
            },
        })
        .expect("gc");
    (r, marked.get().unwrap_or_default())
}

/// A fresh copy of the base store in `dir`.
fn copy_of(base: &Path, dir: &Path) -> PathBuf {
    let p = dir.join(uwf::store::DB_FILE);
    std::fs::copy(base, &p).expect("copy");
    p
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn bench_gc(c: &mut Criterion) {
    for n in sizes() {
        let (_keep, base_dir) = match std::env::var_os("UWF_BENCH_DIR") {
            Some(d) => (None, Path::new(&d).join(format!("gc-{n}"))),
            None => {
                let d = tempfile::tempdir().expect("tempdir");
                let p = d.path().to_path_buf();
                (Some(d), p)
            }
        };
        std::fs::create_dir_all(&base_dir).expect("dir");
        let base = base_dir.join(uwf::store::DB_FILE);
        if !base.exists() {
            let t = Instant::now();
            drop(build(&base, n));
            eprintln!("built the {n}-node store in {:.1?}", t.elapsed());
        }
        // One run with the figures.
        let work = tempfile::tempdir().expect("tempdir");
        let p = copy_of(&base, work.path());
        let before = size(&p);
        let mut store = Store::open(&p).expect("open");
        let nodes = store.node_count().expect("count");
        let t = Instant::now();
        let (r, mark) = collect(&store);
        let took = t.elapsed();
        let after_gc = size(&p);
        let t = Instant::now();
        store.compact().expect("compact");
        let compact_took = t.elapsed();
        drop(store);
        let after = size(&p);
        eprintln!(
            "gc of {nodes} nodes: {} removed ({} payload bytes) in {:.2?} (mark {:.2?}) = {:.0} \
             nodes/s ({:.0} scanned/s); file {} → {} after gc → {} after compact ({:.2?})",
            r.collected,
            r.bytes,
            took,
            mark,
            r.collected as f64 / took.as_secs_f64(),
            r.scanned as f64 / took.as_secs_f64(),
            before,
            after_gc,
            after,
            compact_took
        );
        drop(work);
        if n >= 1_000_000 {
            continue;
        }
        let mut g = c.benchmark_group("gc_half_garbage");
        g.sampling_mode(SamplingMode::Flat);
        g.sample_size(10);
        g.measurement_time(Duration::from_secs(1));
        g.throughput(Throughput::Elements(nodes));
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let work = tempfile::tempdir().expect("tempdir");
                    let store = Store::open(&copy_of(&base, work.path())).expect("open");
                    let t = Instant::now();
                    collect(&store);
                    total += t.elapsed();
                }
                total
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench_gc);
criterion_main!(benches);
