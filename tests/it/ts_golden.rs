//! The TypeScript uwf 0.5.0's own answers to 263 read commands over a root it wrote
//! (`tests/fixtures/ts-golden`, see its README): uwf, run on a fresh copy of that root, must
//! print the same stdout bytes (or the same JSON value) and exit with the same code.

use crate::common::uwf_bin;
use std::path::Path;
use std::process::{Command, Stdio};

fn golden_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ts-golden")
}

/// Copies a directory tree (files and directories only; the fixture has no links).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::write(&target, std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
}

/// Splits a command line as a POSIX shell would for words, single and double quotes and
/// backslashes (no expansions).
fn shell_split(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    w.push(c);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => w.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                w.push('\\');
                                w.push(n);
                            }
                            None => w.push('\\'),
                        },
                        c => w.push(c),
                    }
                }
            }
            '\\' => {
                let w = word.get_or_insert_with(String::new);
                if let Some(n) = chars.next()
                    && n != '\n'
                {
                    w.push(n);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

#[test]
fn shell_split_handles_quotes() {
    assert_eq!(shell_split("a  b"), ["a", "b"]);
    assert_eq!(
        shell_split(r#"x 'a b' "c \"d\"" e\ f"#),
        ["x", "a b", "c \"d\"", "e f"]
    );
    assert_eq!(shell_split("''"), [""]);
}

#[test]
fn typescript_answers_to_read_commands() {
    let dir = golden_dir();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_tree(&dir.join("root"), &root);
    let golden = std::fs::read_to_string(dir.join("golden.jsonl")).unwrap();
    let mut failures = Vec::new();
    let mut total = 0;
    for line in golden.lines().filter(|l| !l.trim().is_empty()) {
        let g: serde_json::Value = serde_json::from_str(line).unwrap();
        let args = shell_split(g["rs"].as_str().unwrap());
        let want = g["stdout"].as_str().unwrap();
        let want_rc = g["rc"].as_i64().unwrap();
        let out = Command::new(uwf_bin())
            .args(&args)
            .current_dir(&root)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("UWF_HOME", &root)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        total += 1;
        let got = String::from_utf8_lossy(&out.stdout);
        let rc = i64::from(out.status.code().unwrap_or(-1));
        let same = got == want
            || matches!(
                (
                    serde_json::from_str::<serde_json::Value>(want),
                    serde_json::from_str::<serde_json::Value>(&got),
                ),
                (Ok(a), Ok(b)) if a == b
            );
        if !same || rc != want_rc {
            failures.push(format!(
                "{} uwf {}: exit {rc} (want {want_rc})\n  want {want:?}\n  got  {got:?}\n  stderr {:?}",
                g["n"],
                g["rs"].as_str().unwrap(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert_eq!(total, 263, "golden.jsonl has every command");
    assert!(
        failures.is_empty(),
        "{} of {total} commands differ from the TypeScript tool:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
