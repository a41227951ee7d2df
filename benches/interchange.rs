//! Export and import throughput of the directory layout and of one archive of it, beside the
//! file-system baseline (`cp -r`, `tar cf`, `tar xf`) of the same layout, timed the same way in
//! the same run.
//!
//! ```text
//! cargo bench --bench interchange                      # 100k nodes
//! UWF_BENCH_1M=1 cargo bench --bench interchange       # and 1M nodes (single timed runs)
//! UWF_BENCH_DIR=/path cargo bench --bench interchange  # keep (and reuse) stores and layouts
//! UWF_BENCH_PREPARE_ONLY=1                             # build the fixtures, time nothing
//! UWF_BENCH_SETTLE=61                                  # seconds to wait after deleting outputs
//! UWF_BENCH_OPS='archive export,tar cf'                # only these operations (names below)
//! ```
//!
//! The data is fixed-seed and thread-like: per thread one StartNode, then StepNodes each
//! referencing the StartNode, the previous step and a text node (0.2–2 KB), plus the thread
//! heads, registry names and history lines. The setup checks the round trip (export, import
//! into an empty store: the same ids, bytes, timestamps, heads, registry and history) before
//! anything is timed. Runs that create the layout's files (export, `cp -r`, `tar xf`) each
//! write into a new directory; the directories are deleted after the last run of an operation,
//! followed by a pause before the next one creates files (see `settle_secs`). The medians and ratios are printed at the end and written to
//! `target/interchange-summary.md`.

#[path = "common/data.rs"]
mod data;
use criterion::{Criterion, SamplingMode, Throughput};
use data::{Rng, obj};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use uwf::cas::bootstrap::ids;
use uwf::cas::value::Map;
use uwf::cas::{NodeId, Value};
use uwf::interchange::archive;
use uwf::interchange::transfer::{self, ImportOptions};
use uwf::store::{HistoryEntry, Prepared, Store, StoreError, ThreadRecord};

const WORDS: &[&str] = &[
    "the",
    "agent",
    "reads",
    "file",
    "and",
    "writes",
    "a",
    "patch",
    "for",
    "test",
    "build",
    "error",
    "fixed",
    "review",
    "step",
    "output",
    "src/lib.rs",
    "cargo",
    "passes",
    "which",
    "function",
    "returns",
    "value",
    "store",
    "node",
    "thread",
    "workflow",
    "moderator",
    "role",
    "summary:",
    "diff",
    "--git",
    "@@",
    "+",
    "-",
    "fn",
    "let",
    "Ok(())",
    "}",
    "{",
    "\n",
];

