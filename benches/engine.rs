//! Engine benchmarks: the overhead of one `uwf thread step` process (the whole command minus
//! the agent's own time) with a trivial agent, and `uwf thread show` / `uwf thread list`
//! processes against a store holding 10,000 threads.
//!
//! ```sh
//! cargo bench --bench engine
//! ```

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use uwf::store::Store;
use uwf::thread::{self, StartInput, ThreadId};

const THREADS: usize = 10_000;

fn uwf_bin() -> PathBuf {
    // target/release/deps/engine-… → target/release/uwf
    let exe = std::env::current_exe().expect("bench executable");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("uwf");
    assert!(
        bin.exists(),
        "build the binary first: cargo build --release ({})",
        bin.display()
    );
    bin
}

fn run(home: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new(uwf_bin())
        .env("UWF_HOME", home)
        .args(args)
        .output()
        .expect("run uwf");
    assert!(
        out.status.success(),
        "uwf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A workflow whose one role loops forever, so every step is a real step.
const LOOP: &str = "name: loop\ndescription: one role, forever\nroles:\n  worker:\n    description: works\n    goal: work\n    capabilities: []\n    procedure: do it\n    output: a note\n    frontmatter:\n      type: object\n      properties:\n        note: {type: string}\n      required: [note]\ngraph:\n  $START: {_: {role: worker, prompt: start}}\n  worker: {_: {role: worker, prompt: again}}\n";

fn setup_step(dir: &Path) -> (PathBuf, String, PathBuf) {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let wf = dir.join("loop.yaml");
    std::fs::write(&wf, LOOP).unwrap();
    run(&home, &["workflow", "put", wf.to_str().unwrap()]);
    let out = String::from_utf8(run(
        &home,
        &["thread", "start", "loop", "-p", "bench", "--cwd", "/tmp"],
    ))
    .unwrap();
    let t = out.split("\"thread\":\"").nth(1).unwrap()[..26].to_string();
    // The agent: a shell script that answers through `uwf agent submit` and records its own
    // start and end (ns), so its time can be taken out of the step's.
    let times = dir.join("agent-times");
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nstart=$(date +%s%N)\nprintf -- '---\\nnote: done\\n---\\nok\\n' | {} agent submit \"$1\" \"$2\"\necho \"$start $(date +%s%N)\" > {}\n",
            uwf_bin().display(),
            times.display()
        ),
    )
    .unwrap();
    let mut p = std::fs::metadata(&agent).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
    std::fs::set_permissions(&agent, p).unwrap();
    (home, t, agent)
}

fn step_overhead(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (home, t, agent) = setup_step(dir.path());
    let times = dir.path().join("agent-times");
    let mut g = c.benchmark_group("engine");
    g.sample_size(30);
    g.bench_function("thread_step_overhead", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                run(
                    &home,
                    &["thread", "step", &t, "--agent", agent.to_str().unwrap()],
                );
                let whole = t0.elapsed();
                let s = std::fs::read_to_string(&times).unwrap();
                let mut it = s.split_whitespace().map(|x| x.parse::<u64>().unwrap());
                let (a, z) = (it.next().unwrap(), it.next().unwrap());
                total += whole.saturating_sub(Duration::from_nanos(z - a));
            }
            total
        })
    });
    g.bench_function("thread_step_whole", |b| {
        b.iter(|| {
            run(
                &home,
                &["thread", "step", &t, "--agent", agent.to_str().unwrap()],
            )
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

criterion_group!(benches, step_overhead, show_and_list);
criterion_main!(benches);
