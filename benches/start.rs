//! Process start, whole processes timed from outside (spawn to exit): `/bin/true`, `uwf
//! --version`, `uwf cas get <id>` on a small store (one workflow, a few threads), `uwf agent
//! submit` handed to a socket that answers at once (the submitting process's own time, without a
//! runner's work), and `uwf agent submit` under a runner (`uwf run -j 1`, whose agent is a bash
//! script that times `/bin/true` and then the submit, each from its start to its exit, with
//! `$EPOCHREALTIME`; the runner answers once the submission is committed).
//!
//! ```sh
//! cargo build --release && cargo bench --bench start
//! UWF_BENCH_BEFORE=/path/to/earlier/uwf cargo bench --bench start -- pairs   # before and after, in turns
//! ```
//!
//! With `UWF_BENCH_BEFORE`, `pairs` runs each command of both binaries and `/bin/true` in turns
//! (`UWF_BENCH_ROUNDS` rounds, default 30, of 20 runs each) and prints each one's median wall
//! time and its ratio to `/bin/true`'s, and the submits' medians from runs of both binaries'
//! runners in turns.

#![allow(clippy::unwrap_used)] // A test or bench fails loudly on an unexpected error.

mod common;

use common::{stdout_of, uwf_bin};

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One role; its `done` ends the thread.
const FLOW: &str = "name: count\ndescription: one role\nroles:\n  worker:\n    description: works\n    goal: work\n    capabilities: []\n    procedure: do it\n    output: a note\n    frontmatter:\n      type: object\n      properties:\n        $status: {enum: [continue, done]}\n        note: {type: string}\n      required: [$status, note]\ngraph:\n  $START: {_: {role: worker, prompt: start}}\n  worker:\n    continue: {role: worker, prompt: again}\n    done: {role: $END, prompt: finished}\n";

/// The agent of the submit bench: times `/bin/true`, then `uwf agent submit` reading the
/// frontmatter from a file, and appends both durations (µs) to `$TIMES`.
const AGENT: &str = r#"#!/bin/bash
t0=$EPOCHREALTIME
/bin/true
t1=$EPOCHREALTIME
"$UWF" agent submit "$1" "$2" < "$FRONTMATTER"
s=$?
t2=$EPOCHREALTIME
echo "$(( (${t1/./} - ${t0/./}) )) $(( (${t2/./} - ${t1/./}) ))" >> "$TIMES"
exit $s
"#;

fn uwf_ok(bin: &Path, home: &Path, args: &[&str]) -> String {
    let mut c = Command::new(bin);
    c.env("UWF_HOME", home).args(args);
    String::from_utf8(stdout_of(&mut c, &format!("uwf {args:?}"))).unwrap()
}

/// A small store: the workflow and a few threads; the workflow's id is what `cas get` reads.
struct Small {
    _dir: tempfile::TempDir,
    home: PathBuf,
    workflow: String,
}

impl Small {
    fn new(bin: &Path) -> Small {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        std::fs::write(home.join("count.yaml"), FLOW).unwrap();
        let put = uwf_ok(
            bin,
            &home,
            &["workflow", "put", home.join("count.yaml").to_str().unwrap()],
        );
        let v: serde_json::Value = serde_json::from_str(&put).unwrap();
        let workflow = v["hash"].as_str().unwrap().to_string();
        for _ in 0..3 {
            uwf_ok(bin, &home, &["thread", "start", "count", "-p", "go", "-q"]);
        }
        Small {
            _dir: dir,
            home,
            workflow,
        }
    }
}

/// The wall time of one process, from its spawn to its exit (output thrown away).
fn timed(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let st = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let took = t.elapsed();
    assert!(st.success(), "{cmd:?}: {st}");
    took
}

fn bin_true() -> Command {
    let mut c = Command::new("/bin/true");
    c.stdin(Stdio::null());
    c
}

fn version(bin: &Path) -> Command {
    let mut c = Command::new(bin);
    c.arg("--version").stdin(Stdio::null());
    c
}

fn cas_get(bin: &Path, s: &Small) -> Command {
    let mut c = Command::new(bin);
    c.env("UWF_HOME", &s.home)
        .args(["cas", "get", &s.workflow])
        .stdin(Stdio::null());
    c
}

/// A stand-in for a runner's submit socket: answers every submission at once with the id
/// `id`, for as long as the bench runs.
struct Answerer {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    frontmatter: PathBuf,
}

impl Answerer {
    fn start(id: &str) -> Answerer {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("submit.sock");
        let frontmatter = dir.path().join("frontmatter.md");
        std::fs::write(&frontmatter, "---\n$status: done\nnote: ok\n---\n").unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let reply = format!("{{\"Id\":\"{id}\"}}");
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut request = Vec::new();
                let _ = conn.read_to_end(&mut request);
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        Answerer {
            _dir: dir,
            socket,
            frontmatter,
        }
    }
}

/// `uwf agent submit` of a thread of `s`'s store, handed to `a`.
fn submit_answered(bin: &Path, s: &Small, a: &Answerer) -> Command {
    let mut c = Command::new(bin);
    c.env("UWF_HOME", &s.home)
        .env("UWF_SUBMIT_SOCKET", &a.socket)
        .args(["agent", "submit", "06H13HTJ7DG752A6X69CV6HJP4", "worker"])
        .stdin(std::fs::File::open(&a.frontmatter).unwrap());
    c
}

