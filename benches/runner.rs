//! Runner benchmarks, each beside the process-per-step way measured in the same run:
//! - threads of 20 steps with the in-process scripted agent through one `uwf run -j 256` process,
//!   beside `uwf thread step` processes with the same agent (a process per step);
//! - the trivial external agent (`sh` piping frontmatter into `uwf agent submit`) through
//!   `uwf run --jobs 8`, beside 8 parallel shell loops of `uwf thread step`;
//! - `fdatasync` calls per step of one `uwf thread step` process and of `uwf run` (strace);
//! - the file log's cost per step: `uwf run` and `uwf thread step` with it on and off;
//! - the traces' cost: `uwf run` with `OTEL_EXPORTER_OTLP_ENDPOINT` unset and set (a loopback
//!   OTLP/HTTP receiver in the bench process that reads each request and answers 200), in
//!   turns;
//! - `thread start --batch` of 10,000 threads (100,000 with `UWF_BENCH_FULL`) in one process,
//!   beside 100 `thread start` processes;
//! - opt-in (`UWF_BENCH_SLEEP=1`): 10,000 threads whose agent sleeps 1 s, `uwf run -j 500`,
//!   steps per second and peak RSS.
//!
//! ```sh
//! cargo build --release && cargo bench --bench runner
//! UWF_BENCH_FULL=1 cargo bench --bench runner     # 1,000 threads × 20 steps
//! ```

#![allow(clippy::unwrap_used)] // A test or bench fails loudly on an unexpected error.

mod common;

use common::{stdout_of, uwf_bin};

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One role that reports `continue` until its script says `done`.
const COUNT: &str = include_str!("count.yaml");

const STEPS: usize = 20;

fn uwf(home: &Path, args: &[&str]) -> String {
    uwf_with(home, &[], args)
}

/// [`uwf`] with more variables in its environment.
fn uwf_with(home: &Path, vars: &[(&str, &str)], args: &[&str]) -> String {
    let mut c = Command::new(uwf_bin());
    c.env("UWF_HOME", home)
        .envs(vars.iter().copied())
        .args(args);
    String::from_utf8(stdout_of(&mut c, &format!("uwf {args:?}"))).unwrap()
}

/// A fresh root with the workflow, its script and the trivial agent.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        std::fs::write(home.join("count.yaml"), COUNT).unwrap();
        let mut script = String::from("worker:\n");
        for i in 0..STEPS {
            let s = if i + 1 == STEPS { "done" } else { "continue" };
            script.push_str(&format!("  - $status: {s}\n    note: step {i}\n"));
        }
        std::fs::write(home.join("count.script.yaml"), script).unwrap();
        let agent = home.join("agent.sh");
        std::fs::write(
            &agent,
            format!(
                "#!/bin/sh\nprintf -- '---\\n$status: continue\\nnote: ok\\n---\\n' | {} agent submit \"$1\" \"$2\"\n",
                uwf_bin().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        uwf(
            &home,
            &["workflow", "put", home.join("count.yaml").to_str().unwrap()],
        );
        Home { _dir: dir, home }
    }

    /// `n` threads started in one `thread start --batch` process.
    fn start(&self, n: usize, extra: &[&str]) -> Vec<String> {
        self.start_timed(n, extra).0
    }

    /// [`Home::start`], with the time of the process.
    fn start_timed(&self, n: usize, extra: &[&str]) -> (Vec<String>, Duration) {
        let batch = self.home.join("batch.jsonl");
        std::fs::write(&batch, "{\"prompt\":\"go\",\"cwd\":\"/tmp\"}\n".repeat(n)).unwrap();
        let mut args = vec![
            "thread",
            "start",
            "count",
            "--batch",
            batch.to_str().unwrap(),
            "-q",
        ];
        args.extend(extra);
        let t = Instant::now();
        let out = uwf(&self.home, &args);
        let took = t.elapsed();
        (out.lines().map(str::to_string).collect(), took)
    }

    fn scripted(&self) -> String {
        format!(
            "{} agent scripted --script {}",
            uwf_bin().display(),
            self.home.join("count.script.yaml").display()
        )
    }

    fn trivial(&self) -> String {
        self.home.join("agent.sh").display().to_string()
    }
}

