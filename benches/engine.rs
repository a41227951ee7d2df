//! Engine benchmarks: the overhead of one `uwf thread step` process (the whole command minus
//! the agent's own time, both measured as whole processes) with a trivial agent, `uwf thread show` / `uwf thread list`
//! processes against a store holding 10,000 threads, and `uwf thread read` / `uwf step read`
//! processes on a thread of 1,000 steps.
//!
//! ```sh
//! cargo bench --bench engine
//! UWF_BENCH_BIN=/path/to/other/uwf cargo bench --bench engine   # another build, same bench
//! UWF_BENCH_100K=1 cargo bench --bench engine -- threads_100k      # `thread list` of 100,000 threads
//! ```

#![allow(clippy::unwrap_used)] // A test or bench fails loudly on an unexpected error.

mod common;

use common::{stdout_of, uwf_bin};

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use uwf::store::Store;
use uwf::thread::{self, StartInput, SubmitInput, ThreadId};

const THREADS: usize = 10_000;

fn run(home: &Path, args: &[&str]) -> Vec<u8> {
    let mut c = Command::new(uwf_bin());
    c.env("UWF_HOME", home).args(args);
    stdout_of(&mut c, &format!("uwf {args:?}"))
}

/// A workflow whose one role loops forever, so every step is a real step.
const LOOP: &str = "name: loop\ndescription: one role, forever\nroles:\n  worker:\n    description: works\n    goal: work\n    capabilities: []\n    procedure: do it\n    output: a note\n    frontmatter:\n      type: object\n      properties:\n        note: {type: string}\n      required: [note]\ngraph:\n  $START: {_: {role: worker, prompt: start}}\n  worker: {_: {role: worker, prompt: again}}\n";

/// Steps a thread takes before the bench starts a fresh one, so every measured step runs on a
/// chain of a typical length (1–50 steps) however many iterations criterion asks for.
const STEPS_PER_THREAD: usize = 50;

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    let mut p = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(path, p).unwrap();
}

/// One thread of the loop workflow, stepped from a fresh start every `per_thread` steps.
struct Bench {
    home: PathBuf,
    thread: String,
    steps: usize,
    per_thread: usize,
}

impl Bench {
    fn new(dir: &Path) -> Bench {
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let wf = dir.join("loop.yaml");
        std::fs::write(&wf, LOOP).unwrap();
        run(&home, &["workflow", "put", wf.to_str().unwrap()]);
        Bench {
            home,
            thread: String::new(),
            steps: STEPS_PER_THREAD,
            per_thread: STEPS_PER_THREAD,
        }
    }

    /// A bench whose one thread already has `n` steps and is never replaced.
    fn long(dir: &Path, n: usize) -> Bench {
        let mut b = Bench::new(dir);
        b.next_thread();
        b.per_thread = usize::MAX;
        let store = Store::open(&b.home.join("uwf.redb")).unwrap();
        for i in 0..n {
            b.steps = i + 1;
            let id = b.prepare_step_in(&store);
            uwf::engine::advance(
                &store,
                &ThreadId::parse(&b.thread).unwrap(),
                id,
                1_767_225_600_000,
            )
            .unwrap();
        }
        b
    }

    /// The thread to step next (outside the timed part).
    fn next_thread(&mut self) -> &str {
        if self.steps >= self.per_thread {
            let out = String::from_utf8(run(
                &self.home,
                &["thread", "start", "loop", "-p", "bench", "--cwd", "/tmp"],
            ))
            .unwrap();
            self.thread = out.split("\"thread\":\"").nth(1).unwrap()[..26].to_string();
            self.steps = 0;
        }
        self.steps += 1;
        &self.thread
    }

    /// Writes the thread's next StepNode through the library, as an agent would, and returns
    /// its id.
    /// One `uwf thread step` process of `thread` with `agent`, timed from spawn to exit.
    fn step(&self, thread: &str, agent: &Path) -> Duration {
        timed(Command::new(uwf_bin()).env("UWF_HOME", &self.home).args([
            "thread",
            "step",
            thread,
            "--agent",
            agent.to_str().unwrap(),
        ]))
    }

    fn prepare_step(&self) -> String {
        let store = Store::open(&self.home.join("uwf.redb")).unwrap();
        self.prepare_step_in(&store).to_wire()
    }

