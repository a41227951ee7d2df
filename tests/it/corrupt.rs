//! Damaged store files: copies of one store, each with a random window of bytes overwritten or
//! cut off, read by the commands a user runs first. Each command either succeeds with the
//! undamaged store's answer or prints one damage line and exits 65; none panics and none
//! changes the file.
//!
//! A node whose key the damage changed reads as not stored (exit 1), as redb keeps no checksums
//! that would tell the two apart.
//!
//! `UWF_CORRUPT_COPIES=500` runs the full set (several minutes); the default fits the suite.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Copies damaged by default.
const DEFAULT_COPIES: usize = 24;
/// Nodes put into the store besides one finished thread.
const NODES: usize = 3000;

/// A fixed-seed generator (SplitMix64), so every run damages the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One damaged copy of `good`: a window of 8 to 4,096 random bytes at a random offset, or
/// (one time in ten) the file cut short.
fn damage(good: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = good.to_vec();
    if rng.below(10) == 0 {
        b.truncate(rng.below(good.len()));
    } else {
        let len = 8 + rng.below(4096 - 8 + 1);
        let at = rng.below(good.len() - 8);
        for x in b.iter_mut().skip(at).take(len) {
            *x = rng.next() as u8;
        }
    }
    b
}

/// Every file under `dir` with its bytes' fingerprint, by relative path.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, fingerprint(&p));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What a command answered, with the root's path made neutral.
struct Answer {
    code: i32,
    stdout: String,
    stderr: String,
    export: Option<BTreeMap<String, String>>,
}

fn ask(env: &TestEnv, args: &[&str]) -> Answer {
    let export = args[0] == "export";
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if export {
        args[1] = env.root().join("exp").display().to_string();
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = env.run(&argv);
    let root = env.root().display().to_string();
    Answer {
        code: r.code,
        stdout: r.stdout.replace(&root, "[ROOT]"),
        stderr: r.stderr,
        export: (export && r.code == 0).then(|| tree(&env.root().join("exp"))),
    }
}

#[test]
fn damaged_copies_fail_cleanly_or_read_correctly() {
    let copies = std::env::var("UWF_CORRUPT_COPIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_COPIES);
    let base = TestEnv::fixed();
    let lines: String = (0..NODES).map(|i| format!("\"node {i}\"\n")).collect();
    let put = base.run_stdin(&["cas", "put", "7VQ43ZSJTEWA7", "-", "--jsonl"], &lines);
    assert_eq!(put.code, 0, "{}", put.stderr);
    let some_node = json(put.stdout.lines().nth(NODES / 2).unwrap())
        .get("hash")
        .and_then(|h| h.as_str())
        .unwrap()
        .to_string();
    let wf = example("solve-issue.yaml").display().to_string();
    let agent = base.scripted(&example("solve-issue.script.yaml"));
    let thread = base.start(&wf, "The parser crashes on empty input");
    base.ok(&["thread", "step", &thread, "-c", "20", "--agent", &agent]);
    let head = base.head(&thread);
    let commands: [Vec<&str>; 5] = [
        vec!["cas", "verify"],
        vec!["cas", "get", &some_node],
        vec!["cas", "walk", &head],
        vec!["thread", "list", "--all"],
        vec!["export", "exp"],
    ];
    let expected: Vec<Answer> = commands.iter().map(|c| ask(&base, c)).collect();
    for (c, a) in commands.iter().zip(&expected) {
        assert_eq!(a.code, 0, "{c:?} on the undamaged store: {}", a.stderr);
    }
    let good = std::fs::read(base.db()).unwrap();

    let mut rng = Rng(0x5EED_0FDA_4A6E);
    let damaged: Vec<Vec<u8>> = (0..copies).map(|_| damage(&good, &mut rng)).collect();
    let tally = std::sync::Mutex::new(BTreeMap::<(String, i32), usize>::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(bytes) = damaged.get(i) else {
                        return;
                    };
                    let env = TestEnv::fixed();
                    std::fs::write(env.db(), bytes).unwrap();
                    for (c, want) in commands.iter().zip(&expected) {
                        let got = ask(&env, c);
                        let what = format!("copy {i}, uwf {}", c.join(" "));
                        assert!(
                            std::fs::read(env.db()).unwrap() == *bytes,
                            "{what} changed the damaged file"
                        );
                        if got.code == 0 {
                            assert_eq!(got.stdout, want.stdout, "{what}: a wrong answer");
                            if got.export != want.export {
                                let (g, w) = (got.export.unwrap(), want.export.clone().unwrap());
                                let diff: Vec<&String> = g
                                    .keys()
                                    .chain(w.keys())
                                    .filter(|k| g.get(*k) != w.get(*k))
                                    .collect();
                                panic!("{what}: a wrong export, files differ: {diff:?}");
                            }
                        } else if got.code == 1 {
                            // A key the damage changed reads as a node that is not stored: without
                            // checksums redb cannot tell the two apart, so the answer is the
                            // absent node's (a get's one line, a walk's missing-node report).
                            assert!(
                                got.stderr.starts_with("Node not found")
                                    || got.stderr.contains("missing from the store"),
                                "{what}: {}",
                                got.stderr
                            );
                        } else {
                            assert_eq!(got.code, 65, "{what}: {}", got.stderr);
                            let lines: Vec<&str> = got
                                .stderr
                                .lines()
                                .filter(|l| !l.starts_with("hint: "))
                                .collect();
                            assert_eq!(lines.len(), 1, "{what}: {:?}", got.stderr);
                            if c[1] == "verify" {
                                // Damage verify cannot read past is its finding, reported as such.
                                let report = json(&got.stdout);
                                assert_eq!(
                                    report.get("status").and_then(|s| s.as_str()),
                                    Some("damaged"),
                                    "{what}: {}",
                                    got.stdout
                                );
                            }
                            assert!(
                                lines[0].contains("uwf.redb") || lines[0].contains("damaged"),
                                "{what}: {}",
                                lines[0]
                            );
                        }
                        *tally
                            .lock()
                            .unwrap()
                            .entry((c[..2].join(" "), got.code))
                            .or_default() += 1;
                    }
                }
            });
        }
    });
    eprintln!("{copies} damaged copies: {:?}", tally.into_inner().unwrap());
}
