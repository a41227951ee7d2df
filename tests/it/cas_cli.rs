//! `uwf cas …` through the real binary: output shapes, vectors, prefixes and bad input.

use crate::common::{TestEnv, fingerprint, json};
use crate::vectors;
use uwf::cas::Value;

#[test]
fn every_vector_through_cas_hash() {
    let env = TestEnv::new();
    let dir = env.root().join("payloads");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, v) in vectors::load().iter().enumerate() {
        // Files hold the exact JSON text where the vector gives one.
        let text = v
            .payload_text
            .clone()
            .unwrap_or_else(|| v.payload.to_json());
        let f = dir.join(format!("{i}.json"));
        std::fs::write(&f, &text).unwrap();
        let out = env.ok(&["cas", "hash", &v.type_id, f.to_str().unwrap()]);
        assert_eq!(
            json(&out).get("hash").and_then(Value::as_str),
            Some(v.hash.as_str()),
            "vector {i}"
        );
    }
    // Nothing was stored by hashing.
    assert!(!env.db().exists() || env.ok(&["cas", "has", "95ST8MZ0QTKP9"]).is_empty());
}

#[test]
fn hash_reads_stdin() {
    let env = TestEnv::new();
    let r = env.run_stdin(&["cas", "hash", "7VQ43ZSJTEWA7", "-"], "\"hello\"");
    assert_eq!(r.stdout.trim(), r#"{"hash":"95ST8MZ0QTKP9"}"#);
}

#[test]
fn put_get_has_refs_walk() {
    let env = TestEnv::new();
    assert_eq!(
        env.ok(&["cas", "put-text", "hello"]).trim(),
        r#"{"hash":"95ST8MZ0QTKP9"}"#
    );
    assert_eq!(
        env.ok(&["cas", "get", "95ST8MZ0QTKP9"]).trim(),
        r#"{"type":"7VQ43ZSJTEWA7","payload":"hello"}"#
    );
    // Lower case and prefixes resolve; output is upper case.
    assert_eq!(
        env.ok(&["cas", "get", "95st"]).trim(),
        r#"{"type":"7VQ43ZSJTEWA7","payload":"hello"}"#
    );
    let with_ts = json(&env.ok(&["cas", "get", "95ST8MZ0QTKP9", "--timestamp"]));
    assert!(with_ts.get("timestamp").and_then(Value::as_f64).unwrap() > 1.7e12);
    assert_eq!(
        env.ok(&["cas", "has", "95ST8MZ0QTKP9"]).trim(),
        r#"{"exists":true}"#
    );
    let r = env.run(&["cas", "has", "95ST8MZ0QTKP8"]);
    assert_eq!((r.code, r.stdout.trim()), (1, r#"{"exists":false}"#));
    let r = env.run(&["--format", "yaml", "cas", "has", "95ST8MZ0QTKP8"]);
    assert_eq!((r.code, r.stdout.trim()), (1, "exists: false"));
    // Any id that names no stored node is absent, whatever its spelling.
    for id in ["NOSUCHHASH123", "INVALID", "9"] {
        let r = env.run(&["cas", "has", id]);
        assert_eq!(
            (r.code, r.stdout.trim()),
            (1, r#"{"exists":false}"#),
            "{id}"
        );
        env.fails(&["cas", "get", id], &format!("Node not found: {id}"));
        env.fails(&["cas", "refs", id], &format!("Node not found: {id}"));
    }

    // A StartNode references its workflow; a StepNode its start, output and detail.
    let start = json(&env.ok(&[
        "cas",
        "put",
        "44P8EP6N3NXZ5",
        r#"{"workflow":"95ST8MZ0QTKP9","prompt":"p","cwd":"/tmp"}"#,
    ]));
    let start = start.get("hash").unwrap().as_str().unwrap().to_string();
    let step = format!(
        r#"{{"start":"{start}","prev":null,"role":"r","output":"95ST8MZ0QTKP9","detail":"95ST8MZ0QTKP9","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/"}}"#
    );
    let step = json(&env.ok(&["cas", "put", "108DB063KRQWW", &step]));
    let step = step.get("hash").unwrap().as_str().unwrap().to_string();
    assert_eq!(
        env.ok(&["cas", "refs", &step]).trim(),
        format!(r#"{{"refs":["{start}","95ST8MZ0QTKP9","95ST8MZ0QTKP9"]}}"#)
    );
    assert_eq!(
        env.ok(&["cas", "walk", &step]).trim(),
        format!(r#"{{"hashes":["{step}","{start}","95ST8MZ0QTKP9"]}}"#)
    );
    assert_eq!(
        json(&env.ok(&["cas", "verify"]))
            .get("status")
            .unwrap()
            .as_str(),
        Some("ok")
    );
}

#[test]
fn walk_reports_missing_nodes() {
    let env = TestEnv::new();
    let start = json(&env.ok(&[
        "cas",
        "put",
        "44P8EP6N3NXZ5",
        r#"{"workflow":"AAAAAAAAAAAAA","prompt":"p","cwd":"/"}"#,
    ]));
    let start = start.get("hash").unwrap().as_str().unwrap();
    let r = env.run(&["cas", "walk", start]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout.trim(),
        format!(r#"{{"hashes":["{start}"],"missing":["AAAAAAAAAAAAA"]}}"#)
    );
    assert!(r.stderr.contains("AAAAAAAAAAAAA"), "{}", r.stderr);
}

#[test]
fn ambiguous_prefix_lists_candidates() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "x"]);
    // Find two ids sharing a 4-character prefix among a few hundred texts.
    let mut by_prefix = std::collections::HashMap::<String, String>::new();
    let lines: String = (0..2000).map(|i| format!("\"t{i}\"\n")).collect();
    let out = env.run_stdin(&["cas", "put", "7VQ43ZSJTEWA7", "-", "--jsonl"], &lines);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut pair = None;
    for l in out.stdout.lines() {
        let h = json(l).get("hash").unwrap().as_str().unwrap().to_string();
        if let Some(other) = by_prefix.insert(h[..4].to_string(), h.clone()) {
            pair = Some((other, h));
            break;
        }
    }
    let (a, b) = pair.expect("2000 ids share some 4-character prefix");
    let r = env.fails(&["cas", "get", &a[..4]], "ambiguous id prefix");
    assert!(
        r.stderr.contains(&a) && r.stderr.contains(&b),
        "{}",
        r.stderr
    );
    env.ok(&["cas", "get", &a]);
}

#[test]
fn schema_commands() {
    let env = TestEnv::new();
    let list = json(&env.ok(&["cas", "schema", "list"]));
    let list = list.as_array().unwrap();
    assert_eq!(
        list[0].to_json(),
        r#"{"hash":"CTS5P6RD8HMCS","title":"(meta-schema)"}"#
    );
    assert!(
        list.iter()
            .any(|e| e.get("title").unwrap().as_str() == Some("StepNode"))
    );
    let h = json(&env.ok(&["cas", "schema", "put", r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"number"}},"required":["name"],"additionalProperties":false}"#]));
    assert_eq!(h.get("hash").unwrap().as_str(), Some("FRBAB1BF0ZBCS"));
    assert_eq!(
        env.ok(&["cas", "schema", "get", "FRBAB1BF0ZBCS"]).trim(),
        r#"{"type":"object","required":["name"],"properties":{"age":{"type":"number"},"name":{"type":"string"}},"additionalProperties":false}"#
    );
    env.fails(
        &["cas", "schema", "get", "95ST8MZ0QTKP9"],
        "Schema not found: 95ST8MZ0QTKP9",
    );
    env.ok(&["cas", "put", "FRBAB1BF0ZBCS", r#"{"name":"a","age":3}"#]);
}

/// Every bad input: one line on stderr, non-zero exit, nothing stored changed.
#[test]
fn bad_input_changes_nothing() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "kept"]);
    env.ok(&[
        "cas",
        "schema",
        "put",
        r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#,
    ]);
    let schema = json(&env.ok(&[
        "cas",
        "schema",
        "put",
        r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#,
    ]));
    let schema = schema.get("hash").unwrap().as_str().unwrap().to_string();
    let before = env.ok(&["cas", "schema", "list"]);
    let count = |env: &TestEnv| {
        json(&env.ok(&["cas", "verify"]))
            .get("nodes")
            .unwrap()
            .as_f64()
            .unwrap()
    };
    let n0 = count(&env);

    env.fails(
        &["cas", "put", "944RT37WX1PQ5", r#"{"a":1"#],
        "Cannot parse JSON",
    );
    env.fails(
        &["cas", "put", "ABCDEFGHJKMNP", "{}"],
        "unknown type ABCDEFGHJKMNP",
    );
    env.fails(
        &["cas", "put", &schema, r#"{"n":"x"}"#],
        "payload does not match schema",
    );
    env.fails(
        &["cas", "put", &schema, r#"{}"#],
        "payload does not match schema",
    );
    env.fails(
        &[
            "cas",
            "schema",
            "put",
            r#"{"type":"object","definitions":{}}"#,
        ],
        "keyword \"definitions\" is not allowed",
    );
    env.fails(
        &[
            "cas",
            "schema",
            "put",
            r#"{"type":"string","format":"date-time"}"#,
        ],
        "unknown format \"date-time\"",
    );
    env.fails(
        &["cas", "get", "95ST8MZ0QTKPI"],
        "Node not found: 95ST8MZ0QTKPI",
    );
    env.fails(&["cas", "get", "95ST-!"], "Node not found: 95ST-!");
    // A pattern the validator's regex dialect cannot compile would leave refs unfound.
    let bad_pattern =
        r#"{"type":"object","patternProperties":{"(":{"type":"string","format":"ocas_ref"}}}"#;
    env.fails(
        &["cas", "schema", "put", bad_pattern],
        r#"patternProperties pattern "(" at #/patternProperties cannot be compiled"#,
    );
    env.fails(
        &["cas", "put", "CTS5P6RD8HMCS", bad_pattern],
        r#"patternProperties pattern "(""#,
    );
    env.fails(&["cas", "put", "7VQ43ZSJTEWAU", "\"x\""], "invalid id");
    env.fails(
        &["cas", "get", "95ST8MZ0QTKP9"],
        "Node not found: 95ST8MZ0QTKP9",
    );
    env.fails(&["cas", "refs", "95ST8MZ0QTKP9"], "Node not found");
    let r = env.run_stdin(
        &["cas", "put", "7VQ43ZSJTEWA7", "-", "--jsonl"],
        "\"a\"\n{broken\n",
    );
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("line 2"), "{}", r.stderr);

    assert_eq!(count(&env), n0);
    assert_eq!(env.ok(&["cas", "schema", "list"]), before);
}

#[test]
fn damaged_files_are_refused_untouched() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "kept"]);
    let good = std::fs::read(env.db()).unwrap();

    // Truncated: the file is shorter than its recorded layout.
    std::fs::write(env.db(), &good[..good.len() / 2]).unwrap();
    let fp = fingerprint(&env.db());
    env.fails(&["cas", "put-text", "new"], "cannot open store");
    env.fails(&["cas", "verify"], "");
    assert_eq!(
        fingerprint(&env.db()),
        fp,
        "a truncated file is left as it was"
    );

    // Not a redb file at all.
    std::fs::write(env.db(), b"this is not a database").unwrap();
    let fp = fingerprint(&env.db());
    env.fails(&["cas", "get", "95ST"], "cannot open store");
    env.fails(&["cas", "put-text", "new"], "cannot open store");
    assert_eq!(fingerprint(&env.db()), fp);

    // Corrupted record bytes: reads refuse the damaged node, verify names it.
    let mut bad = good.clone();
    let needle = b"kept";
    let at = bad
        .windows(4)
        .position(|w| w == needle)
        .expect("payload bytes in the file");
    bad[at] = b'K';
    std::fs::write(env.db(), &bad).unwrap();
    let fp = fingerprint(&env.db());
    let kept = "4Q0QJ2E5WBAJ6";
    let r = env.run(&["cas", "verify"]);
    assert_eq!(r.code, 65);
    assert!(r.stdout.contains("damaged"), "{}", r.stdout);
    assert!(r.stderr.contains("is damaged"), "{}", r.stderr);
    let id = json(&r.stdout).get("damage").unwrap().as_array().unwrap()[0]
        .as_str()
        .unwrap()[..13]
        .to_string();
    env.fails(&["cas", "get", &id], "corrupt record");
    assert_eq!(fingerprint(&env.db()), fp, "reads leave the file as it was");
    let _ = kept;
}

#[test]
fn newer_format_is_refused_untouched() {
    let env = TestEnv::new();
    env.ok(&["cas", "put-text", "kept"]);
    {
        let s = uwf::store::Store::open(&env.db()).unwrap();
        uwf::store::force_version(&s, uwf::store::FORMAT_VERSION + 1).unwrap();
    }
    let fp = fingerprint(&env.db());
    env.fails(&["cas", "get", "95ST"], "newer than this uwf supports");
    env.fails(&["cas", "put-text", "x"], "newer than this uwf supports");
    env.fails(&["cas", "reindex"], "newer than this uwf supports");
    assert_eq!(fingerprint(&env.db()), fp);
}

/// `patternProperties` patterns follow the validator's dialect (lookahead included): what
/// validates also walks, and its missing nodes are reported.
#[test]
fn lookahead_pattern_refs_are_found_and_walked() {
    let env = TestEnv::new();
    let schema = json(&env.ok(&[
        "cas",
        "schema",
        "put",
        r#"{"type":"object","patternProperties":{"^(?!skip)":{"type":"string","format":"ocas_ref"}}}"#,
    ]));
    let schema = schema.get("hash").unwrap().as_str().unwrap().to_string();
    env.ok(&["cas", "put-text", "hello"]);
    let node = json(&env.ok(&[
        "cas",
        "put",
        &schema,
        r#"{"a":"95ST8MZ0QTKP9","b":"AAAAAAAAAAAAA","skip":"BBBBBBBBBBBBB"}"#,
    ]));
    let node = node.get("hash").unwrap().as_str().unwrap().to_string();
    assert_eq!(
        env.ok(&["cas", "refs", &node]).trim(),
        r#"{"refs":["95ST8MZ0QTKP9","AAAAAAAAAAAAA"]}"#
    );
    let r = env.run(&["cas", "walk", &node]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout.trim(),
        format!(r#"{{"hashes":["{node}","95ST8MZ0QTKP9"],"missing":["AAAAAAAAAAAAA"]}}"#)
    );
    assert_eq!(
        json(&env.ok(&["cas", "verify"]))
            .get("status")
            .unwrap()
            .as_str(),
        Some("ok")
    );
}