fn text(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

fn id(s: &str) -> NodeId {
    NodeId::parse(s).expect("builtin id")
}

/// Fills `s` with about `n` nodes (at least `n`), fixed seed. Returns the node count.
fn populate(s: &Store, n: u64) -> u64 {
    let mut rng = Rng(0x5EED_u64);
    let (text_t, start_t, step_t, wf_t) = (
        id(ids::TEXT),
        id(ids::START_NODE),
        id(ids::STEP_NODE),
        id(ids::WORKFLOW),
    );
    let prep = |t: NodeId, v: &Value| s.prepare(t, v, false).expect("known type");
    let wfs: Vec<Prepared> = (0..8)
        .map(|i| {
            let v = obj(vec![
                ("name", Value::str(format!("wf-{i}"))),
                ("description", Value::str(text(&mut rng, 120))),
                ("roles", Value::Object(Map::default())),
                ("graph", Value::Object(Map::default())),
            ]);
            prep(wf_t, &v)
        })
        .collect();
    s.write(|w| {
        w.put(&wfs, 1_700_000_000_000)?;
        for (i, wf) in wfs.iter().enumerate() {
            w.registry_set(&format!("wf-{i}"), wf.id, 1_700_000_000_000)?;
        }
        Ok(())
    })
    .expect("registry");
    let mut count = s.node_count().expect("count");
    let mut t = 0u64;
    let mut batch = Vec::new();
    let mut threads = Vec::new();
    let mut history = Vec::new();
    while count < n {
        let wf = &wfs[rng.below(wfs.len() as u64) as usize];
        let now = 1_700_000_000_000 + t * 1000;
        let start = prep(
            start_t,
            &obj(vec![
                ("workflow", Value::str(wf.id.to_wire())),
                ("prompt", {
                    let len = rng.range(200, 999) as usize;
                    Value::str(text(&mut rng, len))
                }),
                ("cwd", Value::str("/home/dev/project")),
            ]),
        );
        let mut head = start.id;
        let mut prev = Value::Null;
        batch.push(start.clone());
        count += 1;
        for i in 0..rng.range(4, 39) {
            if count >= n {
                break;
            }
            let len = rng.range(200, 1999) as usize;
            let out = prep(text_t, &Value::str(text(&mut rng, len)));
            let step = prep(
                step_t,
                &obj(vec![
                    ("start", Value::str(start.id.to_wire())),
                    ("prev", prev),
                    ("role", Value::str(format!("role-{}", i % 3))),
                    ("output", Value::str(out.id.to_wire())),
                    ("detail", Value::str(out.id.to_wire())),
                    ("agent", Value::str("claude-code")),
                    ("startedAtMs", Value::Number((now + i * 10) as f64)),
                    ("completedAtMs", Value::Number((now + i * 10 + 7) as f64)),
                    ("cwd", Value::str("/home/dev/project")),
                ]),
            );
            prev = Value::str(step.id.to_wire());
            head = step.id;
            batch.push(out);
            batch.push(step);
            count += 2;
        }
        let thread = format!("06F8B8A800{t:016}");
        if t.is_multiple_of(4) {
            history.push(HistoryEntry {
                thread,
                workflow: wf.id.into(),
                head: head.into(),
                completed_at: now + 999,
                reason: if t.is_multiple_of(8) {
                    "completed"
                } else {
                    "cancelled"
                }
                .into(),
            });
        } else {
            let rec = ThreadRecord {
                head,
                workflow: Some(wf.id),
                updated_ms: now,
            };
            threads.push((thread, rec));
        }
        t += 1;
        if batch.len() >= 8192 || count >= n {
            s.write(|w| {
                w.put(&batch, now)?;
                for (t, rec) in &threads {
                    w.set_thread(&uwf::thread::ThreadId::parse(t).expect("a thread id"), rec)?;
                }
                for h in &history {
                    w.append_history(h)?;
                }
                Ok(())
            })
            .expect("write batch");
            batch.clear();
            threads.clear();
            history.clear();
        }
    }
    s.node_count().expect("count")
}

type Snapshot = (
    Vec<(NodeId, NodeId, u64, [u8; 32])>,
    Vec<(String, NodeId)>,
    Vec<(String, NodeId)>,
    Vec<HistoryEntry>,
);

/// Everything a round trip must keep: nodes (id, type, timestamp, digest), heads, registry,
/// history.
fn snapshot(s: &Store) -> Snapshot {
    let mut nodes = Vec::new();
    s.for_each_node::<StoreError>(|n| {
        nodes.push((n.id, n.type_id, n.timestamp, n.digest));
        Ok(())
    })
    .expect("nodes");
    let heads = s
        .threads()
        .expect("threads")
        .into_iter()
        .map(|(t, r)| (t.to_string(), r.head))
        .collect();
    let mut hist = Vec::new();
    s.for_each_history::<StoreError>(|e| {
        hist.push(e);
        Ok(())
    })
    .expect("history");
    (nodes, heads, s.registry().expect("registry"), hist)
}

fn quiet(_: &str, _: u64, _: u64) {}

/// A store and its exported layout, with the sizes the figures divide by.
struct Fixture {
    root: PathBuf,
    nodes: u64,
    /// Sum of the node file sizes (the payload of MB/s).
    bin_bytes: u64,
    _tmp: Option<tempfile::TempDir>,
}

impl Fixture {
    fn store(&self) -> PathBuf {
        self.root.join("uwf.redb")
    }
    fn layout(&self) -> PathBuf {
        self.root.join("layout")
    }
    fn scratch(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

fn label(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{}M", n / 1_000_000)
    } else {
        format!("{}k", n / 1000)
    }
}

/// Builds (or reuses, under `UWF_BENCH_DIR`) the store and layout of `n` nodes and checks the
/// round trip.
fn fixture(n: u64) -> Fixture {
    let (base, tmp) = match std::env::var_os("UWF_BENCH_DIR") {
        Some(d) => (PathBuf::from(d), None),
        None => {
            let t = tempfile::tempdir().expect("temp dir");
            (t.path().to_path_buf(), Some(t))
        }
    };
    let root = base.join(label(n));
    let done = root.join(".complete");
    if !done.exists() {
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("fixture dir");
        let t = Instant::now();
        let s = Store::open(&root.join("uwf.redb")).expect("store");
        let count = populate(&s, n);
        eprintln!(
            "{}: generated {count} nodes in {:.1?}",
            label(n),
            t.elapsed()
        );
        transfer::export(&s, &root.join("layout"), &quiet).expect("export");
    }
    let layout = root.join("layout");
    // The round trip: export, import into an empty store, compare.
    let t = Instant::now();
    let check = root.join("check.redb");
    let _ = fs::remove_file(&check);
    let a = Store::open(&root.join("uwf.redb")).expect("store");
    let b = Store::open(&check).expect("empty store");
    let r = transfer::import(&b, &layout, ImportOptions::default(), &quiet).expect("import");
    assert!(
        r.problems.is_empty(),
        "{:?}",
        &r.problems[..r.problems.len().min(5)]
    );
    let (sa, sb) = (snapshot(&a), snapshot(&b));
    assert_eq!(sa.0.len(), sb.0.len(), "node count");
    assert!(sa.0 == sb.0, "same ids, types, timestamps and bytes");
    assert_eq!(sa.1, sb.1, "same thread heads");
    assert_eq!(sa.2, sb.2, "same registry");
    assert_eq!(sa.3, sb.3, "same history");
    let nodes = sa.0.len() as u64;
    eprintln!(
        "{}: round trip checked ({nodes} nodes, {} threads, {} registry names, {} history lines) in {:.1?}",
        label(n),
        sa.1.len(),
        sa.2.len(),
        sa.3.len(),
        t.elapsed()
    );
    drop((a, b));
    let _ = fs::remove_file(&check);
    fs::write(&done, b"").expect("marker");
    let mut bin_bytes = 0;
    for e in fs::read_dir(layout.join("cas")).expect("cas") {
        let e = e.expect("entry");
        if e.file_name().to_string_lossy().ends_with(".bin") {
            bin_bytes += e.metadata().expect("meta").len();
        }
    }
    Fixture {
        root,
        nodes,
        bin_bytes,
        _tmp: tmp,
    }
}

fn run(cmd: &mut Command) {
    let st = cmd.status().expect("spawn");
    assert!(st.success(), "{cmd:?}: {st}");
}

/// Removes `p` and lets the file system settle (`sync`), so that the deletion is not charged
/// to the run that follows.
fn clear(p: &Path) {
    if p.is_dir() {
        fs::remove_dir_all(p).expect("remove dir");
    } else if p.exists() {
        fs::remove_file(p).expect("remove file");
    }
    sync();
}

/// Writes all dirty pages out, so that no run pays for the write-back of an earlier one.
fn sync() {
    run(&mut Command::new("sync"));
}

/// Seconds to wait after deleting a run's files before files are created again: ext4 without
/// a journal skips inodes freed in the last 60 s (300 s more while their inode table block is
/// dirty) on every inode allocation, which makes the creates after a large deletion several
/// times slower. `UWF_BENCH_SETTLE` changes it.
fn settle_secs() -> u64 {
    std::env::var("UWF_BENCH_SETTLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(61)
}

/// Deletes the outputs of `op`'s runs, then waits out [`settle_secs`].
fn clear_outputs(f: &Fixture, op: &str) {
    let Some(prefix) = output_prefix(op) else {
        return;
    };
    let mut removed = false;
    for e in fs::read_dir(&f.root).expect("fixture dir") {
        let e = e.expect("entry");
        if e.file_name().to_string_lossy().starts_with(prefix) {
            fs::remove_dir_all(e.path()).expect("remove outputs");
            removed = true;
        }
    }
    sync();
    if removed {
        std::thread::sleep(Duration::from_secs(settle_secs()));
    }
}

/// The name prefix of the directories `op` creates, one per run.
fn output_prefix(op: &str) -> Option<&'static str> {
    match op {
        "uwf export" => Some("out-export-"),
        "cp -r" => Some("out-cp-"),
        "tar xf" => Some("out-tar-"),
        _ => None,
    }
}

const OPS: [&str; 8] = [
    "uwf export",
    "uwf import",
    "archive export",
    "archive export zst",
    "archive import zst",
    "cp -r",
    "tar cf",
    "tar xf",
];

/// The operations to time: [`OPS`], or those `UWF_BENCH_OPS` names (comma-separated).
fn ops() -> Vec<&'static str> {
    match std::env::var("UWF_BENCH_OPS") {
        Ok(v) => OPS
            .into_iter()
            .filter(|op| v.split(',').any(|w| w.trim() == *op))
            .collect(),
        Err(_) => OPS.to_vec(),
    }
}

/// Writes the archive of the fixture's store to `out` (zstd when it ends in `.zst`).
fn export_archive(f: &Fixture, out: &Path) {
    let s = Store::open_read_only(&f.store()).expect("store");
    let file = fs::File::create(out).expect("archive file");
    let zst = out.extension().is_some_and(|e| e == "zst");
    let label = out.display().to_string();
    archive::export_archive(&s, file, &label, zst, None, &quiet).expect("archive export");
}

/// One timed run of `op` on `f`; the setup is not timed. The operations that create the
/// layout's files write into a new directory each run (`run` numbers it): nothing is deleted
/// between runs (see [`settle_secs`]).
fn once(op: &str, f: &Fixture, run_no: usize) -> Duration {
    let layout = f.layout();
    let fresh = |op: &str| {
        let out = f.scratch(&format!(
            "{}{run_no}",
            output_prefix(op).expect("creates files")
        ));
        assert!(
            !out.exists(),
            "{} is left from an earlier run",
            out.display()
        );
        sync();
        out
    };
    match op {
        "uwf export" => {
            let out = fresh(op);
            let s = Store::open_read_only(&f.store()).expect("store");
            let t = Instant::now();
            transfer::export(&s, &out, &quiet).expect("export");
            t.elapsed()
        }
        "uwf import" => {
            let db = f.scratch("imported.redb");
            clear(&db);
            let s = Store::open(&db).expect("empty store");
            let t = Instant::now();
            let r =
                transfer::import(&s, &layout, ImportOptions::default(), &quiet).expect("import");
            drop(s);
            let d = t.elapsed();
            // The bootstrap schemas of an empty store are "present".
            assert_eq!(r.nodes.imported + r.nodes.present, f.nodes);
            d
        }
        "archive export" | "archive export zst" => {
            let out = f.scratch(if op.ends_with("zst") {
                "archive.tar.zst"
            } else {
                "archive.tar"
            });
            clear(&out);
            let t = Instant::now();
            export_archive(f, &out);
            t.elapsed()
        }
        "archive import zst" => {
            let a = f.scratch("archive.tar.zst");
            if !a.exists() {
                export_archive(f, &a);
            }
            let db = f.scratch("imported.redb");
            clear(&db);
            let s = Store::open(&db).expect("empty store");
            let t = Instant::now();
            let checked = archive::check_archive(
                archive::Source::File(&a),
                &f.root,
                ImportOptions::default().max_file_size,
            )
            .expect("archive check");
            let r = archive::import_archive(&s, &checked, ImportOptions::default(), &quiet)
                .expect("archive import");
            drop(s);
            let d = t.elapsed();
            assert_eq!(r.nodes.imported + r.nodes.present, f.nodes);
            assert!(r.problems.is_empty(), "{:?}", r.problems);
            d
        }
        "cp -r" => {
            let out = fresh(op);
            let t = Instant::now();
            run(Command::new("cp").arg("-r").arg(&layout).arg(&out));
            t.elapsed()
        }
        "tar cf" => {
            let tar = f.scratch("layout.tar");
            clear(&tar);
            let t = Instant::now();
            run(Command::new("tar")
                .arg("cf")
                .arg(&tar)
                .arg("-C")
                .arg(&f.root)
                .arg("layout"));
            t.elapsed()
        }
        "tar xf" => {
            let tar = f.scratch("layout.tar");
            if !tar.exists() {
                once("tar cf", f, run_no);
            }
            let out = fresh(op);
            fs::create_dir(&out).expect("dir");
            let t = Instant::now();
            run(Command::new("tar").arg("xf").arg(&tar).arg("-C").arg(&out));
            t.elapsed()
        }
        _ => unreachable!("unknown op {op}"),
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2
    }
}

/// Medians per (size, op) and the summary table with the ratios.
#[derive(Default)]
struct Results {
    runs: BTreeMap<(u64, &'static str), Vec<Duration>>,
    sizes: Vec<(u64, u64, u64)>,
}

impl Results {
    fn summary(&mut self) -> String {
        let mut out = String::new();
        for &(label_n, nodes, bytes) in &self.sizes.clone() {
            let mut med = BTreeMap::new();
            for op in OPS {
                if let Some(v) = self.runs.get_mut(&(label_n, op)) {
                    med.insert(op, (median(v), v.len()));
                }
            }
            out += &format!(
                "\n{} nodes ({nodes} nodes, {:.1} MB of node files)\n\n",
                label(label_n),
                bytes as f64 / 1e6
            );
            out += "| operation | median | runs | nodes/s | MB/s |\n|---|---:|---:|---:|---:|\n";
            for (op, (d, runs)) in &med {
                let s = d.as_secs_f64();
                out += &format!(
                    "| {op} | {:.2} s | {runs} | {:.0} | {:.1} |\n",
                    s,
                    nodes as f64 / s,
                    bytes as f64 / 1e6 / s
                );
            }
            out += "\n| ratio (time) | cp -r | tar cf | tar xf |\n|---|---:|---:|---:|\n";
            for op in [
                "uwf export",
                "uwf import",
                "archive export",
                "archive export zst",
                "archive import zst",
            ] {
                let Some((u, _)) = med.get(op) else { continue };
                out += &format!("| {op} |");
                for b in ["cp -r", "tar cf", "tar xf"] {
                    match med.get(b) {
                        Some((d, _)) => {
                            out += &format!(" {:.2}× |", u.as_secs_f64() / d.as_secs_f64())
                        }
                        None => out += " – |",
                    }
                }
                out += "\n";
            }
        }
        out
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let prepare_only = std::env::var_os("UWF_BENCH_PREPARE_ONLY").is_some();
    let results = RefCell::new(Results::default());
    let mut sizes = vec![100_000u64];
    if std::env::var("UWF_BENCH_1M").is_ok_and(|v| v == "1") {
        sizes.push(1_000_000);
    }
    for n in sizes {
        let f = fixture(n);
        results.borrow_mut().sizes.push((n, f.nodes, f.bin_bytes));
        if prepare_only {
            continue;
        }
        let record = |op: &'static str, d: Duration| {
            results
                .borrow_mut()
                .runs
                .entry((n, op))
                .or_default()
                .push(d);
        };
        if n < 1_000_000 {
            // criterion: 10 samples of one run each, the medians kept for the ratios.
            let mut g = c.benchmark_group(format!("interchange/{}", label(n)));
            g.sample_size(10)
                .sampling_mode(SamplingMode::Flat)
                .warm_up_time(Duration::from_millis(1))
                .measurement_time(Duration::from_secs(1))
                .throughput(Throughput::Elements(f.nodes));
            for op in ops() {
                clear_outputs(&f, op);
                let mut run_no = 0;
                g.bench_function(op, |b| {
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| {
                                run_no += 1;
                                let d = once(op, &f, run_no);
                                record(op, d);
                                d
                            })
                            .sum()
                    })
                });
                clear_outputs(&f, op);
            }
            g.finish();
        } else {
            // 1M: a criterion group would take an hour; the same runs, timed the same way.
            let runs: usize = std::env::var("UWF_BENCH_1M_RUNS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(3);
            for op in ops() {
                clear_outputs(&f, op);
                for run_no in 1..=runs {
                    let d = once(op, &f, run_no);
                    eprintln!("{}/{op}: {d:.2?}", label(n));
                    record(op, d);
                }
                clear_outputs(&f, op);
            }
        }
        for p in [
            "layout.tar",
            "imported.redb",
            "archive.tar",
            "archive.tar.zst",
        ] {
            clear(&f.scratch(p));
        }
    }
    if prepare_only {
        return;
    }
    c.final_summary();
    let text = results.borrow_mut().summary();
    println!("{text}");
    let dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let _ = fs::write(dir.join("interchange-summary.md"), &text);
}
