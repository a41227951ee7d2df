//! `uwf export --archive` and `uwf import FILE|-` end to end: the archive extracts (with the
//! system `tar`) to the directory export, imports to the store its directory gives, a chain of
//! `--since` archives imports to the store one full archive gives, and every bad archive is
//! refused with one line and the store left as it was.

use crate::common::{TestEnv, example, p};
use crate::interchange::ts_root;
use crate::transfer::tree;
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A store with the TypeScript fixture's nodes, threads, registry and history, and a thread of
/// uwf's own example workflow stepped twice.
fn home() -> TestEnv {
    let env = TestEnv::fixed();
    env.ok(&["import", &p(&ts_root())]);
    let agent = env.scripted(&example("solve-issue.script.yaml"));
    let t = env.start(&p(&example("solve-issue.yaml")), "The parser crashes");
    env.ok(&["thread", "step", &t, "-c", "2", "--agent", &agent]);
    env
}

/// Everything an export of the store holds, file by file (path → BLAKE3). An index file lists
/// a type's nodes in write order, which an import chooses: its lines are compared as a set.
fn state(env: &TestEnv) -> BTreeMap<String, String> {
    let out = tempfile::tempdir().unwrap();
    let d = out.path().join("e");
    env.ok(&["export", &p(&d)]);
    let mut t = tree(&d);
    for (name, digest) in t.iter_mut() {
        if name.starts_with("cas/_index/") {
            let mut lines: Vec<String> = fs::read_to_string(d.join(name))
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
            lines.sort();
            *digest = lines.join(",");
        }
    }
    t
}

/// `a == b`, naming only the paths that differ.
#[track_caller]
fn same(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>, what: &str) {
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    assert!(differ.is_empty(), "{what}: these differ: {differ:?}");
}

/// `tar xf archive -C dir` with the system tar (zstd through `tar --zstd` when the `zstd`
/// program is there, else decompressed here first).
fn extract(archive: &Path, dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let zst = archive.extension().is_some_and(|e| e == "zst");
    let have_zstd = Command::new("zstd").arg("--version").output().is_ok();
    let status = if zst && !have_zstd {
        let mut bytes = Vec::new();
        zstd::stream::read::Decoder::new(fs::File::open(archive).unwrap())
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap();
        let plain = dir.with_extension("plain.tar");
        fs::write(&plain, bytes).unwrap();
        Command::new("tar")
            .args(["xf", &p(&plain), "-C", &p(dir)])
            .status()
    } else {
        let mut c = Command::new("tar");
        if zst {
            c.arg("--zstd");
        }
        c.args(["-xf", &p(archive), "-C", &p(dir)]).status()
    };
    assert!(status.unwrap().success(), "tar x of {}", archive.display());
}

/// `tree` of an extracted archive, without the manifest.
fn extracted(archive: &Path, dir: &Path) -> BTreeMap<String, String> {
    extract(archive, dir);
    let mut t = tree(dir);
    assert!(
        t.remove("uwf.archive.json").is_some(),
        "no manifest in {}",
        archive.display()
    );
    t
}

