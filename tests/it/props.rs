//! Property tests of the encoding: CBOR round trips, key order independence, Crockford.

use proptest::prelude::*;
use uwf::cas::refplan::RefPlan;
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

// Reference plans: the same refs in the same order over a `Value`, over its canonical CBOR, and
// as the recursive definition of interop §A.8 (with `oneOf` followed) finds them.

const PATTERNS: &[&str] = &["^k", "z$", "^[ab]$", "^(?!a)", "^k(?=2)"];
const KEYS: &[&str] = &["a", "b", "k1", "k2", "zz", "x", "kz"];

fn obj(kv: Vec<(&str, Value)>) -> Value {
    Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn ref_schema() -> Value {
    obj(vec![
        ("type", Value::str("string")),
        ("format", Value::str("ocas_ref")),
    ])
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_string)
}

/// Random schemas over every keyword a plan follows.
fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        3 => Just(ref_schema()),
        1 => Just(obj(vec![("type", Value::str("string"))])),
        1 => Just(obj(vec![])),
        1 => Just(obj(vec![("format", Value::str("ocas_ref"))])),
    ];
    leaf.prop_recursive(4, 40, 4, |inner| {
        let list = prop::collection::vec(inner.clone(), 1..3);
        prop_oneof![
            (
                prop::collection::vec((key(), inner.clone()), 0..4),
                prop::option::of(inner.clone()),
                prop::collection::vec((prop::sample::select(PATTERNS), inner.clone()), 0..3),
            )
                .prop_map(|(props, extra, pats)| {
                    let mut m = vec![("type", Value::str("object"))];
                    m.push(("properties", Value::Object(props.into_iter().collect())));
                    if let Some(e) = extra {
                        m.push(("additionalProperties", e));
                    }
                    if !pats.is_empty() {
                        let pats = pats.into_iter().map(|(p, s)| (p.to_string(), s));
                        m.push(("patternProperties", Value::Object(pats.collect())));
                    }
                    obj(m)
                }),
            (
                prop::collection::vec(inner.clone(), 0..3),
                prop::option::of(inner.clone()),
                prop::option::of(inner.clone()),
                any::<bool>(),
            )
                .prop_map(|(prefix, items, contains, typed)| {
                    let mut m = Vec::new();
                    if typed {
                        m.push(("type", Value::str("array")));
                    }
                    if !prefix.is_empty() {
                        m.push(("prefixItems", Value::Array(prefix)));
                    }
                    m.extend(items.map(|s| ("items", s)));
                    m.extend(contains.map(|s| ("contains", s)));
                    obj(m)
                }),
            (
                prop::option::of(list.clone()),
                prop::option::of(list.clone()),
                prop::option::of(list),
                prop::option::of(inner.clone()),
            )
                .prop_map(|(any_of, one_of, all_of, not)| {
                    let mut m = vec![("type", Value::str("object"))];
                    m.extend(any_of.map(|l| ("anyOf", Value::Array(l))));
                    m.extend(one_of.map(|l| ("oneOf", Value::Array(l))));
                    m.extend(all_of.map(|l| ("allOf", Value::Array(l))));
                    m.extend(not.map(|s| ("not", s)));
                    // Siblings that `anyOf`/`oneOf` cut off.
                    m.push((
                        "properties",
                        obj(vec![("a", ref_schema()), ("k1", ref_schema())]),
                    ));
                    obj(m)
                }),
            (
                inner.clone(),
                prop::option::of(inner.clone()),
                prop::option::of(inner)
            )
                .prop_map(|(i, t, e)| {
                    let mut m = vec![("if", i)];
                    m.extend(t.map(|s| ("then", s)));
                    m.extend(e.map(|s| ("else", s)));
                    obj(m)
                }),
        ]
    })
}

/// A string that is a node id, or one that is not.
fn ref_string() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => any::<u64>().prop_map(|x| Value::str(NodeId(x).to_string())),
        1 => Just(Value::str("not an id")),
    ]
    .boxed()
}