/// `thread start --batch` of 100,000 threads (10,000 without `UWF_BENCH_FULL`) into a fresh
/// root, one process, beside 100 `thread start` processes (one thread each) into another.
fn start_batch(c: &mut Criterion) {
    let n = if std::env::var_os("UWF_BENCH_FULL").is_some() {
        100_000
    } else {
        10_000
    };
    let mut g = c.benchmark_group("thread_start");
    g.sample_size(10);
    g.sampling_mode(criterion::SamplingMode::Flat);
    g.bench_function(format!("batch_{n}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let h = Home::new();
                let (ids, took) = h.start_timed(n, &[]);
                assert_eq!(ids.len(), n);
                eprintln!(
                    "thread start --batch: {n} threads in {took:.2?}: {:.0} threads/s",
                    n as f64 / took.as_secs_f64()
                );
                total += took;
            }
            total
        })
    });
    let m = 100;
    g.bench_function(format!("processes_{m}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let h = Home::new();
                let args = [
                    "thread", "start", "count", "-p", "go", "--cwd", "/tmp", "-q",
                ];
                let t = Instant::now();
                for _ in 0..m {
                    uwf(&h.home, &args);
                }
                let took = t.elapsed();
                eprintln!(
                    "thread start processes: {m} threads in {took:.2?}: {:.0} threads/s",
                    m as f64 / took.as_secs_f64()
                );
                total += took;
            }
            total
        })
    });
    g.finish();
}

fn threads() -> usize {
    if std::env::var_os("UWF_BENCH_FULL").is_some() {
        1000
    } else {
        200
    }
}

/// Steps per second of `f` over `steps` steps, from `runs` runs.
fn report(name: &str, steps: usize, took: Duration) -> f64 {
    let rate = steps as f64 / took.as_secs_f64();
    eprintln!("{name}: {steps} steps in {took:.2?}: {rate:.0} steps/s");
    rate
}

/// A fresh root with `n` threads, then one `uwf run -j 256` of them with the scripted agent
/// (`vars` added to its environment): the root, the run's output and how long it took.
fn run_once(n: usize, vars: &[(&str, &str)]) -> (Home, String, Duration) {
    let h = Home::new();
    h.start(n, &[]);
    let agent = h.scripted();
    let t = Instant::now();
    let out = uwf_with(
        &h.home,
        vars,
        &["run", "--until-idle", "-j", "256", "--agent", &agent],
    );
    let took = t.elapsed();
    (h, out, took)
}

fn in_process(c: &mut Criterion) {
    let n = threads();
    let mut g = c.benchmark_group("runner_scripted");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function(format!("uwf_run_{n}x{STEPS}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let h = Home::new();
                h.start(n, &[]);
                let agent = h.scripted();
                let t = Instant::now();
                let out = uwf(
                    &h.home,
                    &["run", "--until-idle", "-j", "256", "--agent", &agent],
                );
                let took = t.elapsed();
                assert!(out.contains(&format!("\"completed\":{n}")), "{out}");
                report("uwf run, in-process scripted", n * STEPS, took);
                total += took;
            }
            total
        })
    });
    // The same agent, a process per step (8 loops at once), on fewer threads.
    let m = 16;
    g.bench_function(format!("thread_step_processes_{m}x{STEPS}"), |b| {
        b.iter_custom(|iters| {
            timed_loops(
                iters,
                m,
                STEPS,
                Home::scripted,
                "thread step processes, scripted",
            )
        })
    });
    g.finish();
}

/// `iters` runs of [`loops`] over `n` new threads of a fresh root, each stepped `steps` times
/// with the agent `agent` gives; the time of the loops alone.
fn timed_loops(
    iters: u64,
    n: usize,
    steps: usize,
    agent: fn(&Home) -> String,
    label: &str,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let h = Home::new();
        let ts = h.start(n, &[]);
        let agent = agent(&h);
        let t = Instant::now();
        loops(&h, &ts, &agent, steps);
        let took = t.elapsed();
        report(label, n * steps, took);
        total += took;
    }
    total
}

