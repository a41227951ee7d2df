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
    let env = TestEnv::fixed();
    insta::assert_snapshot!(env.transcript("cas put-text hello"), @r#"{"hash":"95ST8MZ0QTKP9"}"#);
    insta::assert_snapshot!(env.transcript("cas get 95ST8MZ0QTKP9"), @r#"{"type":"7VQ43ZSJTEWA7","payload":"hello"}"#);
    // Lower case and prefixes resolve; output is upper case.
    insta::assert_snapshot!(env.transcript("cas get 95st --timestamp"), @r#"{"type":"7VQ43ZSJTEWA7","payload":"hello","timestamp":1767225600000}"#);
    insta::assert_snapshot!(env.transcript("cas has 95ST8MZ0QTKP9"), @r#"{"exists":true}"#);
    insta::assert_snapshot!(env.transcript("--format yaml cas has 95ST8MZ0QTKP8"), @"
    exists: false
    [exit 1]
    ");
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
    insta::assert_snapshot!(env.transcript(r#"cas put 44P8EP6N3NXZ5 {"workflow":"95ST8MZ0QTKP9","prompt":"p","cwd":"/tmp"}"#), @r#"{"hash":"63GHZE03TPH5Q"}"#);
    insta::assert_snapshot!(env.transcript(r#"cas put 108DB063KRQWW {"start":"63GHZE03TPH5Q","prev":null,"role":"r","output":"95ST8MZ0QTKP9","detail":"95ST8MZ0QTKP9","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/"}"#), @r#"{"hash":"DD9TMJVRH8CY0"}"#);
    insta::assert_snapshot!(env.transcript("cas refs DD9TMJVRH8CY0"), @r#"{"refs":["63GHZE03TPH5Q","95ST8MZ0QTKP9","95ST8MZ0QTKP9"]}"#);
    insta::assert_snapshot!(env.transcript("cas walk DD9TMJVRH8CY0"), @r#"{"hashes":["DD9TMJVRH8CY0","63GHZE03TPH5Q","95ST8MZ0QTKP9"]}"#);
    insta::assert_snapshot!(env.transcript("cas verify"), @r#"{"status":"ok","nodes":37}"#);
}

#[test]
fn walk_reports_missing_nodes() {
    let env = TestEnv::fixed();
    insta::assert_snapshot!(env.transcript(r#"cas put 44P8EP6N3NXZ5 {"workflow":"AAAAAAAAAAAAA","prompt":"p","cwd":"/"}"#), @r#"{"hash":"CE4VDSSRDB24J"}"#);
    insta::assert_snapshot!(env.transcript("cas walk CE4VDSSRDB24J"), @r#"
    {"hashes":["CE4VDSSRDB24J"],"missing":["AAAAAAAAAAAAA"]}
    ! warning: node AAAAAAAAAAAAA is referenced but missing from the store
    ! walk found 1 missing node(s)
    [exit 1]
    "#);
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
    let env = TestEnv::fixed();
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
    insta::assert_snapshot!(env.transcript(r#"cas schema put {"type":"object","properties":{"name":{"type":"string"},"age":{"type":"number"}},"required":["name"],"additionalProperties":false}"#), @r#"{"hash":"FRBAB1BF0ZBCS"}"#);
    insta::assert_snapshot!(env.transcript("cas schema get FRBAB1BF0ZBCS"), @r#"{"type":"object","required":["name"],"properties":{"age":{"type":"number"},"name":{"type":"string"}},"additionalProperties":false}"#);
    insta::assert_snapshot!(env.transcript("cas schema get 95ST8MZ0QTKP9"), @"
    ! Schema not found: 95ST8MZ0QTKP9
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript(r#"cas put FRBAB1BF0ZBCS {"name":"a","age":3}"#), @r#"{"hash":"DKW9VEW0BZFQC"}"#);
}

/// Every bad input: one line on stderr, non-zero exit, nothing stored changed.
#[test]
fn bad_input_changes_nothing() {
    let env = TestEnv::fixed();
    env.ok(&["cas", "put-text", "kept"]);
    let schema = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;
    env.ok(&["cas", "schema", "put", schema]);
    insta::assert_snapshot!(env.transcript(&format!("cas schema put {schema}")), @r#"{"hash":"8AE8G8YM2RK4B"}"#);
    let before = env.ok(&["cas", "schema", "list"]);
    let count = |env: &TestEnv| {
        json(&env.ok(&["cas", "verify"]))
            .get("nodes")
            .unwrap()
            .as_f64()
            .unwrap()
    };
    let n0 = count(&env);

    insta::assert_snapshot!(env.transcript(r#"cas put 944RT37WX1PQ5 {"a":1"#), @r#"
    ! Cannot parse JSON from "{"a":1": EOF while parsing an object at line 1 column 6
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas put ABCDEFGHJKMNP {}"), @r#"
    ! unknown type ABCDEFGHJKMNP: no schema node has this id; run "uwf cas schema list"
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript(r#"cas put 8AE8G8YM2RK4B {"n":"x"}"#), @r#"
    ! payload does not match schema 8AE8G8YM2RK4B: at /n: "x" is not of type "integer"
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas put 8AE8G8YM2RK4B {}"), @r#"
    ! payload does not match schema 8AE8G8YM2RK4B: at /: "n" is a required property
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript(r#"cas schema put {"type":"object","definitions":{}}"#), @r#"
    ! invalid schema: keyword "definitions" is not allowed at #
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript(r#"cas schema put {"type":"string","format":"date-time"}"#), @r#"
    ! invalid schema: unknown format "date-time" at # (only "ocas_ref" is supported)
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas get 95ST8MZ0QTKPI"), @"
    ! Node not found: 95ST8MZ0QTKPI
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas get 95ST-!"), @"
    ! Node not found: 95ST-!
    [exit 1]
    ");
    // A pattern the validator's regex dialect cannot compile would leave refs unfound.
    let bad_pattern =
        r#"{"type":"object","patternProperties":{"(":{"type":"string","format":"ocas_ref"}}}"#;
    insta::assert_snapshot!(env.transcript(&format!("cas schema put {bad_pattern}")), @r#"
    ! invalid schema: patternProperties pattern "(" at #/patternProperties cannot be compiled: not a supported ECMA-262 regular expression
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript(&format!("cas put CTS5P6RD8HMCS {bad_pattern}")), @r#"
    ! invalid schema: patternProperties pattern "(" at #/patternProperties cannot be compiled: not a supported ECMA-262 regular expression
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript(r#"cas put 7VQ43ZSJTEWAU "x""#), @r#"
    ! invalid id "7VQ43ZSJTEWAU": character 'U' is not in the Crockford alphabet (0-9, A-Z without I, L, O, U)
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas get 95ST8MZ0QTKP9"), @"
    ! Node not found: 95ST8MZ0QTKP9
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas refs 95ST8MZ0QTKP9"), @"
    ! Node not found: 95ST8MZ0QTKP9
    [exit 1]
    ");
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
    let env = TestEnv::fixed();
    env.ok(&["cas", "put-text", "kept"]);
    {
        let s = uwf::store::Store::open(&env.db()).unwrap();
        uwf::store::force_version(&s, uwf::store::FORMAT_VERSION + 1).unwrap();
    }
    let fp = fingerprint(&env.db());
    insta::assert_snapshot!(env.transcript("cas get 95ST"), @"
    ! store [ROOT]/uwf.redb has format version 3, newer than this uwf supports (2); upgrade uwf
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas put-text x"), @"
    ! store [ROOT]/uwf.redb has format version 3, newer than this uwf supports (2); upgrade uwf
    [exit 1]
    ");
    insta::assert_snapshot!(env.transcript("cas reindex"), @"
    ! store [ROOT]/uwf.redb has format version 3, newer than this uwf supports (2); upgrade uwf
    [exit 1]
    ");
    assert_eq!(fingerprint(&env.db()), fp);
}

/// `patternProperties` patterns follow the validator's dialect (lookahead included): what
/// validates also walks, and its missing nodes are reported.
#[test]
fn lookahead_pattern_refs_are_found_and_walked() {
    let env = TestEnv::fixed();
    insta::assert_snapshot!(env.transcript(r#"cas schema put {"type":"object","patternProperties":{"^(?!skip)":{"type":"string","format":"ocas_ref"}}}"#), @r#"{"hash":"375CCY3JTE67M"}"#);
    env.ok(&["cas", "put-text", "hello"]);
    insta::assert_snapshot!(env.transcript(r#"cas put 375CCY3JTE67M {"a":"95ST8MZ0QTKP9","b":"AAAAAAAAAAAAA","skip":"BBBBBBBBBBBBB"}"#), @r#"{"hash":"B303PG5WYBC5J"}"#);
    insta::assert_snapshot!(env.transcript("cas refs B303PG5WYBC5J"), @r#"{"refs":["95ST8MZ0QTKP9","AAAAAAAAAAAAA"]}"#);
    insta::assert_snapshot!(env.transcript("cas walk B303PG5WYBC5J"), @r#"
    {"hashes":["B303PG5WYBC5J","95ST8MZ0QTKP9"],"missing":["AAAAAAAAAAAAA"]}
    ! warning: node AAAAAAAAAAAAA is referenced but missing from the store
    ! walk found 1 missing node(s)
    [exit 1]
    "#);
    insta::assert_snapshot!(env.transcript("cas verify"), @r#"{"status":"ok","nodes":37}"#);
}
