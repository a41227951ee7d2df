//! The conformance vectors of the TypeScript tool: ids and canonical CBOR.

use uwf::cas::{NodeId, Value, cbor, hash};

pub struct Vector {
    pub type_id: String,
    pub payload: Value,
    pub hash: String,
    pub self_hash: bool,
    pub cbor_hex: Option<String>,
    pub payload_text: Option<String>,
}

pub fn load() -> Vec<Vector> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vectors.json"
    ))
    .expect("vectors.json");
    let Value::Array(all) = Value::from_json_str(&text).expect("vectors parse") else {
        panic!()
    };
    all.into_iter()
        .map(|v| {
            let payload = match v.get("payload_text").and_then(Value::as_str) {
                Some(t) => {
                    Value::from_json_str(t).unwrap_or_else(|e| panic!("payload_text {t}: {e}"))
                }
                None => v.get("payload").unwrap().clone(),
            };
            Vector {
                type_id: v.get("type").unwrap().as_str().unwrap().to_string(),
                payload,
                hash: v.get("hash").unwrap().as_str().unwrap().to_string(),
                self_hash: v.get("selfHash") == Some(&Value::Bool(true)),
                cbor_hex: v
                    .get("cbor_hex")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                payload_text: v
                    .get("payload_text")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_vector_hashes_like_the_reference() {
    let vs = load();
    assert_eq!(vs.len(), 267);
    for v in &vs {
        let bytes = cbor::encode(&v.payload);
        if let Some(h) = &v.cbor_hex {
            assert_eq!(&hex(&bytes), h, "cbor of vector {}", v.hash);
        }
        let id = if v.self_hash {
            hash::self_id(&bytes)
        } else {
            hash::node_id(NodeId::parse(&v.type_id).unwrap(), &bytes)
        };
        assert_eq!(id.to_string(), v.hash, "payload {}", v.payload.to_json());
        // Decoding the canonical bytes gives a value that re-encodes identically.
        let back = cbor::decode(&bytes).unwrap();
        assert_eq!(cbor::encode(&back), bytes);
    }
}
