//! Reference plans: a schema compiled once into the positions of a payload that can hold an
//! `ocas_ref`, run over a [`Value`] or straight over canonical CBOR bytes.
//!
//! A reference is a string at a position whose schema has `format: "ocas_ref"` (interop §A.8,
//! with `oneOf` followed as well). From a schema node:
//!
//! - `format: "ocas_ref"` and a string: one reference, nothing else applies;
//! - `anyOf`, then `oneOf`: each branch with the same value, and nothing else applies;
//! - `allOf`, `if`, `then`, `else`: each with the same value;
//! - `type: "array"` and an array: `prefixItems` positionally, `items` on the elements after
//!   them, `contains` on every element; nothing else applies;
//! - an object: `properties` in the schema's key order, an object-valued
//!   `additionalProperties` on every member (declared ones too), then each `patternProperties`
//!   pattern, in schema order, on the members whose key it matches;
//! - `not` with the same value.
//!
//! Members of an object are visited in the order they are stored: for a payload read from the
//! store (canonical CBOR, or a `Value` decoded from it) both runs give the same references in
//! the same order, because both see the same member order.
//!
//! `patternProperties` patterns use the validator's dialect (ECMA-262 translated by
//! `jsonschema_regex`, matched by `fancy_regex`), so that what validates also walks. A pattern
//! that dialect cannot compile makes [`RefPlan::compile`] fail (registration refuses such a
//! schema); a match the engine cannot finish (backtracking limit) counts as a match, so a walk
//! reports more nodes rather than skipping one.

use super::id::NodeId;
use super::pattern::Pattern;
use super::schema::{SchemaError, escape_pointer};
use super::value::{Map, Value};

/// A schema compiled into the positions that can hold references.
#[derive(Debug)]
pub struct RefPlan {
    /// `None` when the schema cannot hold any reference.
    root: Option<Node>,
}

/// The parts of one schema object that can lead to references (sub-schemas that cannot hold
/// one are left out).
#[derive(Debug, Default)]
struct Node {
    /// `format: "ocas_ref"` here.
    is_ref: bool,
    /// `anyOf` then `oneOf` branches; when present, nothing after them applies.
    branches: Option<Vec<Node>>,
    /// `allOf` branches, then `if`, `then`, `else`.
    all: Vec<Node>,
    /// `type: "array"`: arrays stop here.
    array: Option<ArrayPlan>,
    /// `properties`, in schema order.
    props: Vec<(Box<str>, Node)>,
    /// Object-valued `additionalProperties`, applied to every member.
    additional: Option<Box<Node>>,
    /// `patternProperties`, in schema order.
    patterns: Vec<(Pattern, Node)>,
    /// `not`.
    not: Option<Box<Node>>,
}

#[derive(Debug, Default)]
struct ArrayPlan {
    /// One entry per `prefixItems` schema (its length decides where `items` starts).
    prefix: Vec<Option<Node>>,
    items: Option<Box<Node>>,
    contains: Option<Box<Node>>,
}

/// Compiles a `patternProperties` pattern as the validator does.
///
/// # Errors
/// [`SchemaError::Pattern`] when the pattern is not an ECMA-262 regular expression the
/// validator's engine supports.
fn compile_pattern(pattern: &str, path: &str) -> Result<Pattern, SchemaError> {
    Pattern::compile(pattern).map_err(|problem| SchemaError::Pattern {
        pattern: pattern.to_string(),
        path: path.to_string(),
        problem,
    })
}

/// Whether `schema` can hold any reference at all.
fn schema_has_refs(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("format").and_then(Value::as_str) == Some("ocas_ref")
                || m.iter().any(|(k, v)| {
                    !matches!(k.as_str(), "const" | "default" | "enum" | "examples")
                        && schema_has_refs(v)
                })
        }
        Value::Array(a) => a.iter().any(schema_has_refs),
        _ => false,
    }
}