#[test]
fn archive_extracts_to_the_directory_export_byte_for_byte() {
    let env = home();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let dir = w.join("dir");
    env.ok(&["export", &p(&dir)]);
    let want = tree(&dir);
    for name in ["a.tar", "a.tar.zst"] {
        let a = w.join(name);
        env.ok(&["export", "--archive", &p(&a)]);
        same(&extracted(&a, &w.join(format!("x-{name}"))), &want, name);
        // The same store gives the same bytes.
        let again = w.join(format!("again-{name}"));
        env.ok(&["export", "--archive", &p(&again)]);
        assert_eq!(fs::read(&a).unwrap(), fs::read(&again).unwrap(), "{name}");
    }
    // To stdout: the same bytes as to a file.
    let out = env
        .cmd()
        .args(["export", "--archive", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, fs::read(w.join("a.tar")).unwrap());
    // Fixed header fields.
    let list = Command::new("tar")
        .args(["tvf", &p(&w.join("a.tar"))])
        .output()
        .unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(list.lines().count() > 100);
    for l in list.lines() {
        assert!(
            l.starts_with("-rw-r--r-- 0/0") || l.starts_with("drwxr-xr-x 0/0"),
            "{l}"
        );
        assert!(l.contains(" 1970-01-01 00:00 "), "{l}");
    }
}

#[test]
fn archive_imports_to_the_store_its_directory_gives() {
    let env = home();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    env.ok(&["export", &p(&w.join("dir"))]);
    env.ok(&["export", "--archive", &p(&w.join("a.tar.zst"))]);
    env.ok(&["export", "--archive", &p(&w.join("a.tar"))]);
    let from_dir = TestEnv::fixed();
    from_dir.ok(&["import", &p(&w.join("dir"))]);
    let want = state(&from_dir);
    let zst = TestEnv::fixed();
    zst.ok(&["import", &p(&w.join("a.tar.zst"))]);
    same(&state(&zst), &want, "zstd");
    // Standard input, plain tar; zstd is found by its magic bytes, not by the name.
    let plain = TestEnv::fixed();
    let bytes = fs::read(w.join("a.tar")).unwrap();
    let out = plain
        .cmd()
        .args(["import", "-"])
        .write_stdin(bytes)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    same(&state(&plain), &want, "stdin");
    let renamed = w.join("compressed.tar");
    fs::copy(w.join("a.tar.zst"), &renamed).unwrap();
    let magic = TestEnv::fixed();
    magic.ok(&["import", &p(&renamed)]);
    same(&state(&magic), &want, "magic");
    // A tar of the directory made by the system tar (no manifest, `./` names) imports too.
    let gnu = w.join("gnu.tar");
    let st = Command::new("tar")
        .args(["cf", &p(&gnu), "-C", &p(&w.join("dir")), "."])
        .status()
        .unwrap();
    assert!(st.success());
    let by_tar = TestEnv::fixed();
    by_tar.ok(&["import", &p(&gnu)]);
    same(&state(&by_tar), &want, "tar cf");
    // A second import of the same archive changes nothing.
    magic.ok(&["import", &p(&renamed)]);
    same(&state(&magic), &want, "again");
}

#[test]
fn a_chain_of_since_archives_imports_to_the_store_one_full_archive_gives() {
    // No TypeScript fixture here: its nodes carry times later than the fixed clock, and a put
    // that makes a node's time earlier keeps the node's sequence number (see the module docs
    // of `interchange::archive`), so a `--since` archive would not carry it.
    let env = TestEnv::fixed();
    let t = env.start(&p(&example("debate.yaml")), "Before the first archive");
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let agent = env.scripted(&example("solve-issue.script.yaml"));
    let debate = env.scripted(&example("debate.script.yaml"));
    env.ok(&["thread", "step", &t, "--agent", &debate]);
    env.ok(&["workflow", "put", &p(&example("debate.yaml"))]);
    let mut chain: Vec<PathBuf> = vec![w.join("full.tar.zst")];
    env.ok(&["export", "--archive", &p(&chain[0])]);
    let a = env.start(&p(&example("solve-issue.yaml")), "First");
    let b = env.start(&p(&example("debate.yaml")), "Second");
    let c = env.start(&p(&example("solve-issue.yaml")), "Third");
    let mut nodes = Vec::new();
    for (i, steps) in [
        vec![(a.clone(), 1), (b.clone(), 1)],
        vec![(a.clone(), 2), (c.clone(), 1)],
        vec![(a.clone(), 10), (b.clone(), 2)],
    ]
    .into_iter()
    .enumerate()
    {
        for (t, n) in steps {
            let agent = if t == b { &debate } else { &agent };
            env.ok(&["thread", "step", &t, "-c", &n.to_string(), "--agent", agent]);
        }
        if i == 1 {
            env.ok(&["thread", "kill", &c]);
        }
        if i == 2 {
            // Removals after an archive are carried by the next `--since` archive: a finished
            // thread, an active one from the full archive, and a registered name with its
            // versions.
            env.ok(&["thread", "rm", &c]);
            env.ok(&["thread", "rm", "--force", &t]);
            env.ok(&["workflow", "remove", "--purge", "debate"]);
        }
        let next = w.join(format!("since{i}.tar"));
        let prev = chain.last().unwrap().clone();
        let rep =
            crate::common::json(&env.ok(&["export", "--archive", &p(&next), "--since", &p(&prev)]));
        nodes.push(rep.get("nodes").unwrap().as_f64().unwrap());
        chain.push(next);
    }
    assert_eq!(
        env.show(&a).get("status").and_then(|s| s.as_str()),
        Some("completed")
    );
    // Each `--since` archive holds only its own nodes.
    let total = crate::common::json(&env.ok(&["export", "--archive", &p(&w.join("end.tar"))]))
        .get("nodes")
        .unwrap()
        .as_f64()
        .unwrap();
    assert!(
        nodes.iter().all(|&n| n > 0.0 && n < total / 2.0),
        "{nodes:?} of {total}"
    );

    let full = TestEnv::fixed();
    full.ok(&["import", &p(&w.join("end.tar"))]);
    let want = state(&full);
    let chained = TestEnv::fixed();
    for a in &chain {
        chained.ok(&["import", &p(a)]);
    }
    same(&state(&chained), &want, "chain");
    let listed = chained.ok(&["thread", "list", "--all"]);
    assert!(!listed.contains(&c) && !listed.contains(&t), "{listed}");
    assert!(listed.contains(&a) && listed.contains(&b), "{listed}");
    assert!(!chained.ok(&["workflow", "list"]).contains("\"debate\""));
    // Extracted one over the other, they give the directory export of the last state.
    let x = w.join("x");
    for a in &chain {
        extract(a, &x);
    }
    let mut t = tree(&x);
    t.remove("uwf.archive.json");
    env.ok(&["export", &p(&w.join("dir"))]);
    same(&t, &tree(&w.join("dir")), "extracted chain");
}

/// One member to put in a hand-made archive.
enum Member<'a> {
    File(&'a str, &'a [u8]),
    /// A raw header name (no checks), regular file.
    Raw(&'a [u8], &'a [u8]),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
}

