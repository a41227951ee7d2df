//! Reference extraction straight from canonical CBOR, without building a [`Value`].
//!
//! `reindex` finds the references of every node. Decoding each payload into a `Value` (an
//! `IndexMap` of `String`s) costs more than the rest of the rebuild together, so a schema is
//! compiled once into a [`Plan`] that walks the encoded bytes and visits only the positions that
//! can hold an `ocas_ref`. The result is the same as [`crate::cas::refs::collect_refs`] followed
//! by [`NodeId::parse_strict`]; schemas using keywords the plan does not cover (`prefixItems`,
//! `contains`, `patternProperties`) get no plan, and bytes the scanner does not understand make
//! it give up: the caller then takes the `Value` path.

use crate::cas::refs::schema_has_refs;
use crate::cas::{NodeId, Value};

/// The parts of a schema that can lead to references, in `collect_refs` order.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// `format: "ocas_ref"` here.
    is_ref: bool,
    /// `anyOf` then `oneOf` branches; when present, nothing after them applies.
    branches: Option<Vec<Plan>>,
    /// `allOf` branches, then `if`, `then`, `else`.
    all: Vec<Plan>,
    /// `type: "array"`: arrays stop here, walking `items` when it is given.
    array: Option<Option<Box<Plan>>>,
    /// `properties` that can hold references, in schema order.
    props: Vec<(Box<str>, Plan)>,
    /// `additionalProperties`, applied to every member.
    additional: Option<Box<Plan>>,
    /// `not`.
    not: Option<Box<Plan>>,
}

impl Plan {
    /// Compiles `schema`, or `None` when it uses a keyword the plan does not cover.
    pub(crate) fn compile(schema: &Value) -> Option<Plan> {
        let Value::Object(s) = schema else {
            return Some(Plan::default());
        };
        if ["prefixItems", "contains", "patternProperties"]
            .iter()
            .any(|k| s.get(*k).is_some_and(schema_has_refs))
        {
            return None;
        }
        let sub = |v: &Value| -> Option<Option<Plan>> {
            if schema_has_refs(v) {
                Plan::compile(v).map(Some)
            } else {
                Some(None)
            }
        };
        let mut p = Plan {
            is_ref: s.get("format").and_then(Value::as_str) == Some("ocas_ref"),
            ..Plan::default()
        };
        let mut branched = false;
        let mut branches = Vec::new();
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(bs)) = s.get(key) {
                branched = true;
                for b in bs {
                    branches.extend(sub(b)?);
                }
            }
        }
        if branched {
            p.branches = Some(branches);
            return Some(p);
        }
        if let Some(Value::Array(bs)) = s.get("allOf") {
            for b in bs {
                p.all.extend(sub(b)?);
            }
        }
        for key in ["if", "then", "else"] {
            if let Some(b) = s.get(key) {
                p.all.extend(sub(b)?);
            }
        }
        if s.get("type").and_then(Value::as_str) == Some("array") {
            p.array = Some(match s.get("items") {
                Some(it) => sub(it)?.map(Box::new),
                None => None,
            });
        }
        if let Some(Value::Object(props)) = s.get("properties") {
            for (k, ps) in props {
                if let Some(pl) = sub(ps)? {
                    p.props.push((k.as_str().into(), pl));
                }
            }
        }
        if let Some(ap @ Value::Object(_)) = s.get("additionalProperties") {
            p.additional = sub(ap)?.map(Box::new);
        }
        if let Some(n) = s.get("not") {
            p.not = sub(n)?.map(Box::new);
        }
        Some(p)
    }

    /// Appends the references of the canonical CBOR `payload`, or returns `None` (with `out`
    /// in an unspecified state) when the bytes are not a well-formed JSON-like item.
    pub(crate) fn scan(&self, payload: &[u8], out: &mut Vec<NodeId>) -> Option<()> {
        if skip(payload, 0)? != payload.len() {
            return None;
        }
        self.run(payload, 0, out)
    }

    fn run(&self, b: &[u8], pos: usize, out: &mut Vec<NodeId>) -> Option<()> {
        let (major, arg, body) = head(b, pos)?;
        if self.is_ref && major == 3 {
            let s = b.get(body..body.checked_add(usize::try_from(arg).ok()?)?)?;
            if let Some(id) = std::str::from_utf8(s).ok().and_then(NodeId::parse_strict) {
                out.push(id);
            }
            return Some(());
        }
        if let Some(bs) = &self.branches {
            for p in bs {
                p.run(b, pos, out)?;
            }
            return Some(());
        }
        for p in &self.all {
            p.run(b, pos, out)?;
        }
        match major {
            4 if self.array.is_some() => {
                if let Some(Some(items)) = &self.array {
                    let mut at = body;
                    for _ in 0..arg {
                        items.run(b, at, out)?;
                        at = skip(b, at)?;
                    }
                }
                return Some(());
            }
            5 if !self.props.is_empty() || self.additional.is_some() => {
                // Members as (key bytes, value offset), in encoded order.
                let mut members: Vec<(&[u8], usize)> = Vec::new();
                let mut at = body;
                for _ in 0..arg {
                    let (km, kl, kb) = head(b, at)?;
                    if km != 3 {
                        return None;
                    }
                    let kend = kb.checked_add(usize::try_from(kl).ok()?)?;
                    members.push((b.get(kb..kend)?, kend));
                    at = skip(b, kend)?;
                }
                for (k, p) in &self.props {
                    if let Some(&(_, v)) = members.iter().find(|(mk, _)| *mk == k.as_bytes()) {
                        p.run(b, v, out)?;
                    }
                }
                if let Some(ap) = &self.additional {
                    for &(_, v) in &members {
                        ap.run(b, v, out)?;
                    }
                }
            }
            _ => {}
        }
        if let Some(n) = &self.not {
            n.run(b, pos, out)?;
        }
        Some(())
    }
}

