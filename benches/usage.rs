//! `uwf usage` over a store whose aggregate holds the model calls of 100,000 threads
//! (`UWF_BENCH_USAGE_THREADS`): each thread one step of three calls (two models, one of three
//! roles, one of seven days, four workflows), written through `Writer::add_usage` in
//! transactions of 10,000 steps, as the steps' writes keep it. Timed: one `uwf usage` process
//! (the store's totals), `--by workflow`, `--by day --since 3d`, and `--thread T`, on redb and,
//! when a PostgreSQL server can be had (as the tests start one), on PostgreSQL.
//!
//! ```sh
//! cargo build --release --bin uwf && cargo bench --bench usage
//! ```

#![allow(clippy::unwrap_used)] // A bench fails loudly on an unexpected error.

mod common;
#[path = "../tests/it/pg.rs"]
mod pg;

use common::{stdout_of, uwf_bin};
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use uwf::cas::NodeId;
use uwf::model::ThreadId;
use uwf::store::{ModelCall, StepUsage, Store};

/// The clock of the writes: 2026-01-08, so that `--since 3d` keeps part of the seven days.
const NOW_MS: u64 = 1_767_830_400_000;
const DAY_MS: u64 = 86_400_000;

fn threads() -> usize {
    std::env::var("UWF_BENCH_USAGE_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn call(model: &str, n: u64) -> ModelCall {
    ModelCall {
        provider: "openai".into(),
        model: model.into(),
        input_tokens: 1_000 + n % 997,
        output_tokens: 200 + n % 101,
        cached_input_tokens: n % 13,
        started_ms: NOW_MS,
        duration_ms: 800,
        cost_usd: Some(0.001),
    }
}

/// Fills `s` with the usage of `n` threads; returns one thread's id.
fn fill(s: &Store, n: usize) -> String {
    let roles = ["planner", "coder", "reviewer"];
    let workflows = ["solve-issue", "review", "triage", "docs"];
    let ids: Vec<String> = (0..n)
        .map(|i| {
            ThreadId::generate(NOW_MS - (i as u64 % 1000))
                .as_str()
                .to_string()
        })
        .collect();
    let began = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        s.write(|w| {
            for &i in chunk {
                let k = i as u64;
                let calls = [
                    call("default", k),
                    call("default", k + 1),
                    call("extract", k),
                ];
                w.add_usage(
                    &StepUsage {
                        step: NodeId(k + 1),
                        thread: &ids[i],
                        workflow: Some(NodeId(100 + k % 4)),
                        workflow_name: workflows[i % 4],
                        role: roles[i % 3],
                        calls: &calls,
                        day: Some(u32::try_from((NOW_MS - (k % 7) * DAY_MS) / DAY_MS).unwrap()),
                    },
                    NOW_MS,
                )?;
            }
            Ok(())
        })
        .unwrap();
    }
    eprintln!(
        "usage of {n} threads written in {:.2} s",
        began.elapsed().as_secs_f64()
    );
    ids[n / 2].clone()
}

/// One `uwf usage ARGS` process against the store of `home` (or `url`).
fn usage(home: &Path, url: Option<&str>, args: &[&str]) {
    let mut c = Command::new(uwf_bin());
    c.env("UWF_HOME", home)
        .env("UWF_TEST_NOW_MS", NOW_MS.to_string())
        .arg("usage")
        .args(args);
    if let Some(u) = url {
        c.env("UWF_STORE", u);
    }
    assert!(stdout_of(&mut c, "uwf usage").starts_with(b"{\"calls\":"));
}

fn bench_store(c: &mut Criterion, backend: &str, home: &Path, url: Option<&str>, thread: &str) {
    let mut g = c.benchmark_group(format!("usage_{backend}"));
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    let cases: [(&str, Vec<&str>); 4] = [
        ("total", vec![]),
        ("by_workflow", vec!["--by", "workflow"]),
        ("by_day_since_3d", vec!["--by", "day", "--since", "3d"]),
        ("one_thread", vec!["--thread", thread]),
    ];
    for (name, args) in &cases {
        g.bench_function(*name, |b| b.iter(|| usage(home, url, args)));
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let n = threads();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let t = fill(&store, n);
    drop(store);
    bench_store(c, "redb", dir.path(), None, &t);
    if let Some(server) = pg::server() {
        let url = server.fresh_database();
        let store = Store::open_url(&url, &|_| None).unwrap();
        let t = fill(&store, n);
        drop(store);
        let home = tempfile::tempdir().unwrap();
        bench_store(c, "postgres", home.path(), Some(&url), &t);
    }
}

criterion_group!(usage_benches, benches);
criterion_main!(usage_benches);
