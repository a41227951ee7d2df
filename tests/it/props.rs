//! Property tests of the encoding: CBOR round trips, key order independence, Crockford.

use proptest::prelude::*;
use uwf::cas::value::Map;
use uwf::cas::{NodeId, Value, cbor, hash};

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<i32>().prop_map(f64::from),
        (-9_007_199_254_740_991i64..=9_007_199_254_740_991).prop_map(|i| i as f64),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        Just(-0.0),
        Just(9_007_199_254_740_992.0),
        Just(1e21),
        Just(5e-324),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 96, 12, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..30).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..30)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map>())),
        ]
    })
}

/// The value as decoding canonical bytes gives it back: keys in canonical order, -0 as 0.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Number(n) if *n == 0.0 => Value::Number(0.0),
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        Value::Object(m) => {
            let mut kv: Vec<_> = m.iter().map(|(k, v)| (k.clone(), canonical(v))).collect();
            kv.sort_by(|a, b| {
                a.0.len()
                    .cmp(&b.0.len())
                    .then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
            });
            Value::Object(kv.into_iter().collect())
        }
        other => other.clone(),
    }
}

fn reversed(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cbor_round_trips(v in value()) {
        let bytes = cbor::encode(&v);
        let back = cbor::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &canonical(&v));
        prop_assert_eq!(cbor::encode(&back), bytes);
    }

    #[test]
    fn id_ignores_key_order(v in value()) {
        let t = NodeId::parse("944RT37WX1PQ5").unwrap();
        let a = hash::node_id(t, &cbor::encode(&v));
        let b = hash::node_id(t, &cbor::encode(&reversed(&v)));
        prop_assert_eq!(a, b);
        // And through JSON text with its keys in another order.
        let text = reversed(&v).to_json();
        let reparsed = Value::from_json_str(&text).unwrap();
        prop_assert_eq!(hash::node_id(t, &cbor::encode(&reparsed)), a);
    }

    #[test]
    fn crockford_round_trips(x in any::<u64>()) {
        let s = NodeId(x).to_string();
        prop_assert_eq!(s.len(), 13);
        prop_assert!(s.as_bytes()[0] <= b'F');
        prop_assert_eq!(NodeId::parse(&s).unwrap(), NodeId(x));
        prop_assert_eq!(NodeId::parse(&s.to_lowercase()).unwrap(), NodeId(x));
    }

    #[test]
    fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = cbor::decode(&bytes);
        let _ = cbor::decode_node(&bytes);
    }

    /// The in-place check of node files agrees with decoding and encoding again, on canonical
    /// files and on files changed at one byte (most of which are then not canonical, or not
    /// CBOR at all).
    #[test]
    fn canonical_split_agrees_with_decode_and_encode(
        v in value(),
        ts in prop_oneof![any::<u64>(), 0u64..2_000_000_000_000],
        edit in prop::option::of((any::<prop::sample::Index>(), any::<u8>(), 0u8..3)),
    ) {
        let mut bytes = cbor::encode_node("944RT37WX1PQ5", &cbor::encode(&v), ts);
        if let Some((at, byte, how)) = edit {
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => bytes.truncate(i),
            }
        }
        let slow = cbor::decode_node(&bytes).ok().and_then(|p| {
            let payload = cbor::encode(&p.payload);
            (cbor::encode_node(&p.type_id, &payload, p.timestamp) == bytes)
                .then_some((p.type_id, payload, p.timestamp))
        });
        let fast = cbor::split_canonical_node(&bytes)
            .map(|c| (c.type_id.to_string(), c.payload_cbor.to_vec(), c.timestamp));
        prop_assert_eq!(fast, slow);
    }
}