    fn prepare_step_in(&self, store: &Store) -> uwf::cas::NodeId {
        let now = 1_767_225_600_000 + self.steps as u64;
        thread::submit(
            store,
            &SubmitInput {
                thread: &ThreadId::parse(&self.thread).unwrap(),
                role: "worker",
                raw: &format!("---\nnote: step {}\n---\nok\n", self.steps),
                detail: None,
                detail_id: None,
                detail_nodes: &[],
                assembled_prompt: None,
                fallback: None,
                agent: "bench",
                edge_prompt: None,
                cwd: "/tmp",
                started_ms: now,
                now_ms: now,
                usage: &[],
                hold: None,
            },
        )
        .unwrap()
    }
}

fn timed(cmd: &mut Command) -> Duration {
    let t0 = Instant::now();
    let out = cmd.output().expect("run");
    let d = t0.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

/// `iters` steps with the trivial agent, each timed as the whole `uwf thread step` process
/// minus the agent process run alone just before.
fn overhead(b: &mut Bench, trivial: &Path, next: &Path, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t = b.next_thread().to_string();
        std::fs::write(next, b.prepare_step()).unwrap();
        // The agent's own time: the same process, run alone, as the step runs it.
        let agent = timed(
            Command::new(trivial)
                .args([t.as_str(), "worker"])
                .current_dir("/tmp"),
        );
        total += b.step(&t, trivial).saturating_sub(agent);
    }
    total
}

fn step_overhead(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Bench::new(dir.path());
    // The trivial agent prints the id of the StepNode prepared for it.
    let next = dir.path().join("next-step");
    let trivial = dir.path().join("trivial.sh");
    write_script(&trivial, &format!("#!/bin/sh\ncat {}\n", next.display()));
    // A realistic agent answers through `uwf agent submit`.
    let submitting = dir.path().join("submit.sh");
    write_script(
        &submitting,
        &format!(
            "#!/bin/sh\nprintf -- '---\\nnote: done\\n---\\nok\\n' | {} agent submit \"$1\" \"$2\"\n",
            uwf_bin().display()
        ),
    );
    let mut g = c.benchmark_group("engine");
    g.sample_size(30);
    g.bench_function("thread_step_overhead", |bch| {
        bch.iter_custom(|iters| overhead(&mut b, &trivial, &next, iters))
    });
    let long_dir = tempfile::tempdir().unwrap();
    let mut long = Bench::long(long_dir.path(), 1000);
    g.bench_function("thread_step_overhead_after_1000_steps", |bch| {
        bch.iter_custom(|iters| overhead(&mut long, &trivial, &next, iters))
    });
    g.bench_function("thread_step_trivial_agent_whole", |bch| {
        bch.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let t = b.next_thread().to_string();
                    std::fs::write(&next, b.prepare_step()).unwrap();
                    b.step(&t, &trivial)
                })
                .sum()
        })
    });
    g.bench_function("thread_step_submitting_agent_whole", |bch| {
        bch.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let t = b.next_thread().to_string();
                    b.step(&t, &submitting)
                })
                .sum()
        })
    });
    g.finish();
}

fn setup_threads(dir: &Path) -> (PathBuf, String) {
    let home = dir.join("home");
    let wf = dir.join("loop.yaml");
    std::fs::write(&wf, LOOP).unwrap();
    let store = Store::open(&home.join("uwf.redb")).unwrap();
    thread::register_workflow(&store, &wf, 1).unwrap();
    let mut last = String::new();
    for i in 0..THREADS {
        let id = ThreadId::new(1_767_225_600_000 + i as u64 * 1000, [(i % 251) as u8; 10]);
        thread::start(
            &store,
            &StartInput {
                workflow: "loop",
                prompt: &format!("task {i}"),
                cwd: "/tmp",
                search_from: dir,
                thread: id.clone(),
                now_ms: 1_767_225_600_000 + i as u64,
            },
        )
        .unwrap();
        last = id.as_str().to_string();
    }
    (home, last)
}