/// A tar of `members`, then the good archive's layout members (without its manifest).
fn hand_made(good: &Path, members: &[Member<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(0);
        match m {
            Member::File(name, data) => {
                h.set_size(data.len() as u64);
                h.set_path(name).unwrap();
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
            Member::Raw(name, data) => {
                h.set_size(data.len() as u64);
                h.as_old_mut().name[..name.len()].copy_from_slice(name);
                h.set_cksum();
                b.append(&h, *data).unwrap();
            }
            Member::Symlink(name, to) | Member::HardLink(name, to) => {
                h.set_entry_type(if matches!(m, Member::Symlink(..)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.set_size(0);
                h.set_path(name).unwrap();
                h.set_link_name(to).unwrap();
                h.set_cksum();
                b.append(&h, std::io::empty()).unwrap();
            }
        }
    }
    let mut a = tar::Archive::new(fs::File::open(good).unwrap());
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
        if name == "uwf.archive.json" {
            continue;
        }
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        let mut h = e.header().clone();
        h.set_cksum();
        b.append(&h, data.as_slice()).unwrap();
    }
    b.into_inner().unwrap()
}

/// The name and bytes of the good archive's first node members.
fn nodes_of(good: &Path, n: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut a = tar::Archive::new(fs::File::open(good).unwrap());
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
        if name.ends_with(".bin") && out.len() < n {
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            out.push((name, data));
        }
    }
    out
}

#[test]
fn bad_archives_are_refused_with_one_line_and_change_nothing() {
    let env = home();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // The archive of another store, so that importing any of it would change this one.
    let other = TestEnv::fixed();
    let agent = other.scripted(&example("debate.script.yaml"));
    let t = other.start(&p(&example("debate.yaml")), "Another question");
    other.ok(&["thread", "step", &t, "-c", "3", "--agent", &agent]);
    let good = w.join("good.tar");
    other.ok(&["export", "--archive", &p(&good)]);
    let good_zst = w.join("good.tar.zst");
    other.ok(&["export", "--archive", &p(&good_zst)]);
    let plain = fs::read(&good).unwrap();
    let zst = fs::read(&good_zst).unwrap();
    let before = state(&env);
    let threads = env.ok(&["thread", "list", "--all"]);

    let nodes = nodes_of(&good, 2);
    let (n0, b0) = (&nodes[0].0, &nodes[0].1);
    let n1 = &nodes[1].0;
    let mut corrupt_node = plain.clone();
    // A byte inside the first node member's data (after the manifest's and cas/'s headers).
    let at = {
        let mut a = tar::Archive::new(plain.as_slice());
        let mut entries = a.entries().unwrap();
        let mut pos = 0;
        for e in entries.by_ref() {
            let e = e.unwrap();
            if e.path_bytes().ends_with(b".bin") {
                pos = (e.raw_file_position() + e.size() / 2) as usize;
                break;
            }
        }
        pos
    };
    corrupt_node[at] ^= 0x01;
    let mut corrupt_zst = zst.clone();
    let mid = corrupt_zst.len() / 2;
    corrupt_zst[mid] ^= 0xff;
    // A line break and an escape in the first header's checksum field, which the error
    // quotes: still one line.
    let mut broken_field = plain.clone();
    broken_field[148..151].copy_from_slice(b"1\n\x1b");
    let cut = |b: &[u8], n: usize| b[..n].to_vec();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("cut in a header", cut(&plain, 700), "truncated"),
        ("cut in a node", cut(&plain, at + 10), "truncated"),
        (
            "cut before the end block",
            cut(&plain, plain.len() - 1024),
            "truncated",
        ),
        (
            "zstd cut",
            cut(&zst, zst.len() / 2),
            "truncated or corrupted",
        ),
        (
            "zstd cut at the end",
            cut(&zst, zst.len() - 4),
            "truncated or corrupted",
        ),
        // Whichever check meets the damage first: the frame, or a member's content.
        (
            "zstd corrupted",
            corrupt_zst,
            "corrupted|content hashes to|not a node|not part of the layout",
        ),
        ("node corrupted", corrupt_node, "content hashes to"),
        (
            "a header field with a line break",
            broken_field,
            "corrupted",
        ),
        (
            "not a tar",
            b"hello, this is not an archive".repeat(40),
            "corrupted",
        ),
        (
            "outside the layout",
            hand_made(&good, &[Member::File("etc/passwd", b"x")]),
            "not part of the layout",
        ),
        (
            "a file in cas/ that is not a node",
            hand_made(&good, &[Member::File("cas/notes.txt", b"x")]),
            "not part of the layout",
        ),
        (
            "dot-dot",
            hand_made(&good, &[Member::Raw(b"cas/../../evil.yaml", b"x")]),
            "\"..\"",
        ),
        (
            "absolute",
            hand_made(&good, &[Member::Raw(b"/tmp/threads.yaml", b"x")]),
            "absolute",
        ),
        (
            "symlink",
            hand_made(&good, &[Member::Symlink(n0, "/etc/passwd")]),
            "is a link",
        ),
        (
            "hard link",
            hand_made(&good, &[Member::HardLink(n0, "/etc/passwd")]),
            "is a link",
        ),
        (
            "name is not the content's id",
            hand_made(&good, &[Member::File(n1, b0)]),
            "not to its file name",
        ),
        (
            "manifest not first",
            hand_made(
                &good,
                &[
                    Member::File(n0, b0),
                    Member::File("uwf.archive.json", b"{}"),
                ],
            ),
            "not the first member",
        ),
    ];
    for (what, bytes, needle) in cases {
        let f = w.join("bad.tar");
        fs::write(&f, &bytes).unwrap();
        for stdin in [false, true] {
            let out = if stdin {
                env.cmd()
                    .args(["import", "-"])
                    .write_stdin(bytes.clone())
                    .output()
                    .unwrap()
            } else {
                env.cmd().args(["import", &p(&f)]).output().unwrap()
            };
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{what}: accepted");
            assert_eq!(err.lines().count(), 1, "{what}: {err}");
            assert!(needle.split('|').any(|n| err.contains(n)), "{what}: {err}");
            assert!(out.stdout.is_empty(), "{what}");
        }
        same(&state(&env), &before, what);
        assert_eq!(env.ok(&["thread", "list", "--all"]), threads, "{what}");
    }
    // Nothing is left behind beside the store.
    let left: Vec<_> = fs::read_dir(env.root())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.starts_with(".uwf-archive").then_some(n)
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The good archive is accepted, to show the cases above failed for their own reason.
    env.ok(&["import", &p(&good)]);
    assert_ne!(state(&env), before);
}