/// Anything, ids included, for positions the schema says little about.
fn loose() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<i32>().prop_map(|i| Value::Number(f64::from(i))),
        ref_string(),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Payloads shaped by `schema`, with ref strings at its ref positions (and now and then
/// something else there).
fn payload(schema: &Value) -> BoxedStrategy<Value> {
    let get = |k: &str| schema.get(k);
    if get("format").and_then(Value::as_str) == Some("ocas_ref") {
        return prop_oneof![6 => ref_string(), 1 => loose()].boxed();
    }
    let mut choices: Vec<BoxedStrategy<Value>> = Vec::new();
    for k in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(bs)) = get(k) {
            choices.extend(bs.iter().map(payload));
        }
    }
    for k in ["if", "then", "else", "not"] {
        if let Some(s) = get(k) {
            choices.push(payload(s));
        }
    }
    if get("prefixItems").is_some() || get("items").is_some() || get("contains").is_some() {
        let prefix: Vec<BoxedStrategy<Value>> = match get("prefixItems") {
            Some(Value::Array(p)) => p.iter().map(payload).collect(),
            _ => Vec::new(),
        };
        let rest: Vec<BoxedStrategy<Value>> = ["items", "contains"]
            .iter()
            .filter_map(|k| get(k).map(payload))
            .chain([loose()])
            .collect();
        let rest = prop::collection::vec(prop::strategy::Union::new(rest), 0..4);
        choices.push(
            (prefix, rest, 0..4usize)
                .prop_map(|(mut p, rest, cut)| {
                    p.truncate(cut);
                    p.extend(rest);
                    Value::Array(p)
                })
                .boxed(),
        );
    }
    if let Some(Value::Object(props)) = get("properties") {
        let declared: Vec<BoxedStrategy<(String, Option<Value>)>> = props
            .iter()
            .map(|(k, s)| {
                let k = k.clone();
                prop::option::weighted(0.8, payload(s))
                    .prop_map(move |v| (k.clone(), v))
                    .boxed()
            })
            .collect();
        let mut extra: Vec<BoxedStrategy<Value>> = vec![loose()];
        extra.extend(get("additionalProperties").map(payload));
        if let Some(Value::Object(pp)) = get("patternProperties") {
            extra.extend(pp.values().map(payload));
        }
        let extra = prop::collection::vec((key(), prop::strategy::Union::new(extra)), 0..4);
        choices.push(
            (declared, extra)
                .prop_map(|(declared, extra)| {
                    let mut m: Map = declared
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| (k, v)))
                        .collect();
                    for (k, v) in extra {
                        m.entry(k).or_insert(v);
                    }
                    Value::Object(m)
                })
                .boxed(),
        );
    }
    if choices.is_empty() {
        return loose();
    }
    prop::strategy::Union::new(choices).boxed()
}

fn schema_and_payload() -> impl Strategy<Value = (Value, Value)> {
    schema().prop_flat_map(|s| {
        let p = payload(&s);
        (Just(s), p)
    })
}

/// interop §A.8 written out recursively over `Value`, with `oneOf` followed: the definition the
/// compiled plans must agree with.
fn definition<'v>(s: &Value, v: &'v Value, out: &mut Vec<&'v str>) {
    let Value::Object(s) = s else { return };
    if s.get("format").and_then(Value::as_str) == Some("ocas_ref")
        && let Value::String(r) = v
    {
        out.push(r);
        return;
    }
    let branches: Vec<&Value> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| s.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    if ["anyOf", "oneOf"].iter().any(|k| s.get(*k).is_some()) {
        for b in branches {
            definition(b, v, out);
        }
        return;
    }
    for b in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        definition(b, v, out);
    }
    for k in ["if", "then", "else"] {
        if let Some(b) = s.get(k) {
            definition(b, v, out);
        }
    }
    match v {
        Value::Array(items) if s.get("type").and_then(Value::as_str) == Some("array") => {
            let prefix = s.get("prefixItems").and_then(Value::as_array);
            let n = prefix.map_or(0, Vec::len).min(items.len());
            for (p, x) in prefix.into_iter().flatten().zip(items) {
                definition(p, x, out);
            }
            if let Some(it) = s.get("items") {
                for x in &items[n..] {
                    definition(it, x, out);
                }
            }
            if let Some(c) = s.get("contains") {
                for x in items {
                    definition(c, x, out);
                }
            }
            return;
        }
        Value::Object(m) => {
            if let Some(Value::Object(props)) = s.get("properties") {
                for (k, ps) in props {
                    if let Some(x) = m.get(k) {
                        definition(ps, x, out);
                    }
                }
            }
            if let Some(ap @ Value::Object(_)) = s.get("additionalProperties") {
                for x in m.values() {
                    definition(ap, x, out);
                }
            }
            if let Some(Value::Object(pp)) = s.get("patternProperties") {
                for (pat, ps) in pp {
                    let re = fancy_regex::Regex::new(pat).expect("test patterns compile");
                    for (k, x) in m {
                        if re.is_match(k).expect("test patterns finish") {
                            definition(ps, x, out);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(n) = s.get("not") {
        definition(n, v, out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ref_plan_same_on_value_and_cbor((schema, payload) in schema_and_payload()) {
        // Schemas and payloads as the store holds them: decoded from canonical CBOR.
        let schema = cbor::decode(&cbor::encode(&schema)).unwrap();
        uwf::cas::schema::check_schema(&schema).unwrap();
        let bytes = cbor::encode(&payload);
        let stored = cbor::decode(&bytes).unwrap();
        let plan = RefPlan::compile(&schema).unwrap();

        let mut want = Vec::new();
        definition(&schema, &stored, &mut want);
        let mut strs = Vec::new();
        plan.refs(&stored, &mut strs);
        prop_assert_eq!(&strs, &want);

        let ids: Vec<NodeId> = want.iter().filter_map(|s| NodeId::parse_strict(s)).collect();
        let mut over_value = Vec::new();
        plan.ids(&stored, &mut over_value);
        prop_assert_eq!(&over_value, &ids);
        let mut over_cbor = Vec::new();
        plan.ids_in_cbor(&bytes, &mut over_cbor).unwrap();
        prop_assert_eq!(&over_cbor, &ids);
        prop_assert_eq!(plan.positions(&stored).len(), want.len());
        prop_assert!(plan.has_refs() || want.is_empty());
    }
}
