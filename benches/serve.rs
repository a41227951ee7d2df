//! `uwf serve` benchmarks against a running server process, each request over a fresh
//! connection, timed from connect to the last byte of the answer:
//! - `GET /api/threads` (every thread, as `uwf thread list --all`), `GET /` (the thread list
//!   page), and the runners' dashboard `GET /runs` and `GET /api/runs` (as `uwf ps --stats`) on
//!   a store of 10,000 threads;
//! - `GET /threads/{id}` (the thread page: state, graph, conversation, every step's output) and
//!   `GET /api/threads/{id}/steps` on a thread of 1,000 steps;
//!
//! beside the same answers from a `uwf thread list --all`, `uwf ps --stats` and a `uwf thread
//! steps` process (spawn to exit), what a script would otherwise run.
//!
//! ```sh
//! cargo build --release && cargo bench --bench serve
//! UWF_BENCH_BIN=/path/to/other/uwf cargo bench --bench serve   # another build, same bench
//! ```

#![allow(clippy::unwrap_used)] // A test or bench fails loudly on an unexpected error.

mod common;

use common::{stdout_of, uwf_bin};

use criterion::{Criterion, criterion_group, criterion_main};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use uwf::store::Store;
use uwf::thread::{self, StartInput, SubmitInput, ThreadId};

const THREADS: usize = 10_000;
const STEPS: usize = 1_000;
const T0: u64 = 1_767_225_600_000;

/// A workflow whose one role loops forever, so every step is a real step.
const LOOP: &str = "name: loop\ndescription: one role, forever\nroles:\n  worker:\n    description: works\n    goal: work\n    capabilities: []\n    procedure: do it\n    output: a note\n    frontmatter:\n      type: object\n      properties:\n        note: {type: string}\n      required: [note]\ngraph:\n  $START: {_: {role: worker, prompt: start}}\n  worker: {_: {role: worker, prompt: again}}\n";

/// A store with the loop workflow registered; returns the root.
fn home(dir: &Path) -> (PathBuf, Store) {
    let home = dir.join("home");
    let wf = dir.join("loop.yaml");
    std::fs::write(&wf, LOOP).unwrap();
    let store = Store::open(&home.join("uwf.redb")).unwrap();
    thread::register_workflow(&store, &wf, 1).unwrap();
    (home, store)
}

fn start(store: &Store, dir: &Path, i: usize) -> ThreadId {
    let id = ThreadId::new(T0 + i as u64 * 1000, [(i % 251) as u8; 10]);
    thread::start(
        store,
        &StartInput {
            workflow: "loop",
            prompt: &format!("task {i}"),
            cwd: "/tmp",
            search_from: dir,
            thread: id.clone(),
            now_ms: T0 + i as u64,
        },
    )
    .unwrap();
    id
}

/// 10,000 active threads, each at its start.
fn many_threads(dir: &Path) -> PathBuf {
    let (home, store) = home(dir);
    for i in 0..THREADS {
        start(&store, dir, i);
    }
    home
}

/// One thread of 1,000 steps, written through the library as an agent would; returns the root
/// and the thread.
fn long_thread(dir: &Path) -> (PathBuf, String) {
    let (home, store) = home(dir);
    let t = start(&store, dir, 0);
    for i in 0..STEPS {
        let now = T0 + i as u64;
        let id = thread::submit(
            &store,
            &SubmitInput {
                thread: &t,
                role: "worker",
                raw: &format!("---\nnote: step {i}\n---\nok\n"),
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
        .unwrap();
        uwf::engine::advance(&store, &t, id, now).unwrap();
    }
    (home, t.as_str().to_string())
}

/// A `uwf serve --port 0` process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(home: &Path) -> Server {
        let mut child = Command::new(uwf_bin())
            .env("UWF_HOME", home)
            .args(["serve", "--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .rsplit_once("http://127.0.0.1:")
            .and_then(|(_, p)| p.split('/').next()?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no URL in {line:?}"));
        Server { child, port }
    }

    /// `GET path` over a new connection; the answer's length (the status must be 200).
    fn get(&self, path: &str) -> usize {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut b = Vec::with_capacity(1 << 20);
        s.read_to_end(&mut b).unwrap();
        assert!(b.starts_with(b"HTTP/1.1 200"), "GET {path}");
        b.len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `uwf` process's stdout length.
fn cli(home: &Path, args: &[&str]) -> usize {
    let mut c = Command::new(uwf_bin());
    c.env("UWF_HOME", home).args(args);
    stdout_of(&mut c, &format!("uwf {args:?}")).len()
}

fn threads_10k(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let home = many_threads(dir.path());
    let server = Server::start(&home);
    let mut g = c.benchmark_group("serve_10k_threads");
    g.sample_size(30);
    g.bench_function("api_threads", |b| b.iter(|| server.get("/api/threads")));
    g.bench_function("threads_page", |b| b.iter(|| server.get("/")));
    g.bench_function("cli_thread_list_all", |b| {
        b.iter(|| cli(&home, &["thread", "list", "--all"]))
    });
    g.bench_function("runs_page", |b| b.iter(|| server.get("/runs")));
    g.bench_function("api_runs", |b| b.iter(|| server.get("/api/runs")));
    g.bench_function("cli_ps_stats", |b| {
        b.iter(|| cli(&home, &["ps", "--stats"]))
    });
    g.finish();
}

fn steps_1000(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (home, t) = long_thread(dir.path());
    let server = Server::start(&home);
    let page = format!("/threads/{t}");
    let steps = format!("/api/threads/{t}/steps");
    let mut g = c.benchmark_group("serve_1000_steps");
    g.sample_size(30);
    g.bench_function("thread_page", |b| b.iter(|| server.get(&page)));
    g.bench_function("api_steps", |b| b.iter(|| server.get(&steps)));
    g.bench_function("cli_thread_steps", |b| {
        b.iter(|| cli(&home, &["thread", "steps", &t]))
    });
    g.finish();
}

criterion_group!(benches, threads_10k, steps_1000);
criterion_main!(benches);