fn compile_node(schema: &Value, path: &str) -> Result<Option<Node>, SchemaError> {
    if !schema_has_refs(schema) {
        return Ok(None);
    }
    let Value::Object(s) = schema else {
        return Ok(None);
    };
    let mut n = Node {
        is_ref: s.get("format").and_then(Value::as_str) == Some("ocas_ref"),
        ..Node::default()
    };
    let list = |key: &str| -> Result<Vec<Option<Node>>, SchemaError> {
        match s.get(key) {
            Some(Value::Array(bs)) => bs
                .iter()
                .enumerate()
                .map(|(i, b)| compile_node(b, &format!("{path}/{key}/{i}")))
                .collect(),
            _ => Ok(Vec::new()),
        }
    };
    let one = |key: &str| -> Result<Option<Box<Node>>, SchemaError> {
        match s.get(key) {
            Some(b) => Ok(compile_node(b, &format!("{path}/{key}"))?.map(Box::new)),
            None => Ok(None),
        }
    };
    if ["anyOf", "oneOf"]
        .iter()
        .any(|k| matches!(s.get(*k), Some(Value::Array(_))))
    {
        let mut branches = list("anyOf")?;
        branches.extend(list("oneOf")?);
        n.branches = Some(branches.into_iter().flatten().collect());
        return Ok(Some(n));
    }
    n.all = list("allOf")?.into_iter().flatten().collect();
    for key in ["if", "then", "else"] {
        n.all.extend(one(key)?.map(|b| *b));
    }
    if s.get("type").and_then(Value::as_str) == Some("array") {
        n.array = Some(ArrayPlan {
            prefix: list("prefixItems")?,
            items: one("items")?,
            contains: one("contains")?,
        });
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        for (k, ps) in props {
            if let Some(p) = compile_node(ps, &format!("{path}/properties/{}", escape_pointer(k)))?
            {
                n.props.push((k.as_str().into(), p));
            }
        }
    }
    if let Some(Value::Object(_)) = s.get("additionalProperties") {
        n.additional = one("additionalProperties")?;
    }
    if let Some(Value::Object(pp)) = s.get("patternProperties") {
        let at = format!("{path}/patternProperties");
        for (pat, ps) in pp {
            if let Some(p) = compile_node(ps, &format!("{at}/{}", escape_pointer(pat)))? {
                n.patterns.push((compile_pattern(pat, &at)?, p));
            }
        }
    }
    n.not = one("not")?;
    Ok(Some(n))
}

/// Bytes that are not one well-formed JSON-like canonical CBOR item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed payload CBOR")]
pub struct Malformed;

impl RefPlan {
    /// Compiles `schema`.
    ///
    /// # Errors
    /// [`SchemaError::Pattern`] for a `patternProperties` pattern (at a position that can lead
    /// to references) that the validator's regex dialect cannot compile.
    pub fn compile(schema: &Value) -> Result<RefPlan, SchemaError> {
        Ok(RefPlan {
            root: compile_node(schema, "#")?,
        })
    }

    /// Whether payloads of this schema can hold any reference (lets callers skip them).
    pub fn has_refs(&self) -> bool {
        self.root.is_some()
    }

    /// Appends every string of `value` at a reference position, in plan order.
    pub fn refs<'v>(&self, value: &'v Value, out: &mut Vec<&'v str>) {
        self.run_value(value, &mut |s, _| out.push(s));
    }

    /// The string values of `value` at reference positions, in plan order (a position reached
    /// twice is listed twice). Callers compare them by address to rewrite the payload.
    pub fn positions<'v>(&self, value: &'v Value) -> Vec<&'v Value> {
        let mut out = Vec::new();
        self.run_value(value, &mut |_, v| out.push(v));
        out
    }

    /// Appends the references of `value` that are node ids, in plan order.
    pub fn ids(&self, value: &Value, out: &mut Vec<NodeId>) {
        self.run_value(value, &mut |s, _| out.extend(NodeId::parse_strict(s)));
    }

    /// Appends the references of the canonical CBOR `payload` that are node ids, in plan
    /// order: the same as [`RefPlan::ids`] on the decoded payload.
    ///
    /// # Errors
    /// [`Malformed`] (with `out` in an unspecified state) when the bytes are not one
    /// well-formed item of the kinds [`super::cbor::decode`] accepts.
    pub fn ids_in_cbor(&self, payload: &[u8], out: &mut Vec<NodeId>) -> Result<(), Malformed> {
        let Some(root) = &self.root else {
            return Ok(());
        };
        if skip(payload, 0)? != payload.len() {
            return Err(Malformed);
        }
        root.run(Cbor { b: payload, pos: 0 }, &mut |s, _| {
            out.extend(NodeId::parse_strict(s))
        })
    }

    fn run_value<'v>(&self, value: &'v Value, sink: &mut impl FnMut(&'v str, &'v Value)) {
        if let Some(root) = &self.root
            && let Err(Malformed) = root.run(value, sink)
        {
            unreachable!("a Value is always well-formed");
        }
    }
}

