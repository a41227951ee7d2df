//! The fuzz targets of `uwf::fuzzing` over their seed corpus (`fuzz/corpus/<target>/`) and
//! seeded mutations of it. `UWF_FUZZ_SECONDS` sets the time for each target's mutations
//! (1 s by default; CI gives more); the seed is fixed, so a run is reproducible up to its length.

use std::path::Path;
use std::time::Duration;
use uwf::fuzzing::{TARGETS, smoke};

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("corpus file"))
        .collect()
}

fn run(target: &str) {
    let (_, f) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .expect("a target of that name");
    let seeds = corpus(target);
    assert!(seeds.len() >= 5, "the {target} corpus has its seed files");
    let secs: f64 = std::env::var("UWF_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let runs = smoke(
        target,
        *f,
        &seeds,
        0x5EED,
        Duration::from_secs_f64(secs),
        u64::MAX,
    );
    assert!(
        runs > seeds.len() as u64,
        "{target}: mutations ran ({runs} inputs)"
    );
    eprintln!("{target}: {runs} inputs in {secs} s");
}

#[test]
fn fuzz_cbor() {
    run("cbor");
}

#[test]
fn fuzz_node_file() {
    run("node_file");
}

#[test]
fn fuzz_workflow_yaml() {
    run("workflow_yaml");
}

#[test]
fn smoke_reports_a_panicking_target_with_its_input() {
    fn picky(data: &[u8]) {
        assert!(!data.contains(&0xAB), "found the byte");
    }
    let r = std::panic::catch_unwind(|| {
        smoke(
            "picky",
            picky,
            &[vec![1, 2, 3]],
            1,
            Duration::from_secs(5),
            1_000_000,
        )
    });
    let msg = r.expect_err("the mutations reach 0xAB");
    let msg = msg
        .downcast_ref::<String>()
        .expect("a formatted message")
        .clone();
    assert!(
        msg.starts_with("fuzz target picky panicked on input (hex) "),
        "{msg}"
    );
    assert!(msg.contains("ab"), "{msg}");
}