/// A store of `n` idle threads of one workflow, each a StartNode and its thread record as
/// `thread start` writes them, written 5,000 threads a transaction.
fn setup_threads_batched(dir: &Path, n: usize) -> PathBuf {
    use uwf::store::ThreadRecord;
    use uwf::workflow::nodes::{START_NODE, StartNode};
    let home = dir.join("home");
    let wf = dir.join("loop.yaml");
    std::fs::write(&wf, LOOP).unwrap();
    let store = Store::open(&home.join("uwf.redb")).unwrap();
    let (_, wf_id) = thread::register_workflow(&store, &wf, 1).unwrap();
    let t0 = 1_767_225_600_000u64;
    for from in (0..n).step_by(5000) {
        let batch: Vec<_> = (from..(from + 5000).min(n))
            .map(|i| {
                let start = StartNode {
                    workflow: Some(wf_id),
                    prompt: format!("task {i}"),
                    cwd: "/tmp".into(),
                };
                let node = store.prepare(START_NODE, &start.to_value(), true).unwrap();
                let id = ThreadId::new(t0 + i as u64 * 1000, [(i % 251) as u8; 10]);
                (id, node)
            })
            .collect();
        store
            .write(|w| {
                let nodes: Vec<_> = batch.iter().map(|(_, p)| p.clone()).collect();
                w.put(&nodes, t0)?;
                for (id, p) in &batch {
                    let rec = ThreadRecord {
                        head: p.id,
                        workflow: Some(wf_id),
                        updated_ms: t0,
                    };
                    w.set_thread(id, &rec)?;
                }
                Ok(())
            })
            .unwrap();
    }
    home
}

/// `uwf thread list` of 100,000 threads (with `UWF_BENCH_100K=1`).
fn list_100k(c: &mut Criterion) {
    if std::env::var_os("UWF_BENCH_100K").is_none_or(|v| v == "0") {
        return;
    }
    // `UWF_BENCH_DIR` keeps the store (for a profiler) and reuses it.
    let dir = tempfile::tempdir().unwrap();
    let home = match std::env::var_os("UWF_BENCH_DIR") {
        Some(d) if Path::new(&d).join("home/uwf.redb").exists() => Path::new(&d).join("home"),
        Some(d) => setup_threads_batched(Path::new(&d), 100_000),
        None => setup_threads_batched(dir.path(), 100_000),
    };
    let out = run(&home, &["thread", "list"]);
    assert_eq!(
        out.split(|&b| b == b'{').count() - 1,
        100_000,
        "one object per thread"
    );
    let mut g = c.benchmark_group("threads_100k");
    g.sample_size(20);
    g.bench_function("thread_list_all_100k", |b| {
        b.iter(|| run(&home, &["thread", "list"]))
    });
    g.bench_function("thread_list_take_20", |b| {
        b.iter(|| run(&home, &["thread", "list", "--take", "20"]))
    });
    g.finish();
}

fn show_and_list(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (home, t) = setup_threads(dir.path());
    let mut g = c.benchmark_group("threads_10k");
    g.sample_size(30);
    g.bench_function("thread_show", |b| {
        b.iter(|| run(&home, &["thread", "show", &t]))
    });
    g.bench_function("thread_list_all_10k", |b| {
        b.iter(|| run(&home, &["thread", "list"]))
    });
    g.bench_function("thread_list_take_20", |b| {
        b.iter(|| run(&home, &["thread", "list", "--take", "20"]))
    });
    g.finish();
}

/// `uwf thread read` and `uwf step read` processes on a thread of 1,000 steps, each timed from
/// spawn to exit (criterion's `iter` around the whole `Command::output`).
fn read_long(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let b = Bench::long(dir.path(), 1000);
    let show = String::from_utf8(run(&b.home, &["thread", "show", &b.thread])).unwrap();
    let head = show.split("\"head\":\"").nth(1).unwrap()[..13].to_string();
    let mut g = c.benchmark_group("read_1000_steps");
    g.sample_size(30);
    g.bench_function("thread_read", |bch| {
        bch.iter(|| run(&b.home, &["thread", "read", &b.thread]))
    });
    g.bench_function("step_read", |bch| {
        bch.iter(|| run(&b.home, &["step", "read", &head]))
    });
    g.finish();
}

criterion_group!(benches, step_overhead, show_and_list, read_long, list_100k);
criterion_main!(benches);
