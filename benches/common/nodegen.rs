//! The fixed-seed node generator of the store benches (`cas`, `pg`): threads made of a
//! StartNode (referencing one of a few Workflow nodes) and a chain of StepNodes, each step
//! referencing its start, the previous step, an output text node and a detail text node. The
//! first thread holds a quarter of the nodes: the long thread-like chain the walks follow.

#![allow(dead_code)] // Not every bench uses every part.

use crate::NOW_MS;
use crate::data::{Rng, obj};
use uwf::cas::bootstrap::ids;
use uwf::cas::{NodeId, Value};
use uwf::store::{Prepared, Store};

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

pub fn text(rng: &mut Rng, len: usize, tag: u64) -> String {
    let mut s = format!("#{tag} ");
    while s.len() < len {
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        s.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    s.truncate(len);
    s
}

/// The generated nodes, in write order, and the head of the long thread.
pub struct Data {
    /// Every node, for the sizes whose put is benched again and again (up to 1M); empty at
    /// 10M, where the nodes are generated and stored chunk by chunk.
    pub nodes: Vec<Prepared>,
    /// Ids to get: every node's up to 1M, a sample of 100,000 at 10M.
    pub sample: Vec<NodeId>,
    pub long_head: NodeId,
    /// Nodes reachable from `long_head`.
    pub long_len: u64,
}

/// The fixed-seed generator of [`Data`]: threads one after the other, the first holding a
/// quarter of the nodes.
pub struct Gen<'a> {
    store: &'a Store,
    n: usize,
    /// Longest text payload: 2,000 bytes up to 1M nodes, 1,000 at 10M.
    max_len: u64,
    rng: Rng,
    workflows: Vec<NodeId>,
    made: usize,
    thread: u64,
    pub long_head: NodeId,
    pub long_len: u64,
}

impl<'a> Gen<'a> {
    pub fn new(store: &'a Store, n: usize) -> Gen<'a> {
        Gen {
            store,
            n,
            max_len: if n > 1_000_000 { 1000 } else { 2000 },
            rng: Rng(0x5EED_0000_0000_0001),
            workflows: Vec::new(),
            made: 0,
            thread: 0,
            long_head: NodeId(0),
            long_len: 0,
        }
    }

    fn push(&mut self, out: &mut Vec<Prepared>, t: NodeId, v: Value) -> NodeId {
        let p = self.store.prepare(t, &v, false).expect("prepare");
        let id = p.id;
        out.push(p);
        self.made += 1;
        id
    }

    /// The next whole threads, at least `at_least` nodes of them (fewer at the end); empty when
    /// all `n` are made.
    pub fn chunk(&mut self, at_least: usize) -> Vec<Prepared> {
        let id = |s: &str| NodeId::parse(s).expect("builtin id");
        let (text_t, start_t, step_t, wf_t) = (
            id(ids::TEXT),
            id(ids::START_NODE),
            id(ids::STEP_NODE),
            id(ids::WORKFLOW),
        );
        let mut nodes = Vec::with_capacity(at_least + 200);
        if self.made == 0 {
            for w in 0..4.min(self.n) {
                let mut r = Rng(w as u64);
                let v = obj(vec![
                    ("name", Value::str(format!("wf-{w}"))),
                    ("description", Value::str(text(&mut r, 300, w as u64))),
                    ("roles", obj(vec![])),
                    ("graph", obj(vec![])),
                ]);
                let wf = self.push(&mut nodes, wf_t, v);
                self.workflows.push(wf);
            }
            self.long_head = self.workflows[0];
        }
        let (n, max_len) = (self.n, self.max_len);
        let long_target = n / 4;
        while self.made < n && nodes.len() < at_least {
            let rng = &mut self.rng;
            let first = self.thread == 0;
            let thread = self.thread;
            let before = self.made;
            let wf = self.workflows[rng.below(self.workflows.len() as u64) as usize];
            let cwd = format!("/home/dev/projects/p{}", rng.below(1000));
            let plen = rng.range(200, 800) as usize;
            let prompt = text(rng, plen, thread);
            let start = self.push(
                &mut nodes,
                start_t,
                obj(vec![
                    ("workflow", Value::str(wf.to_wire())),
                    ("prompt", Value::str(prompt)),
                    ("cwd", Value::str(cwd.clone())),
                ]),
            );
            let steps = if first {
                usize::MAX
            } else {
                self.rng.range(5, 60) as usize
            };
            let mut prev = Value::Null;
            let mut t0 = NOW_MS - 86_400_000 + thread * 1000;
            for s in 0..steps {
                let budget = if first { before + 1 + long_target } else { n };
                if self.made + 3 > budget || self.made + 3 > n {
                    break;
                }
                let tag = thread << 20 | s as u64;
                let out_len = self.rng.range(200, max_len) as usize;
                let out_text = text(&mut self.rng, out_len, tag);
                let output = self.push(&mut nodes, text_t, Value::str(out_text));
                let det_len = self.rng.range(200, max_len) as usize;
                let det_text = text(&mut self.rng, det_len, tag);
                let detail = self.push(&mut nodes, text_t, Value::str(det_text));
                let dur = self.rng.range(500, 120_000);
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
                    let l = self.rng.range(40, 200) as usize;
                    f.push(("edgePrompt", Value::str(text(&mut self.rng, l, tag))));
                }
                t0 += dur;
                let step = self.push(&mut nodes, step_t, obj(f));
                prev = Value::str(step.to_wire());
                if first {
                    self.long_head = step;
                    self.long_len += 3;
                }
            }
            if first {
                self.long_len += 2; // the start node and its workflow
            }
            // Pad with text nodes when the budget ends mid-thread.
            while self.made < n && self.made - before < 2 {
                let l = self.rng.range(200, max_len) as usize;
                let tag = u64::MAX - self.made as u64;
                let t = text(&mut self.rng, l, tag);
                self.push(&mut nodes, text_t, Value::str(t));
            }
            self.thread += 1;
        }
        nodes
    }
}

/// Generates `n` nodes (not counting the bootstrap schemas) with a fixed seed.
pub fn generate(store: &Store, n: usize) -> Data {
    let mut g = Gen::new(store, n);
    let mut nodes = g.chunk(n);
    nodes.truncate(n);
    Data {
        sample: nodes.iter().map(|p| p.id).collect(),
        nodes,
        long_head: g.long_head,
        long_len: g.long_len,
    }
}