/// What the plan needs of a payload; implemented by `&Value` and by a position in canonical
/// CBOR, so the one traversal below serves both.
trait Doc<'a>: Copy {
    /// Handle on an array.
    type Arr: Copy;
    /// Handle on an object.
    type Obj: Copy;
    /// An object's members, gathered once per visit.
    type Members;
    /// The text, when this is a string.
    fn text(self) -> Result<Option<&'a str>, Malformed>;
    fn view(self) -> Result<View<Self::Arr, Self::Obj>, Malformed>;
    fn items(a: Self::Arr) -> impl Iterator<Item = Result<Self, Malformed>>;
    fn members(o: Self::Obj) -> Result<Self::Members, Malformed>;
    fn get(m: &Self::Members, key: &str) -> Option<Self>;
    /// Members in stored order, keys as UTF-8 bytes.
    fn each(m: &Self::Members) -> impl Iterator<Item = (&'a [u8], Self)>;
}

enum View<A, O> {
    Array(A),
    Object(O),
    Other,
}

impl Node {
    fn has_object_parts(&self) -> bool {
        !self.props.is_empty() || self.additional.is_some() || !self.patterns.is_empty()
    }

    fn run<'a, D: Doc<'a>>(
        &self,
        d: D,
        sink: &mut impl FnMut(&'a str, D),
    ) -> Result<(), Malformed> {
        if self.is_ref
            && let Some(s) = d.text()?
        {
            sink(s, d);
            return Ok(());
        }
        if let Some(bs) = &self.branches {
            for b in bs {
                b.run(d, sink)?;
            }
            return Ok(());
        }
        for p in &self.all {
            p.run(d, sink)?;
        }
        match d.view()? {
            View::Array(a) if self.array.is_some() => {
                let ap = self.array.as_ref().expect("checked above");
                let mut it = D::items(a);
                for p in &ap.prefix {
                    let Some(v) = it.next() else { break };
                    if let Some(p) = p {
                        p.run(v?, sink)?;
                    }
                }
                if let Some(items) = &ap.items {
                    for v in it {
                        items.run(v?, sink)?;
                    }
                }
                if let Some(c) = &ap.contains {
                    for v in D::items(a) {
                        c.run(v?, sink)?;
                    }
                }
                return Ok(());
            }
            View::Object(o) if self.has_object_parts() => {
                let m = D::members(o)?;
                for (k, p) in &self.props {
                    if let Some(v) = D::get(&m, k) {
                        p.run(v, sink)?;
                    }
                }
                if let Some(ap) = &self.additional {
                    for (_, v) in D::each(&m) {
                        ap.run(v, sink)?;
                    }
                }
                for (pat, p) in &self.patterns {
                    for (k, v) in D::each(&m) {
                        if pat.is_match(std::str::from_utf8(k).map_err(|_| Malformed)?) {
                            p.run(v, sink)?;
                        }
                    }
                }
            }
            _ => {}
        }
        if let Some(n) = &self.not {
            n.run(d, sink)?;
        }
        Ok(())
    }
}

impl<'a> Doc<'a> for &'a Value {
    type Arr = &'a [Value];
    type Obj = &'a Map;
    type Members = &'a Map;

    fn text(self) -> Result<Option<&'a str>, Malformed> {
        Ok(self.as_str())
    }

    fn view(self) -> Result<View<Self::Arr, Self::Obj>, Malformed> {
        Ok(match self {
            Value::Array(a) => View::Array(a),
            Value::Object(m) => View::Object(m),
            _ => View::Other,
        })
    }

    fn items(a: Self::Arr) -> impl Iterator<Item = Result<Self, Malformed>> {
        a.iter().map(Ok)
    }

    fn members(o: Self::Obj) -> Result<Self::Members, Malformed> {
        Ok(o)
    }

    fn get(m: &Self::Members, key: &str) -> Option<Self> {
        m.get(key)
    }

    fn each(m: &Self::Members) -> impl Iterator<Item = (&'a [u8], Self)> {
        m.iter().map(|(k, v)| (k.as_bytes(), v))
    }
}

