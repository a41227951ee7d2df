//! Fuzz targets and a small deterministic fuzzer that runs them on stable Rust.
//!
//! Each target takes arbitrary bytes and must neither panic nor break the property it checks.
//! The same functions back the `cargo fuzz` targets in `fuzz/` (coverage-guided, for whoever
//! has libFuzzer) and [`smoke`], which CI runs over the seed corpus in `fuzz/corpus/<target>/`
//! plus a bounded number of seeded mutations.

use crate::cas::{NodeId, cbor};
use crate::interchange::layout::{Layout, ScanProblem, check_node_bytes};
use crate::workflow::{self, Jsonata, StoredWorkflow};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

/// The canonical CBOR decoder: whatever decodes re-encodes to bytes that decode to the same
/// canonical bytes, and a file that [`cbor::split_canonical_node`] accepts is one that
/// [`cbor::decode_node`] accepts and [`cbor::encode_node`] writes back unchanged.
pub fn cbor(data: &[u8]) {
    if let Ok(v) = cbor::decode(data) {
        let canonical = cbor::encode(&v);
        let again = cbor::decode(&canonical).expect("canonical CBOR decodes");
        assert_eq!(cbor::encode(&again), canonical, "canonical form is stable");
    }
    if let Ok((_, used)) = cbor::decode_prefix(data) {
        assert!(used <= data.len(), "prefix within the input");
        assert!(
            cbor::decode(&data[..used]).is_ok(),
            "the prefix decodes alone"
        );
    }
    let parts = cbor::decode_node(data);
    if let Some(c) = cbor::split_canonical_node(data) {
        let parts = parts.expect("a canonical node file decodes");
        assert_eq!(parts.type_id, c.type_id);
        assert_eq!(parts.timestamp, c.timestamp);
        assert_eq!(cbor::encode(&parts.payload), c.payload_cbor);
        let back = cbor::encode_node(c.type_id, c.payload_cbor, c.timestamp);
        assert_eq!(
            back, data,
            "a canonical node file is what encode_node writes"
        );
    }
}

/// The node-file check of the interchange layout: a file named with the wrong id is refused
/// with the id its content has, and under that name it is accepted.
pub fn node_file(data: &[u8]) {
    let path = Path::new("cas/0000000000000.bin");
    match check_node_bytes(path, data, NodeId(0), Layout::Flat) {
        Ok(n) => assert_eq!(n.id, NodeId(0)),
        Err(ScanProblem::WrongId { actual, .. }) => {
            let n = check_node_bytes(path, data, actual, Layout::Flat)
                .expect("the content's own id is accepted");
            assert_eq!(n.id, actual);
        }
        Err(_) => {}
    }
}

/// Workflow YAML: parse (shape), semantic validation and, for a valid workflow, the nodes it
/// is stored as, whose workflow payload reads back.
pub fn workflow_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(def) = workflow::parse_str(text, None) else {
        return;
    };
    let evaluator = Jsonata { timeout_ms: 100 };
    if workflow::validate(&def, &evaluator).is_err() {
        return;
    }
    if let Ok(m) = workflow::materialize(&def) {
        let back = StoredWorkflow::from_payload(&m.workflow).expect("a stored workflow reads back");
        assert_eq!(back.name, def.name);
    }
}

/// A fuzz target: arbitrary bytes in, a panic on a bug.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/` name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("cbor", cbor),
    ("node_file", node_file),
    ("workflow_yaml", workflow_yaml),
];

/// Tokens a mutation may insert: CBOR heads and YAML syntax.
const TOKENS: &[&[u8]] = &[
    &[0x00],
    &[0xff],
    &[0x17],
    &[0x18],
    &[0x1b],
    &[0x3b],
    &[0x5f],
    &[0x7f],
    &[0x9f],
    &[0xbf],
    &[0xf4],
    &[0xf6],
    &[0xf9, 0x7e, 0x00],
    &[0xfb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1],
    &[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0xa3, 0x64],
    b"type",
    b"payload",
    b"timestamp",
    b"\n",
    b": ",
    b"- ",
    b"  ",
    b"{",
    b"}",
    b"[",
    b"]",
    b"&a ",
    b"*a",
    b"<<: ",
    b"!include ",
    b"\"",
    b"'",
    b"|\n",
    b"{{",
    b"}}",
    b"$START",
    b"$END",
    b"roles",
    b"graph",
    b"condition",
    b"1e308",
    b"-0",
    b"~",
];

/// xorshift64*: a fixed seed gives the same run everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four random edits of `input`, sometimes spliced with `other`.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(8) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                b.splice(at..at, t.iter().copied());
            }
            3 if !b.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at.min(end)..end);
            }
            4 if !b.is_empty() => {
                let from = rng.below(b.len());
                let end = (from + 1 + rng.below(32)).min(b.len());
                let chunk = b[from..end].to_vec();
                b.splice(at..at, chunk);
            }
            5 => b.truncate(at),
            6 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(64)).min(other.len());
                b.splice(at..at, other[from..end].iter().copied());
            }
            _ => b.insert(at, rng.next() as u8),
        }
    }
    b
}

/// Runs `target` over every corpus entry, then over seeded mutations of them until `budget`
/// has passed or `max_runs` inputs ran; returns the number of inputs run.
///
/// # Panics
/// When the target panics, with the input in hex, so that it can be added to the corpus.
pub fn smoke(
    name: &str,
    target: Target,
    corpus: &[Vec<u8>],
    seed: u64,
    budget: Duration,
    max_runs: u64,
) -> u64 {
    let run = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("fuzz target {name} panicked on input (hex) {hex}");
        }
    };
    let mut runs = 0;
    for input in corpus {
        run(input);
        runs += 1;
    }
    let start = Instant::now();
    let mut rng = Rng(seed | 1);
    let empty = Vec::new();
    while runs < max_runs && start.elapsed() < budget {
        let a = corpus.get(rng.below(corpus.len())).unwrap_or(&empty);
        let b = corpus.get(rng.below(corpus.len())).unwrap_or(&empty);
        // Mutations of mutations reach further from the seeds.
        let mut input = mutate(&mut rng, a, b);
        for _ in 0..rng.below(4) {
            run(&input);
            runs += 1;
            input = mutate(&mut rng, &input, b);
        }
        run(&input);
        runs += 1;
    }
    runs
}