/// The major type, argument and offset after the head of the item at `pos`. For floats the
/// argument is the raw bits.
#[inline]
fn head(b: &[u8], pos: usize) -> Option<(u8, u64, usize)> {
    let byte = *b.get(pos)?;
    let (major, info) = (byte >> 5, byte & 31);
    let p = pos + 1;
    let (arg, end) = match info {
        0..=23 => (u64::from(info), p),
        24 => (u64::from(*b.get(p)?), p + 1),
        25 => (
            u64::from(u16::from_be_bytes(b.get(p..p + 2)?.try_into().ok()?)),
            p + 2,
        ),
        26 => (
            u64::from(u32::from_be_bytes(b.get(p..p + 4)?.try_into().ok()?)),
            p + 4,
        ),
        27 => (u64::from_be_bytes(b.get(p..p + 8)?.try_into().ok()?), p + 8),
        _ => return None,
    };
    Some((major, arg, end))
}

/// The offset after the item at `pos`, iteratively (no recursion on nesting). Accepts what
/// [`crate::cas::cbor::decode`] accepts: integers, UTF-8 text, arrays, maps, `false`, `true`,
/// `null` and floats.
fn skip(b: &[u8], mut pos: usize) -> Option<usize> {
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let info = *b.get(pos)? & 31;
        let (major, arg, body) = head(b, pos)?;
        pos = body;
        match major {
            0 | 1 => {}
            3 => {
                let end = pos.checked_add(usize::try_from(arg).ok()?)?;
                std::str::from_utf8(b.get(pos..end)?).ok()?;
                pos = end;
            }
            4 => pending = pending.checked_add(arg)?,
            5 => pending = pending.checked_add(arg.checked_mul(2)?)?,
            7 if matches!(info, 20..=22 | 25..=27) => {}
            _ => return None,
        }
    }
    Some(pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::{bootstrap, cbor, refs};

    /// The plan finds exactly what the `Value` path finds on the stored (canonical) bytes.
    fn check(schema: &str, payload: &str) {
        let schema = Value::from_json_str(schema).unwrap();
        let payload = cbor::decode(&cbor::encode(&Value::from_json_str(payload).unwrap())).unwrap();
        let mut strs = Vec::new();
        refs::collect_refs(&schema, &payload, &mut strs);
        let want: Vec<NodeId> = strs.into_iter().filter_map(NodeId::parse_strict).collect();
        let mut got = Vec::new();
        Plan::compile(&schema)
            .expect("plan")
            .scan(&cbor::encode(&payload), &mut got)
            .expect("scan");
        assert_eq!(got, want, "{}", payload.to_json());
    }

    #[test]
    fn step_node_like_the_value_path() {
        let step = bootstrap::by_name("uwf/StepNode")
            .unwrap()
            .payload
            .to_json();
        check(
            &step,
            r#"{"start":"2B77HPWKR4V3V","prev":"1111111111111","role":"a","output":"95ST8MZ0QTKP9","detail":"AAAAAAAAAAAAA","agent":"x","startedAtMs":1.5,"completedAtMs":-2,"cwd":"/","assembledPrompt":"BBBBBBBBBBBBB","edgePrompt":"e"}"#,
        );
        check(
            &step,
            r#"{"start":"not an id","prev":null,"output":"95ST8MZ0QTKP9","detail":7,"x":[1,{"a":true}]}"#,
        );
    }

    #[test]
    fn every_builtin_schema_like_the_value_path() {
        let payload = r#"{"workflow":"2B77HPWKR4V3V","roles":{"a":{"frontmatter":"95ST8MZ0QTKP9","capabilities":["x"]}},"graph":{"n":{"s":{"role":"a","prompt":"p","location":null}}},"items":["AAAAAAAAAAAAA"],"output":"BBBBBBBBBBBBB","value":3e300}"#;
        for b in bootstrap::builtins() {
            if Plan::compile(&b.payload).is_some() {
                check(&b.payload.to_json(), payload);
            }
        }
    }

    #[test]
    fn combinators_arrays_and_additional_properties() {
        let r = r#"{"type":"string","format":"ocas_ref"}"#;
        check(
            &format!(r#"{{"type":"array","items":{r}}}"#),
            r#"["2B77HPWKR4V3V","x","95ST8MZ0QTKP9"]"#,
        );
        check(
            &format!(r#"{{"type":"object","additionalProperties":{r}}}"#),
            r#"{"b":"2B77HPWKR4V3V","a":"95ST8MZ0QTKP9"}"#,
        );
        check(
            &format!(r#"{{"allOf":[{r},{{"not":{r}}}],"if":{r},"then":{r}}}"#),
            r#""2B77HPWKR4V3V""#,
        );
        check(
            &format!(r#"{{"oneOf":[{r},{{"type":"array","items":{r}}}]}}"#),
            r#"["2B77HPWKR4V3V"]"#,
        );
        check(
            &format!(
                r#"{{"type":"object","properties":{{"z":{r},"a":{{"type":"array","items":{{"properties":{{"k":{r}}}}}}}}}}}"#
            ),
            r#"{"a":[{"k":"2B77HPWKR4V3V"},{"k":null}],"z":"95ST8MZ0QTKP9"}"#,
        );
    }

    #[test]
    fn uncovered_keywords_and_bad_bytes_give_up() {
        let s = Value::from_json_str(
            r#"{"type":"array","prefixItems":[{"type":"string","format":"ocas_ref"}]}"#,
        )
        .unwrap();
        assert!(Plan::compile(&s).is_none());
        let step = &bootstrap::by_name("uwf/StepNode").unwrap().payload;
        let plan = Plan::compile(step).unwrap();
        let good = cbor::encode(&Value::from_json_str(r#"{"start":"2B77HPWKR4V3V"}"#).unwrap());
        let mut out = Vec::new();
        assert!(plan.scan(&good[..good.len() - 1], &mut out).is_none());
        assert!(
            plan.scan(&[good.as_slice(), &[0]].concat(), &mut out)
                .is_none()
        );
        assert!(plan.scan(&[0x5f], &mut out).is_none());
    }
}