/// The item at `pos` of canonical CBOR `b` (already checked whole by [`skip`]).
#[derive(Debug, Clone, Copy)]
struct Cbor<'a> {
    b: &'a [u8],
    pos: usize,
}

/// The `n` items (or key/value pairs) of an array (or a map) starting at `first`.
#[derive(Debug, Clone, Copy)]
struct Seq<'a> {
    b: &'a [u8],
    first: usize,
    n: u64,
}

impl<'a> Doc<'a> for Cbor<'a> {
    type Arr = Seq<'a>;
    type Obj = Seq<'a>;
    /// Key bytes and value position, in encoded order.
    type Members = (&'a [u8], Vec<(&'a [u8], usize)>);

    fn text(self) -> Result<Option<&'a str>, Malformed> {
        let (major, arg, body) = head(self.b, self.pos)?;
        if major != 3 {
            return Ok(None);
        }
        let s = slice(self.b, body, arg)?;
        std::str::from_utf8(s).map(Some).map_err(|_| Malformed)
    }

    fn view(self) -> Result<View<Self::Arr, Self::Obj>, Malformed> {
        let (major, n, first) = head(self.b, self.pos)?;
        let seq = Seq {
            b: self.b,
            first,
            n,
        };
        Ok(match major {
            4 => View::Array(seq),
            5 => View::Object(seq),
            _ => View::Other,
        })
    }

    fn items(a: Self::Arr) -> impl Iterator<Item = Result<Self, Malformed>> {
        let mut at = a.first;
        (0..a.n).map(move |_| {
            let here = at;
            at = skip(a.b, at)?;
            Ok(Cbor { b: a.b, pos: here })
        })
    }

    fn members(o: Self::Obj) -> Result<Self::Members, Malformed> {
        let mut members = Vec::with_capacity(usize::try_from(o.n).unwrap_or(0).min(64));
        let mut at = o.first;
        for _ in 0..o.n {
            let (km, kl, kb) = head(o.b, at)?;
            if km != 3 {
                return Err(Malformed);
            }
            let key = slice(o.b, kb, kl)?;
            let v = kb + key.len();
            members.push((key, v));
            at = skip(o.b, v)?;
        }
        Ok((o.b, members))
    }

    fn get(m: &Self::Members, key: &str) -> Option<Self> {
        let (b, members) = m;
        members
            .iter()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|&(_, pos)| Cbor { b, pos })
    }

    fn each(m: &Self::Members) -> impl Iterator<Item = (&'a [u8], Self)> {
        let b = m.0;
        m.1.iter().map(move |&(k, pos)| (k, Cbor { b, pos }))
    }
}

fn slice(b: &[u8], at: usize, len: u64) -> Result<&[u8], Malformed> {
    let end = at
        .checked_add(usize::try_from(len).map_err(|_| Malformed)?)
        .ok_or(Malformed)?;
    b.get(at..end).ok_or(Malformed)
}

/// The major type, argument and offset after the head of the item at `pos`. For floats the
/// argument is the raw bits.
#[inline]
fn head(b: &[u8], pos: usize) -> Result<(u8, u64, usize), Malformed> {
    let byte = *b.get(pos).ok_or(Malformed)?;
    let (major, info) = (byte >> 5, byte & 31);
    let p = pos + 1;
    let fixed = |n: usize| -> Result<u64, Malformed> {
        let s = b.get(p..p + n).ok_or(Malformed)?;
        Ok(s.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    };
    let (arg, end) = match info {
        0..=23 => (u64::from(info), p),
        24 => (fixed(1)?, p + 1),
        25 => (fixed(2)?, p + 2),
        26 => (fixed(4)?, p + 4),
        27 => (fixed(8)?, p + 8),
        _ => return Err(Malformed),
    };
    Ok((major, arg, end))
}

/// The offset after the item at `pos`, iteratively (no recursion on nesting). Accepts what
/// [`super::cbor::decode`] accepts: integers, UTF-8 text, arrays, maps, `false`, `true`,
/// `null` and floats.
fn skip(b: &[u8], mut pos: usize) -> Result<usize, Malformed> {
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let info = *b.get(pos).ok_or(Malformed)? & 31;
        let (major, arg, body) = head(b, pos)?;
        pos = body;
        match major {
            0 | 1 => {}
            3 => {
                let s = slice(b, pos, arg)?;
                std::str::from_utf8(s).map_err(|_| Malformed)?;
                pos += s.len();
            }
            4 => pending = pending.checked_add(arg).ok_or(Malformed)?,
            5 => {
                pending = arg
                    .checked_mul(2)
                    .and_then(|n| pending.checked_add(n))
                    .ok_or(Malformed)?;
            }
            7 if matches!(info, 20..=22 | 25..=27) => {}
            _ => return Err(Malformed),
        }
    }
    Ok(pos)
}

