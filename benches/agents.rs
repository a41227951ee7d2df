//! Agent benchmarks: the model-extraction path of `uwf agent submit` without the HTTP round
//! trip (request built and serialised, a canned reply parsed, validated and stored with the
//! StepNode) beside the frontmatter fast path, and one whole `uwf thread step` process with the
//! built-in LLM agent against a local OpenAI-compatible server that answers at once.
//!
//! ```sh
//! cargo build --release && cargo bench --bench agents
//! ```

#![allow(clippy::unwrap_used)] // A test or bench fails loudly on an unexpected error.

mod common;

use common::{stdout_of, uwf_bin};

#[path = "../tests/it/fake_api.rs"]
mod fake_api;

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use uwf::agent::extract::{extract_request, parse_reply};
use uwf::cas::Value;
use uwf::store::Store;
use uwf::thread::{self, Fallback, StartInput, SubmitInput, ThreadId};

/// One role, forever: every step is a real step.
const LOOP: &str = "name: loop\ndescription: one role, forever\nroles:\n  worker:\n    description: works\n    goal: work\n    capabilities: []\n    procedure: do it\n    output: a note\n    frontmatter:\n      type: object\n      properties:\n        note: {type: string}\n        size: {type: integer}\n      required: [note]\ngraph:\n  $START: {_: {role: worker, prompt: start}}\n  worker: {_: {role: worker, prompt: again}}\n";

const STEPS_PER_THREAD: usize = 50;

/// The model's half without the network: the request as it would be sent, then a canned
/// reply read and checked.
struct Canned;

impl Fallback for Canned {
    fn extract(
        &self,
        schema: &Value,
        raw: &str,
        check: &dyn Fn(&Value) -> Result<(), String>,
    ) -> Result<Value, String> {
        let body = extract_request("bench-model", schema, raw).body().to_json();
        std::hint::black_box(body);
        let v = parse_reply("```json\n{\"note\":\"extracted\",\"size\":3}\n```")?;
        check(&v)?;
        Ok(v)
    }
}

struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    workflow: PathBuf,
    thread: Option<ThreadId>,
    steps: usize,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let workflow = home.join("loop.yaml");
        std::fs::write(&workflow, LOOP).unwrap();
        Home {
            _dir: dir,
            home,
            workflow,
            thread: None,
            steps: STEPS_PER_THREAD,
        }
    }

    fn thread(&mut self, store: &Store) -> ThreadId {
        if self.steps >= STEPS_PER_THREAD {
            let now = 1_767_225_600_000;
            thread::register_workflow(store, &self.workflow, now).unwrap();
            let id = ThreadId::generate(now);
            thread::start(
                store,
                &StartInput {
                    workflow: "loop",
                    prompt: "bench",
                    cwd: "/tmp",
                    search_from: &self.home,
                    thread: id.clone(),
                    now_ms: now,
                },
            )
            .unwrap();
            self.thread = Some(id);
            self.steps = 0;
        }
        self.steps += 1;
        self.thread.clone().expect("a thread")
    }
}

/// The role's schema of the bench workflow.
const SCHEMA: &str = r#"{"type":"object","properties":{"note":{"type":"string"},"size":{"type":"integer"}},"required":["note"]}"#;

fn extraction(c: &mut Criterion) {
    let mut h = Home::new();
    let store = Store::open(&h.home.join("uwf.redb")).unwrap();
    let mut g = c.benchmark_group("extraction");
    // The extraction itself, in memory: the fast path fails, the request is built and
    // serialised, the reply read and validated against the role's schema.
    let schema = Value::from_json_str(SCHEMA).unwrap();
    let validator = uwf::cas::schema::Validator::new(&schema).unwrap();
    g.bench_function("model_path_in_memory", |b| {
        b.iter(|| {
            let raw = "Prose without any frontmatter, as a model may write it.";
            assert!(uwf::agent::fast_path(raw, &schema, "SCHEMA").is_err());
            let check = |v: &Value| validator.validate(v, "SCHEMA").map_err(|e| e.to_string());
            std::hint::black_box(Canned.extract(&schema, raw, &check).unwrap())
        })
    });
    let mut n = 0u64;
    for (name, fallback, raw) in [
        (
            "model_path_without_http",
            true,
            "Prose without frontmatter, step",
        ),
        ("frontmatter_fast_path", false, "---\nnote: fast\n---\nstep"),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let t = h.thread(&store);
                    let raw = format!("{raw} {n}");
                    let started = Instant::now();
                    let id = thread::submit(
                        &store,
                        &SubmitInput {
                            thread: &t,
                            role: "worker",
                            raw: &raw,
                            detail: None,
                            detail_id: None,
                            detail_nodes: &[],
                            assembled_prompt: None,
                            fallback: fallback.then_some(&Canned as &dyn Fallback),
                            agent: "bench",
                            edge_prompt: None,
                            cwd: "/tmp",
                            started_ms: 1_767_225_600_000 + n,
                            now_ms: 1_767_225_600_000 + n,
                            usage: &[],
                            hold: None,
                        },
                    )
                    .unwrap();
                    total += started.elapsed();
                    uwf::engine::advance(&store, &t, id, 1_767_225_600_000 + n).unwrap();
                }
                total
            })
        });
    }
    g.finish();
}

fn llm_step(c: &mut Criterion) {
    let api = fake_api::FakeApi::start(vec![fake_api::ok("---\nnote: from the model\n---\ndone")]);
    let mut h = Home::new();
    std::fs::write(
        h.home.join("config.yaml"),
        format!(
            "providers:\n  fake: {{baseUrl: '{}', apiKey: sk-bench}}\nmodels:\n  default: {{provider: fake, name: m}}\ndefaultModel: default\nagents:\n  llm: {{command: uwf-llm}}\ndefaultAgent: llm\n",
            api.url
        ),
    )
    .unwrap();
    let bin = uwf_bin();
    let mut g = c.benchmark_group("llm_agent");
    g.sample_size(30);
    g.bench_function("thread_step_process", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = {
                    let store = Store::open(&h.home.join("uwf.redb")).unwrap();
                    h.thread(&store)
                };
                let started = Instant::now();
                let mut c = Command::new(&bin);
                c.env("UWF_HOME", &h.home)
                    .args(["thread", "step", t.as_str()]);
                stdout_of(&mut c, "uwf thread step");
                total += started.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, extraction, llm_step);
criterion_main!(benches);
