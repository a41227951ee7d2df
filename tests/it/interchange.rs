//! Interchange: YAML maps, history.jsonl, the directory scanner and the export writer.

use std::path::{Path, PathBuf};
use uwf::interchange::yaml;

pub(crate) fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Every case of the table produced by the npm `yaml` package: our writer gives the same bytes
/// and our reader gives back the same strings.
#[test]
fn yaml_quoting_matches_npm_yaml() {
    let text = fs::read_to_string(fixture("interchange/yaml_quoting.json")).unwrap();
    let cases: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = cases.as_array().unwrap();
    assert!(cases.len() > 1000);
    let mut failures = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let pairs: Vec<(String, String)> = case["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_str().unwrap().to_string(),
                    p[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = case["yaml"].as_str().unwrap();
        let got = yaml::write_string_map(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if got != want {
            failures.push(format!(
                "case {n} {pairs:?}:\n  want {want:?}\n  got  {got:?}"
            ));
            continue;
        }
        let back = match yaml::read_string_map(&got, "case") {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("case {n} {pairs:?}: {e}"));
                continue;
            }
        };
        if !back.skipped.is_empty() {
            failures.push(format!("case {n} {pairs:?}: skipped {:?}", back.skipped));
        }
        for (k, v) in &pairs {
            if back.entries.get(k) != Some(v) {
                failures.push(format!(
                    "case {n}: reading back {k:?} gave {:?}",
                    back.entries.get(k)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

use std::collections::BTreeMap;
use std::fs;
use uwf::cas::{NodeId, Value, cbor};
use uwf::interchange::export_files::{ExportError, ExportWriter, Written, write_atomic};
use uwf::interchange::history::{HistoryLine, HistoryReader};
use uwf::interchange::layout::{self, Layout, ScanItem, Scanner};

/// Copies a directory tree (regular files and directories only).
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// Scans `dir` and reports each entry in one line, keyed by its path relative to `dir/cas`.
fn scan_report(dir: &Path, max: Option<u64>) -> BTreeMap<String, String> {
    let mut s = Scanner::new(dir);
    if let Some(m) = max {
        s = s.max_file_size(m);
    }
    let cas = dir.join("cas");
    let rel = |p: &Path| {
        p.strip_prefix(&cas)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let mut out = BTreeMap::new();
    for item in s {
        let (k, v) = match item {
            ScanItem::Node(n) => {
                let layout = if n.layout == Layout::Flat {
                    "flat"
                } else {
                    "nodes"
                };
                let canon = if n.canonical {
                    "canonical"
                } else {
                    "not canonical"
                };
                (rel(&n.path), format!("ok {} {layout} {canon}", n.id))
            }
            ScanItem::Problem(p) => (rel(p.path()), format!("problem: {p}")),
            ScanItem::Ignored(p) => (rel(&p), "ignored".to_string()),
        };
        assert!(!v.contains('\n'), "report is not one line: {v}");
        assert!(out.insert(k.clone(), v).is_none(), "{k} reported twice");
    }
    out
}

/// One case of the bad-input corpus: the entry `name` is reported and the report says `want`.
fn check(report: &BTreeMap<String, String>, name: &str, want: &str) {
    let got = report
        .get(name)
        .unwrap_or_else(|| panic!("{name} not reported; report: {report:#?}"));
    assert!(got.contains(want), "{name}: want {want:?}, got {got:?}");
    println!("{name}: {got}");
}

fn is_privileged_reader(path: &Path) -> bool {
    fs::File::open(path).is_ok()
}

#[cfg(unix)]
#[test]
fn bad_corpus_is_reported_case_by_case() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dir");
    let outside = tmp.path().join("outside");
    copy_tree(&fixture("interchange/bad"), &dir);
    fs::create_dir(&outside).unwrap();
    let secret = outside.join("secret.bin");
    fs::copy(fixture("ts-root-small/cas/CTS5P6RD8HMCS.bin"), &secret).unwrap();
    let cas = dir.join("cas");
    // Made at test time: links out of DIR, a 100 MB node, an unreadable file, a FIFO.
    symlink(&secret, cas.join("CTS5P6RD8HMCS.bin")).unwrap();
    symlink("../../outside", cas.join("nodes").join("EYHPV6X8XHTCS.bin")).unwrap();
    let big = fs::File::create(cas.join("5555555555555.bin")).unwrap();
    big.set_len(100 << 20).unwrap(); // sparse: cheap to make, never read
    drop(big);
    let locked = cas.join("6666666666666.bin");
    fs::copy(fixture("ts-root-small/cas/CTS5P6RD8HMCS.bin"), &locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let fifo = cas.join("7777777777777.bin");
    let made_fifo = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    let before_outside = fs::read(&secret).unwrap();

    let r = scan_report(&dir, None);
    check(&r, "0HBZ49KRT2E8Q.bin", "problem: "); // truncated
    check(&r, "0HBZ49KRT2E8Q.bin", "truncated CBOR");
    check(
        &r,
        "0000000000000.bin",
        "content hashes to 1F3D7EYQQWABV, not to its file name",
    );
    check(&r, "not-an-id.bin", "not a node file name");
    check(&r, "5x59t0v7cxk96.bin", "not a node file name");
    check(&r, "7SAEZ3PXJ093Y.bin", "not a regular file (a directory)");
    check(&r, "1111111111111.bin", "type \"nope\" is not a node id");
    check(&r, "2222222222222.bin", "not a node");
    check(&r, "3333333333333.bin", "truncated CBOR at byte 0");
    check(&r, "4444444444444.tmp", "ignored");
    check(&r, "_index", "ignored");
    check(
        &r,
        "nodes/ADXK4NWW59EYS.bin",
        "ok ADXK4NWW59EYS nodes canonical",
    );
    check(
        &r,
        "nodes/1F3D7EYQQWABV.bin",
        "ok 1F3D7EYQQWABV nodes not canonical",
    );
    check(&r, "CTS5P6RD8HMCS.bin", "symbolic link refused");
    check(&r, "nodes/EYHPV6X8XHTCS.bin", "symbolic link refused");
    check(
        &r,
        "5555555555555.bin",
        "104857600 bytes is larger than the limit of 67108864",
    );
    if made_fifo {
        check(
            &r,
            "7777777777777.bin",
            "not a regular file (a device, FIFO or socket)",
        );
    }
    if is_privileged_reader(&locked) {
        println!(
            "6666666666666.bin: running with the privilege to read a mode-000 file (root); \
             the unreadable case is exercised through read_node_file on a vanished file instead"
        );
        let gone = cas.join("8888888888888.bin");
        let e = layout::read_node_file(
            &gone,
            NodeId::parse("8888888888888").unwrap(),
            Layout::Flat,
            1 << 20,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("cannot read "), "{e}");
    } else {
        check(&r, "6666666666666.bin", "cannot read ");
    }
    // The limit is configurable: with 10 bytes every real node is too large.
    let small = scan_report(&dir, Some(10));
    check(
        &small,
        "nodes/ADXK4NWW59EYS.bin",
        "larger than the limit of 10 bytes",
    );

    // YAML with non-string values: the strings are kept, the rest reported one by one.
    let y = yaml::read_string_map(
        &fs::read_to_string(dir.join("threads.yaml")).unwrap(),
        "threads.yaml",
    )
    .unwrap();
    let kept: Vec<_> = y.entries.keys().map(String::as_str).collect();
    assert_eq!(kept, ["06DQDQD8R3SYN75HX43EQ49CJR", "quoted"]);
    // `0b101` is a string under the YAML 1.2 core schema; it is recognised as one only when
    // every entry of the file is a scalar (this file has a sequence and a mapping).
    let only_scalars = yaml::read_string_map("binary: 0b101\nsigned: +0x1F\n", "t").unwrap();
    assert_eq!(only_scalars.entries["binary"], "0b101");
    assert_eq!(only_scalars.entries["signed"], "+0x1F");
    let skipped: Vec<String> = y.skipped.iter().map(ToString::to_string).collect();
    for s in &skipped {
        println!("threads.yaml: {s}");
    }
    assert_eq!(skipped.len(), 8, "{skipped:#?}");
    assert!(skipped[0].contains("number") && skipped[0].contains("1234567890123"));
    assert!(skipped.iter().any(|s| s.contains("the key is a number")));
    assert!(
        skipped
            .iter()
            .any(|s| s.contains("the value is a sequence"))
    );

    // history.jsonl with broken lines: each reported with its line number.
    let lines: Vec<HistoryLine> = HistoryReader::new(
        std::io::BufReader::new(fs::File::open(dir.join("history.jsonl")).unwrap()),
        "history.jsonl",
    )
    .map(Result::unwrap)
    .collect();
    let mut good = Vec::new();
    for l in &lines {
        match l {
            HistoryLine::Record { record, .. } => good.push(record.thread.clone()),
            HistoryLine::Skipped { line, reason } => println!("history.jsonl:{line}: {reason}"),
        }
    }
    assert_eq!(good, ["T1", "T5", "T6"]);
    let skipped: Vec<u64> = lines
        .iter()
        .filter_map(|l| match l {
            HistoryLine::Skipped { line, .. } => Some(*line),
            _ => None,
        })
        .collect();
    assert_eq!(skipped, [2, 3, 5, 6, 7]);

    // Nothing was written anywhere: the outside file and the tree's top level are unchanged.
    assert_eq!(fs::read(&secret).unwrap(), before_outside);
    let top: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(top.len(), 2);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o644)).unwrap();
}

#[cfg(unix)]
#[test]
fn export_writer_refuses_links_and_stays_inside() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dir");
    let outside = tmp.path().join("outside.bin");
    fs::write(&outside, b"keep me").unwrap();
    let mut w = ExportWriter::new(&dir).unwrap();
    let meta = NodeId::parse("CTS5P6RD8HMCS").unwrap();
    let bytes = fs::read(fixture("ts-root-small/cas/CTS5P6RD8HMCS.bin")).unwrap();
    let parts = cbor::decode_node(&bytes).unwrap();
    let payload = cbor::encode(&parts.payload);
    symlink(&outside, dir.join("cas/CTS5P6RD8HMCS.bin")).unwrap();
    let e = w
        .add_node(meta, meta, &payload, parts.timestamp)
        .unwrap_err();
    assert!(matches!(e, ExportError::InTheWay { .. }), "{e}");
    assert!(e.to_string().contains("symbolic link"), "{e}");
    fs::remove_file(dir.join("cas/CTS5P6RD8HMCS.bin")).unwrap();
    assert_eq!(
        w.add_node(meta, meta, &payload, parts.timestamp).unwrap(),
        Written::Written
    );
    w.finish().unwrap();
    assert_eq!(fs::read(dir.join("cas/CTS5P6RD8HMCS.bin")).unwrap(), bytes);
    assert_eq!(
        fs::read_to_string(dir.join("cas/_index/_meta")).unwrap(),
        "CTS5P6RD8HMCS\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join("cas/_index/CTS5P6RD8HMCS")).unwrap(),
        "CTS5P6RD8HMCS\n"
    );
    assert_eq!(fs::read(&outside).unwrap(), b"keep me");
    symlink(&outside, dir.join("threads.yaml")).unwrap();
    assert!(write_atomic(&dir, "threads.yaml", b"{}\n").is_err());
    assert!(write_atomic(&dir, "../escape.yaml", b"{}\n").is_err());
    assert_eq!(fs::read(&outside).unwrap(), b"keep me");
    let top: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(top.len(), 2, "{top:?}");
}

/// Many types: the writer keeps a bounded number of index files open and loses no line.
#[test]
fn export_writer_many_index_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = ExportWriter::new(tmp.path()).unwrap();
    for round in 0..3u64 {
        for t in 0..200u64 {
            w.append_index(NodeId(t), NodeId(round * 1000 + t)).unwrap();
        }
    }
    let s = w.finish().unwrap();
    assert_eq!(s.index_files, 200);
    for t in 0..200u64 {
        let text =
            fs::read_to_string(tmp.path().join("cas/_index").join(NodeId(t).to_wire())).unwrap();
        let want: String = (0..3u64)
            .map(|r| format!("{}\n", NodeId(r * 1000 + t).to_wire()))
            .collect();
        assert_eq!(text, want);
    }
    assert!(!tmp.path().join("cas/_index.staging").exists());
}

pub(crate) fn ts_root() -> PathBuf {
    fixture("ts-root-small")
}

/// The TypeScript tool's store: every node checks out, and writing it back gives the same bytes.
#[test]
fn ts_root_small_scans_and_exports_byte_identical() {
    let root = ts_root();
    let mut nodes = Vec::new();
    for item in Scanner::new(&root) {
        match item {
            ScanItem::Node(n) => nodes.push(n),
            ScanItem::Ignored(p) => assert!(p.ends_with("cas/_index"), "{}", p.display()),
            ScanItem::Problem(p) => panic!("{p}"),
        }
    }
    assert_eq!(nodes.len(), 199);
    for n in &nodes {
        assert!(n.canonical, "{}", n.path.display());
        assert_eq!(
            n.path.file_name().unwrap().to_str().unwrap(),
            layout::node_file_name(n.id)
        );
    }
    assert_eq!(nodes.iter().filter(|n| n.self_typed).count(), 1);

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    // Nodes arrive in directory order; the index files are compared as sets below.
    let mut w = ExportWriter::new(out).unwrap();
    for n in &nodes {
        assert_eq!(
            w.add_node(n.id, n.type_id, &n.payload_cbor, n.timestamp)
                .unwrap(),
            Written::Written
        );
    }
    let s = w.finish().unwrap();
    assert_eq!((s.written, s.skipped), (199, 0));
    for n in &nodes {
        let name = layout::node_file_name(n.id);
        assert_eq!(
            fs::read(out.join("cas").join(&name)).unwrap(),
            fs::read(&n.path).unwrap(),
            "{name}"
        );
    }
    // The index: same files, same lines (as sets: the original order is the write order).
    let sorted_lines = |p: &Path| {
        let t = fs::read_to_string(p).unwrap();
        assert!(t.ends_with('\n'));
        let mut v: Vec<String> = t.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let mut names: Vec<_> = fs::read_dir(root.join("cas/_index"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut ours: Vec<_> = fs::read_dir(out.join("cas/_index"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    ours.sort();
    assert_eq!(names, ours);
    for n in &names {
        assert_eq!(
            sorted_lines(&root.join("cas/_index").join(n)),
            sorted_lines(&out.join("cas/_index").join(n))
        );
    }
    // A second export skips every node.
    let mut w = ExportWriter::new(out).unwrap();
    for n in &nodes {
        assert_eq!(
            w.add_node(n.id, n.type_id, &n.payload_cbor, n.timestamp)
                .unwrap(),
            Written::Skipped
        );
    }
    assert_eq!(w.finish().unwrap().skipped, 199);

    // threads.yaml and workflows.yaml: read and written back byte for byte.
    for name in ["threads.yaml", "workflows.yaml"] {
        let text = fs::read_to_string(root.join(name)).unwrap();
        let m = yaml::read_string_map(&text, name).unwrap();
        assert!(m.skipped.is_empty());
        let again = yaml::write_string_map(m.entries.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        write_atomic(out, name, again.as_bytes()).unwrap();
        assert_eq!(fs::read(out.join(name)).unwrap(), text.as_bytes(), "{name}");
    }
    // history.jsonl likewise.
    let text = fs::read_to_string(root.join("history.jsonl")).unwrap();
    let again: String = HistoryReader::new(text.as_bytes(), "history.jsonl")
        .map(|l| match l.unwrap() {
            HistoryLine::Record { record, .. } => record.to_line(),
            HistoryLine::Skipped { line, reason } => panic!("line {line}: {reason}"),
        })
        .collect();
    write_atomic(out, "history.jsonl", again.as_bytes()).unwrap();
    assert_eq!(fs::read_to_string(out.join("history.jsonl")).unwrap(), text);
    // No temporary file is left behind.
    for e in fs::read_dir(out).unwrap() {
        let n = e.unwrap().file_name().into_string().unwrap();
        assert!(!n.ends_with(".tmp"), "{n}");
    }
}

/// `ciborium` as an independent decoder of uwf's export.
pub(crate) fn from_ciborium(v: &ciborium::Value) -> Value {
    use ciborium::Value as C;
    match v {
        C::Null => Value::Null,
        C::Bool(b) => Value::Bool(*b),
        C::Integer(i) => Value::Number(i128::from(*i) as f64),
        C::Float(f) => Value::Number(*f),
        C::Text(s) => Value::String(s.clone()),
        C::Array(a) => Value::Array(a.iter().map(from_ciborium).collect()),
        C::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    (
                        k.as_text().expect("text keys").to_string(),
                        from_ciborium(v),
                    )
                })
                .collect(),
        ),
        other => panic!("unexpected CBOR item {other:?}"),
    }
}

#[test]
fn exported_files_decode_with_ciborium() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = ExportWriter::new(tmp.path()).unwrap();
    for item in Scanner::new(&ts_root()) {
        if let ScanItem::Node(n) = item {
            w.add_node(n.id, n.type_id, &n.payload_cbor, n.timestamp)
                .unwrap();
        }
    }
    w.finish().unwrap();
    let mut count = 0;
    for e in fs::read_dir(tmp.path().join("cas")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "bin") {
            continue;
        }
        let bytes = fs::read(&p).unwrap();
        let v: ciborium::Value = ciborium::from_reader(bytes.as_slice()).unwrap();
        let m = v.as_map().expect("a map");
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_text().unwrap()).collect();
        assert_eq!(keys, ["type", "payload", "timestamp"], "{}", p.display());
        let type_id = m[0].1.as_text().unwrap();
        let ts = u64::try_from(m[2].1.as_integer().unwrap()).unwrap();
        let payload = from_ciborium(&m[1].1);
        assert_eq!(
            cbor::encode_node(type_id, &cbor::encode(&payload), ts),
            bytes,
            "{}",
            p.display()
        );
        count += 1;
    }
    assert_eq!(count, 199);
}

/// Whole values (maps, sequences, scalars at every depth) as the npm `yaml` package's
/// `stringify` writes them; the table was produced by that package.
#[test]
fn yaml_values_match_npm_yaml() {
    let text = fs::read_to_string(fixture("interchange/yaml_values.json")).unwrap();
    let cases: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut failures = Vec::new();
    for case in cases.as_array().unwrap() {
        let value = Value::from_json_str(case["value"].as_str().unwrap()).unwrap();
        let want = case["yaml"].as_str().unwrap();
        let got = yaml::stringify_value(&value);
        if got != want {
            failures.push(format!(
                "{}: {}\n  want {want:?}\n  got  {got:?}",
                case["note"], case["value"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The keys of a YAML document, recursively, with the kind of each leaf.
fn shape(v: &yaml_serde::Value) -> String {
    match v {
        yaml_serde::Value::Mapping(m) => {
            let inner: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}:{}", k.as_str().unwrap_or("?"), shape(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        yaml_serde::Value::Sequence(s) => {
            format!("[{}]", s.iter().map(shape).collect::<Vec<_>>().join(","))
        }
        yaml_serde::Value::Null => "null".into(),
        _ => "leaf".into(),
    }
}

#[test]
fn export_with_config_masks_every_secret_keeps_variable_names_and_never_copies_dotenv() {
    let env = crate::common::TestEnv::new();
    let config = "# the user's config
providers:
  openai:
    baseUrl: https://api.example.com/v1
    apiKey: sk-live-0123456789abcdef
  openrouter:
    apiKeyEnv: OPENROUTER_API_KEY
models:
  default: { provider: openai, name: gpt-x }
agents:
  hermes: { command: uwf-hermes, args: [--fast] }
  custom:
    command: my-agent
    args: []
    env: { GITHUB_TOKEN: ghp_secret_value_42, client_secret: cs-999, retries: 3 }
defaultAgent: hermes
defaultModel: default
database: { password: hunter2-pass, user: me }
timeoutSeconds: 900
";
    fs::write(env.root().join("config.yaml"), config).unwrap();
    fs::write(env.root().join(".env"), "OPENAI_API_KEY=sk-env-secret\n").unwrap();
    let out_dir = env.root().join("out");
    let out = env.ok(&["export", out_dir.to_str().unwrap(), "--with-config"]);
    assert!(out.contains("\"config\":true"), "{out}");
    assert!(!out_dir.join(".env").exists(), ".env was exported");
    let text = fs::read_to_string(out_dir.join("config.yaml")).unwrap();
    for secret in [
        "sk-live-0123456789abcdef",
        "ghp_secret_value_42",
        "cs-999",
        "hunter2-pass",
        "sk-env-secret",
    ] {
        assert!(!text.contains(secret), "{secret} leaked into {text}");
    }
    let original: yaml_serde::Value = yaml_serde::from_str(config).unwrap();
    let exported: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
    assert_eq!(shape(&exported), shape(&original));
    // What is not secret is kept as it was.
    assert_eq!(exported["agents"]["hermes"], original["agents"]["hermes"]);
    assert_eq!(
        exported["providers"]["openai"]["baseUrl"],
        original["providers"]["openai"]["baseUrl"]
    );
    assert_eq!(exported["timeoutSeconds"], original["timeoutSeconds"]);
    // `apiKeyEnv` names the variable that holds the key, which a restored config must read.
    assert_eq!(
        exported["providers"]["openrouter"]["apiKeyEnv"].as_str(),
        Some("OPENROUTER_API_KEY")
    );
    assert_eq!(exported["database"]["user"], original["database"]["user"]);
    // Without the flag no config is written.
    let again = env.root().join("again");
    env.ok(&["export", again.to_str().unwrap()]);
    assert!(
        !again.join("config.yaml").exists(),
        "config exported without --with-config"
    );
}