/// 8 shell loops of `uwf thread step`, the threads dealt round-robin, each stepped `steps` times.
fn loops(h: &Home, threads: &[String], agent: &str, steps: usize) {
    let mut children = Vec::new();
    for k in 0..8 {
        let mine: Vec<&String> = threads.iter().skip(k).step_by(8).collect();
        if mine.is_empty() {
            continue;
        }
        let script = mine
            .iter()
            .map(|t| {
                format!(
                    "for i in $(seq {steps}); do '{}' thread step {t} --agent \"$AGENT\" >/dev/null || exit 1; done",
                    uwf_bin().display()
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        children.push(
            Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("UWF_HOME", &h.home)
                .env("AGENT", agent)
                .spawn()
                .unwrap(),
        );
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
}

fn external(c: &mut Criterion) {
    let n = 40;
    let steps_each = 5;
    let mut g = c.benchmark_group("runner_external_agent");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function(format!("uwf_run_jobs8_{n}x{steps_each}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let h = Home::new();
                // The trivial agent always continues: the round limit ends each thread.
                let rounds = steps_each.to_string();
                h.start(n, &["--max-rounds", &rounds]);
                let agent = h.trivial();
                let t = Instant::now();
                uwf(
                    &h.home,
                    &["run", "--until-idle", "-j", "8", "--agent", &agent],
                );
                let took = t.elapsed();
                report("uwf run -j 8, sh agent", n * steps_each, took);
                total += took;
            }
            total
        })
    });
    g.bench_function(format!("thread_step_loops8_{n}x{steps_each}"), |b| {
        b.iter_custom(|iters| {
            timed_loops(
                iters,
                n,
                steps_each,
                Home::trivial,
                "8 loops of thread step, sh agent",
            )
        })
    });
    g.finish();
    fdatasyncs();
}

fn count_steps(h: &Home, t: &str) -> usize {
    let out = uwf(&h.home, &["thread", "steps", t]);
    out.matches("\"role\":").count()
}

/// `fdatasync` and `fsync` calls of one `uwf thread step` process (strace), and per step of a
/// `uwf run` over 10 threads of 20 steps.
fn fdatasyncs() {
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("strace not found: fdatasync counts skipped");
        return;
    }
    let h = Home::new();
    let ts = h.start(10, &[]);
    let agent = h.scripted();
    let count = |args: &[&str]| -> usize {
        let log = h.home.join("strace.log");
        let mut full = vec![
            "-f",
            "-e",
            "trace=fdatasync,fsync",
            "-o",
            log.to_str().unwrap(),
        ];
        let bin = uwf_bin();
        full.push(bin.to_str().unwrap());
        full.extend(args);
        let out = Command::new("strace")
            .args(&full)
            .env("UWF_HOME", &h.home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(out.success());
        let text = std::fs::read_to_string(&log).unwrap();
        text.lines()
            .filter(|l| l.contains("fdatasync(") || l.contains("fsync("))
            .count()
    };
    let one = count(&["thread", "step", &ts[0], "--agent", &agent]);
    eprintln!("fdatasync+fsync, one `uwf thread step` (in-process scripted agent): {one}");
    let trivial = h.trivial();
    let one_ext = count(&["thread", "step", &ts[1], "--agent", &trivial]);
    eprintln!("fdatasync+fsync, one `uwf thread step` (sh agent + uwf agent submit): {one_ext}");
    let before: usize = ts.iter().map(|t| count_steps(&h, t)).sum();
    let run = count(&["run", "--until-idle", "-j", "4", "--agent", &agent]);
    let steps: usize = ts.iter().map(|t| count_steps(&h, t)).sum::<usize>() - before;
    eprintln!(
        "fdatasync+fsync, `uwf run` over {} threads: {run} for {steps} steps, {:.1} per step",
        ts.len(),
        run as f64 / steps.max(1) as f64
    );
}

/// What the file log costs a step: the same work with the log on (the default) and off
/// (`UWF_LOG_FILE=0`), in one `uwf run` (in-process scripted agent) and as one `uwf thread step`
/// process per step.
fn logging(c: &mut Criterion) {
    let n = 200;
    let mut g = c.benchmark_group("logging");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for (label, vars) in [("on", vec![]), ("off", vec![("UWF_LOG_FILE", "0")])] {
        g.bench_function(format!("uwf_run_{n}x{STEPS}_log_{label}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (h, _, took) = run_once(n, &vars);
                    if label == "on" {
                        let logs = std::fs::read_dir(h.home.join("logs")).unwrap().count();
                        assert!(logs > 0, "no log written");
                    }
                    report(&format!("uwf run, log {label}"), n * STEPS, took);
                    total += took / (n * STEPS) as u32;
                }
                total
            })
        });
        g.bench_function(format!("thread_step_process_log_{label}"), |b| {
            let h = Home::new();
            let agent = h.scripted();
            let mut threads = Vec::new();
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if threads.is_empty() {
                        threads = h.start(20, &[]);
                    }
                    let t = threads.pop().unwrap();
                    let start = Instant::now();
                    uwf_with(&h.home, &vars, &["thread", "step", &t, "--agent", &agent]);
                    total += start.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

/// An OTLP/HTTP receiver on 127.0.0.1 for the traces bench: reads each request whole and
/// answers 200; counts requests and bytes.
struct Sink {
    url: String,
    seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Sink {
    fn start() -> Sink {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = seen.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(s) = s else { continue };
                let counted = counted.clone();
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    let mut r = BufReader::new(s);
                    loop {
                        let (mut line, mut len) = (String::new(), 0usize);
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        loop {
                            line.clear();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line.trim_end().is_empty() {
                                break;
                            }
                            if let Some((k, v)) = line.split_once(':')
                                && k.eq_ignore_ascii_case("content-length")
                            {
                                len = v.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; len];
                        if r.read_exact(&mut body).is_err() {
                            return;
                        }
                        counted.fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
                        let _ = w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                    }
                });
            }
        });
        Sink { url, seen }
    }
}