/// `n` submits under one `uwf run -j 1` of `bin`, each a thread's only step (`done`): the durations
/// (µs) of `/bin/true` and of each submit, as the agent measured them.
fn submits(bin: &Path, n: usize) -> Vec<(u64, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    std::fs::write(home.join("count.yaml"), FLOW).unwrap();
    uwf_ok(
        bin,
        home,
        &["workflow", "put", home.join("count.yaml").to_str().unwrap()],
    );
    let batch = home.join("batch.jsonl");
    std::fs::write(&batch, "{\"prompt\":\"go\",\"cwd\":\"/tmp\"}\n".repeat(n)).unwrap();
    uwf_ok(
        bin,
        home,
        &[
            "thread",
            "start",
            "count",
            "--batch",
            batch.to_str().unwrap(),
            "-q",
        ],
    );
    let agent = home.join("agent.sh");
    std::fs::write(&agent, AGENT).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let front = home.join("frontmatter.md");
    std::fs::write(&front, "---\n$status: done\nnote: ok\n---\n").unwrap();
    let times = home.join("times.txt");
    let out = Command::new(bin)
        .env("UWF_HOME", home)
        .env("UWF", bin)
        .env("FRONTMATTER", &front)
        .env("TIMES", &times)
        .args(["run", "--until-idle", "-j", "1", "--agent"])
        .arg(&agent)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "uwf run: {stderr}");
    // Every thread completed, as the run's summary says; else its agent's own words, which
    // the run prints on standard error.
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains(&format!("\"completed\":{n}")),
        "an agent of the submit bench failed: {}\n{stderr}",
        summary.trim()
    );
    let text = std::fs::read_to_string(&times).unwrap();
    let t: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    assert_eq!(t.len(), n, "one submit a thread");
    t
}

/// Makes the command of one row of `pairs`.
type MakeCommand<'a> = Box<dyn Fn() -> Command + 'a>;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn process_start(c: &mut Criterion) {
    let bin = uwf_bin();
    let small = Small::new(&bin);
    let mut g = c.benchmark_group("process_start");
    g.sample_size(50);
    g.measurement_time(Duration::from_secs(5));
    let answerer = Answerer::start(&small.workflow);
    let mut each = |name: &str, make: &dyn Fn() -> Command| {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| timed(&mut make())).sum())
        });
    };
    each("true", &bin_true);
    each("uwf_version", &|| version(&bin));
    each("cas_get", &|| cas_get(&bin, &small));
    each("agent_submit_answered", &|| {
        submit_answered(&bin, &small, &answerer)
    });
    g.finish();

    // Submits under a runner: the agent's own timings, one runner per sample.
    let mut g = c.benchmark_group("agent_submit_under_runner");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("submit", |b| {
        b.iter_custom(|iters| {
            let t = submits(&bin, iters as usize);
            Duration::from_micros(t.iter().map(|(_, s)| s).sum())
        })
    });
    g.bench_function("true_beside_it", |b| {
        b.iter_custom(|iters| {
            let t = submits(&bin, iters as usize);
            Duration::from_micros(t.iter().map(|(t, _)| t).sum())
        })
    });
    g.finish();
}

/// With `UWF_BENCH_BEFORE`: both binaries and `/bin/true`, in turns, medians and ratios.
fn pairs(_c: &mut Criterion) {
    let Some(before) = common::bin_from_env("UWF_BENCH_BEFORE") else {
        return;
    };
    let after = uwf_bin();
    let rounds: usize = std::env::var("UWF_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let small = Small::new(&after);
    let answerer = Answerer::start(&small.workflow);
    let rows: Vec<(&str, MakeCommand)> = vec![
        ("/bin/true", Box::new(bin_true)),
        ("before: uwf --version", Box::new(|| version(&before))),
        ("after: uwf --version", Box::new(|| version(&after))),
        ("before: uwf cas get", Box::new(|| cas_get(&before, &small))),
        ("after: uwf cas get", Box::new(|| cas_get(&after, &small))),
        (
            "before: submit, answered",
            Box::new(|| submit_answered(&before, &small, &answerer)),
        ),
        (
            "after: submit, answered",
            Box::new(|| submit_answered(&after, &small, &answerer)),
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    for _ in 0..rounds {
        for _ in 0..20 {
            for (i, (_, make)) in rows.iter().enumerate() {
                times[i].push(timed(&mut make()).as_secs_f64() * 1e3);
            }
        }
    }
    let base = median(&mut times[0].clone());
    eprintln!(
        "process start, {rounds} rounds of 20 runs each, in turns (median wall ms, ratio to /bin/true):"
    );
    for (i, (name, _)) in rows.iter().enumerate() {
        let m = median(&mut times[i]);
        eprintln!("  {name:<24} {m:.3} ms  {:.2}×", m / base);
    }
    // Submits under a runner: each binary's runner and submits, in turns.
    let (mut sub, mut tru): ([Vec<f64>; 2], [Vec<f64>; 2]) = Default::default();
    for _ in 0..(rounds / 5).max(2) {
        for (k, bin) in [&before, &after].into_iter().enumerate() {
            for (t, s) in submits(bin, 50) {
                tru[k].push(t as f64 / 1e3);
                sub[k].push(s as f64 / 1e3);
            }
        }
    }
    eprintln!("uwf agent submit under uwf run -j 1 (median wall ms as the agent timed it):");
    for (k, name) in ["before", "after"].into_iter().enumerate() {
        let (s, t) = (median(&mut sub[k]), median(&mut tru[k]));
        eprintln!(
            "  {name:<7} submit {s:.3} ms, /bin/true beside it {t:.3} ms, {:.2}×",
            s / t
        );
    }
}

criterion_group!(benches, process_start, pairs);
criterion_main!(benches);