#[test]
fn since_needs_an_archive_with_a_manifest() {
    let env = home();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    fs::write(w.join("x.tar"), b"").unwrap();
    let new = p(&w.join("new.tar"));
    let r = env.run(&["export", "--archive", &new, "--since", &p(&w.join("x.tar"))]);
    assert_ne!(r.code, 0);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(!w.join("new.tar").exists());
    // An archive of a store written later than this one is not an earlier archive of it.
    let big = TestEnv::fixed();
    big.ok(&["import", &p(&ts_root())]);
    let agent = big.scripted(&example("debate.script.yaml"));
    let t = big.start(&p(&example("debate.yaml")), "q");
    big.ok(&["thread", "step", &t, "-c", "20", "--agent", &agent]);
    big.ok(&["export", "--archive", &p(&w.join("big.tar"))]);
    let small = TestEnv::fixed();
    small.ok(&["import", &p(&ts_root())]);
    let r = small.run(&[
        "export",
        "--archive",
        &new,
        "--since",
        &p(&w.join("big.tar")),
    ]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("not an earlier archive"), "{}", r.stderr);
    // One of another store that ends before this one's last write: refused too.
    let other = TestEnv::fixed();
    let t = other.start(&p(&example("debate.yaml")), "another store");
    other.ok(&["thread", "step", &t, "--agent", &agent]);
    other.ok(&["export", "--archive", &p(&w.join("other.tar"))]);
    let r = big.run(&[
        "export",
        "--archive",
        &new,
        "--since",
        &p(&w.join("other.tar")),
    ]);
    assert_ne!(r.code, 0);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("not an earlier archive"), "{}", r.stderr);
    assert!(!w.join("new.tar").exists());
    // Its own archive is.
    big.ok(&[
        "export",
        "--archive",
        &new,
        "--since",
        &p(&w.join("big.tar")),
    ]);
}
