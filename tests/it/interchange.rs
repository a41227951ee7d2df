//! Interchange: YAML maps, history.jsonl, the directory scanner and the export writer.

use std::path::{Path, PathBuf};
use uwf::interchange::yaml;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Every case of the table produced by the npm `yaml` package: our writer gives the same bytes
/// and our reader gives back the same strings.
#[test]
fn yaml_quoting_matches_npm_yaml() {
    let text = std::fs::read_to_string(fixture("interchange/yaml_quoting.json")).unwrap();
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