/// Appends every string of `value` at an `ocas_ref` position of `schema`, in plan order.
///
/// # Errors
/// As [`RefPlan::compile`].
pub fn collect_refs<'v>(
    schema: &Value,
    value: &'v Value,
    out: &mut Vec<&'v str>,
) -> Result<(), SchemaError> {
    RefPlan::compile(schema)?.refs(value, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::{bootstrap, cbor};

    fn json(s: &str) -> Value {
        Value::from_json_str(s).unwrap()
    }

    /// The references of `payload` (as stored: decoded from its canonical CBOR) over the
    /// `Value` and over the bytes, which must agree; returned as strings.
    fn check(schema: &str, payload: &str) -> Vec<String> {
        let plan = RefPlan::compile(&json(schema)).unwrap();
        let bytes = cbor::encode(&json(payload));
        let stored = cbor::decode(&bytes).unwrap();
        let mut strs = Vec::new();
        plan.refs(&stored, &mut strs);
        let mut from_value = Vec::new();
        plan.ids(&stored, &mut from_value);
        let mut from_cbor = Vec::new();
        plan.ids_in_cbor(&bytes, &mut from_cbor).unwrap();
        assert_eq!(from_cbor, from_value, "{payload}");
        assert_eq!(
            from_value,
            strs.iter()
                .filter_map(|s| NodeId::parse_strict(s))
                .collect::<Vec<_>>()
        );
        strs.into_iter().map(str::to_string).collect()
    }

    const R: &str = r#"{"type":"string","format":"ocas_ref"}"#;
    const A: &str = "2B77HPWKR4V3V";
    const B: &str = "95ST8MZ0QTKP9";
    const C: &str = "AAAAAAAAAAAAA";

    #[test]
    fn step_node_refs_follow_schema_order() {
        let schema = &bootstrap::by_name("uwf/StepNode").unwrap().payload;
        let payload = json(
            r#"{"start":"2B77HPWKR4V3V","prev":null,"role":"a","output":"95ST8MZ0QTKP9","detail":"AAAAAAAAAAAAA","agent":"x","startedAtMs":1,"completedAtMs":2,"cwd":"/","assembledPrompt":"BBBBBBBBBBBBB"}"#,
        );
        let mut out = Vec::new();
        collect_refs(schema, &payload, &mut out).unwrap();
        assert_eq!(out, [A, B, C, "BBBBBBBBBBBBB"]);
        assert!(RefPlan::compile(schema).unwrap().has_refs());
        // Stored, the schema's properties come back in canonical order, and so do the refs.
        let stored = cbor::decode(&cbor::encode(schema)).unwrap();
        let s = check(
            &stored.to_json(),
            r#"{"start":"2B77HPWKR4V3V","prev":"1111111111111","role":"a","output":"95ST8MZ0QTKP9","detail":"AAAAAAAAAAAAA","agent":"x","startedAtMs":1.5,"completedAtMs":-2,"cwd":"/","assembledPrompt":"BBBBBBBBBBBBB","edgePrompt":"e"}"#,
        );
        assert_eq!(s, ["1111111111111", A, C, B, "BBBBBBBBBBBBB"]);
        let s = check(
            &stored.to_json(),
            r#"{"start":"not an id","prev":null,"output":"95ST8MZ0QTKP9","detail":7,"x":[1,{"a":true}]}"#,
        );
        assert_eq!(s, ["not an id", B]);
    }

    #[test]
    fn one_of_is_followed_and_short_circuits_siblings() {
        let s = check(
            &format!(r#"{{"oneOf":[{R},{{"type":"null"}}],"not":{R}}}"#),
            r#""7VQ43ZSJTEWA7""#,
        );
        assert_eq!(s, ["7VQ43ZSJTEWA7"]);
        let s = check(
            &format!(
                r#"{{"anyOf":[{{"type":"array","items":{R}}}],"oneOf":[{{"type":"array","contains":{R}}}],"properties":{{"a":{R}}}}}"#
            ),
            &format!(r#"["{A}","{B}"]"#),
        );
        assert_eq!(s, [A, B, A, B]);
    }

    #[test]
    fn every_builtin_schema_on_both_paths() {
        let payload = r#"{"workflow":"2B77HPWKR4V3V","roles":{"a":{"frontmatter":"95ST8MZ0QTKP9","capabilities":["x"]}},"graph":{"n":{"s":{"role":"a","prompt":"p","location":null}}},"items":["AAAAAAAAAAAAA"],"output":"BBBBBBBBBBBBB","value":3e300}"#;
        let mut seen = 0;
        for b in bootstrap::builtins() {
            seen += check(&b.payload.to_json(), payload).len();
        }
        assert!(seen > 0);
    }

    #[test]
    fn arrays_prefix_items_contains() {
        let s = check(
            &format!(
                r#"{{"type":"array","prefixItems":[{R},{{}},{R}],"items":{R},"contains":{R}}}"#
            ),
            &format!(r#"["{A}","{B}","{C}","1111111111111"]"#),
        );
        assert_eq!(s, [A, C, "1111111111111", A, B, C, "1111111111111"]);
        // Shorter than the prefix: `items` has nothing left.
        let s = check(
            &format!(r#"{{"type":"array","prefixItems":[{{}},{R}],"items":{R}}}"#),
            &format!(r#"["{A}"]"#),
        );
        assert!(s.is_empty());
        // Without `type: "array"` the array keywords do not apply, `not` does.
        let s = check(
            &format!(r#"{{"items":{R},"not":{{"type":"array","items":{R}}}}}"#),
            &format!(r#"["{A}"]"#),
        );
        assert_eq!(s, [A]);
    }

    #[test]
    fn objects_properties_additional_and_patterns() {
        let s = check(
            &format!(
                r#"{{"type":"object","properties":{{"z":{R},"a":{{"type":"array","items":{{"properties":{{"k":{R}}}}}}}}},"additionalProperties":{R},"patternProperties":{{"^(?!z)":{R},"^z$":{R}}}}}"#
            ),
            &format!(r#"{{"a":[{{"k":"{A}"}},{{"k":null}}],"z":"{B}","y":"{C}"}}"#),
        );
        // Canonical member order: a, y, z.
        assert_eq!(s, [B, A, C, B, C, B]);
    }

    #[test]
    fn combinators_if_then_else_not() {
        let s = check(
            &format!(r#"{{"allOf":[{R},{{"not":{R}}}],"if":{R},"then":{R},"else":{{"not":{R}}}}}"#),
            &format!(r#""{A}""#),
        );
        assert_eq!(s, [A; 5]);
    }

    #[test]
    fn patterns_the_validator_cannot_compile_are_refused() {
        let bad = format!(r#"{{"patternProperties":{{"(":{R}}}}}"#);
        let e = RefPlan::compile(&json(&bad)).unwrap_err();
        assert!(matches!(e, SchemaError::Pattern { ref pattern, .. } if pattern == "("));
        assert!(!e.to_string().contains('\n'));
        assert!(compile_pattern("^(?=a)", "#").is_ok());
        assert!(compile_pattern("(?<", "#").is_err());
    }

    #[test]
    fn bad_bytes_are_reported() {
        let plan = RefPlan::compile(&bootstrap::by_name("uwf/StepNode").unwrap().payload).unwrap();
        let good = cbor::encode(&json(r#"{"start":"2B77HPWKR4V3V"}"#));
        let mut out = Vec::new();
        assert_eq!(plan.ids_in_cbor(&good, &mut out), Ok(()));
        assert_eq!(out.len(), 1);
        assert_eq!(
            plan.ids_in_cbor(&good[..good.len() - 1], &mut out),
            Err(Malformed)
        );
        assert_eq!(
            plan.ids_in_cbor(&[good.as_slice(), &[0]].concat(), &mut out),
            Err(Malformed)
        );
        assert_eq!(plan.ids_in_cbor(&[0x5f], &mut out), Err(Malformed));
        // A map key that is not text.
        assert_eq!(
            plan.ids_in_cbor(&[0xa1, 0x01, 0x01], &mut out),
            Err(Malformed)
        );
    }
}