/// `uwf run` over 200 threads of 20 steps with traces off and on, in turns.
fn traces(c: &mut Criterion) {
    let n = 200;
    let sink = Sink::start();
    let mut g = c.benchmark_group("traces");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for (label, vars) in [
        ("off", vec![]),
        (
            "on",
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", sink.url.as_str())],
        ),
    ] {
        g.bench_function(format!("uwf_run_{n}x{STEPS}_traces_{label}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let before = sink.seen.load(std::sync::atomic::Ordering::Relaxed);
                    let (_h, _, took) = run_once(n, &vars);
                    let sent = sink.seen.load(std::sync::atomic::Ordering::Relaxed) - before;
                    assert_eq!(sent > 0, label == "on", "bytes received: {sent}");
                    report(&format!("uwf run, traces {label}"), n * STEPS, took);
                    total += took / (n * STEPS) as u32;
                }
                total
            })
        });
    }
    g.finish();
}

/// 10,000 threads (`UWF_BENCH_SLEEP_THREADS` to change) of one step each, whose agent sleeps
/// 1 s, through one `uwf run --jobs 500` (the agent is a `sh` script under the built-in command
/// adapter): steps per second against the 500/s the sleeping agents allow, and the runner's
/// peak RSS. Measured once, outside criterion's sampling (one run takes about a minute).
fn sleeping_agents() {
    let n: usize = std::env::var("UWF_BENCH_SLEEP_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let h = Home::new();
    std::fs::write(
        h.home.join("one.yaml"),
        COUNT.replace("name: count", "name: one"),
    )
    .unwrap();
    uwf(
        &h.home,
        &["workflow", "put", h.home.join("one.yaml").to_str().unwrap()],
    );
    let sleeper = h.home.join("sleep.sh");
    std::fs::write(
        &sleeper,
        "#!/bin/sh\nsleep 1\nprintf -- '---\\n$status: done\\nnote: slept\\n---\\n'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sleeper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t0 = Instant::now();
    {
        let store = uwf::store::Store::open(&h.home.join("uwf.redb")).unwrap();
        for i in 0..n {
            let mut r = [0u8; 10];
            r[..8].copy_from_slice(&(i as u64).to_be_bytes());
            uwf::thread::start(
                &store,
                &uwf::thread::StartInput {
                    workflow: "one",
                    prompt: "sleep",
                    cwd: "/tmp",
                    search_from: &h.home,
                    thread: uwf::thread::ThreadId::new(1_767_225_600_000, r),
                    now_ms: 1_767_225_600_000,
                },
            )
            .unwrap();
        }
    }
    eprintln!(
        "sleeping agents: {n} threads started in {:.1?}",
        t0.elapsed()
    );
    let agent = format!("uwf agent command -- {}", sleeper.display());
    let t = Instant::now();
    let mut child = Command::new(uwf_bin())
        .env("UWF_HOME", &h.home)
        .args(["run", "--until-idle", "-j", "500", "--agent", &agent])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The runner's high-water mark of resident memory, read until it exits.
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t.elapsed();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("\"completed\":{n}")), "{text}");
    let rate = report("uwf run -j 500, agents sleeping 1 s", n, took);
    eprintln!(
        "sleeping agents: {rate:.0} steps/s ({:.0} % of the 500/s the agents allow), peak RSS {:.0} MB",
        rate / 5.0,
        peak_kb as f64 / 1024.0
    );
}

fn sleeping(_c: &mut Criterion) {
    if std::env::var_os("UWF_BENCH_SLEEP").is_some() {
        sleeping_agents();
    } else {
        eprintln!("UWF_BENCH_SLEEP=1 runs the 10,000 sleeping agents (about a minute)");
    }
}

criterion_group!(
    benches,
    in_process,
    external,
    logging,
    traces,
    sleeping,
    start_batch
);
criterion_main!(benches);
