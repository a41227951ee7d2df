//! Canonical CBOR (RFC 8949 §4.2.1 as cborg's `rfc8949EncodeOptions` writes it) and a strict,
//! bounded decoder.
//!
//! Encoding rules: map keys sorted by their encoded bytes (for text keys: shorter UTF-8 length
//! first, then bytewise); a number that is integral with |v| ≤ 2^53−1 is the shortest integer,
//! every other number is a float64; all headers take the shortest form; definite lengths only.

use super::value::{Map, Value, is_safe_integer};

/// Deepest nesting the decoder accepts.
pub const MAX_DEPTH: usize = 512;

/// Why bytes are not a CBOR encoding of a JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CborError {
    /// The input ends inside an item.
    #[error("truncated CBOR at byte {0}")]
    Truncated(usize),
    /// An item that JSON cannot hold, or a malformed header.
    #[error("unsupported CBOR item (initial byte 0x{byte:02x}) at byte {at}")]
    Unsupported {
        /// The initial byte.
        byte: u8,
        /// Its offset.
        at: usize,
    },
    /// A text string that is not UTF-8.
    #[error("invalid UTF-8 in CBOR text at byte {0}")]
    Utf8(usize),
    /// A map key that is not a text string.
    #[error("CBOR map key at byte {0} is not a text string")]
    KeyNotText(usize),
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("CBOR nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Bytes after the top-level item.
    #[error("{0} trailing bytes after the CBOR item")]
    Trailing(usize),
}

#[inline]
fn head(major: u8, n: u64, out: &mut Vec<u8>) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends an unsigned integer.
#[inline]
pub(crate) fn encode_uint(n: u64, out: &mut Vec<u8>) {
    head(0, n, out);
}

/// Appends a text string.
#[inline]
pub(crate) fn encode_text(s: &str, out: &mut Vec<u8>) {
    head(3, s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

/// Appends a number under the JavaScript rules.
#[inline]
pub(crate) fn encode_number(n: f64, out: &mut Vec<u8>) {
    if is_safe_integer(n) {
        if n >= 0.0 {
            head(0, n as u64, out);
        } else {
            head(1, (-1.0 - n) as u64, out);
        }
    } else {
        out.push(0xfb);
        out.extend_from_slice(&n.to_bits().to_be_bytes());
    }
}

/// Canonical CBOR of `v`.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    encode_into(v, &mut out);
    out
}

/// Appends the canonical CBOR of `v` to `out`.
pub(crate) fn encode_into(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0xf6),
        Value::Bool(true) => out.push(0xf5),
        Value::Bool(false) => out.push(0xf4),
        Value::Number(n) => encode_number(*n, out),
        Value::String(s) => encode_text(s, out),
        Value::Array(a) => {
            head(4, a.len() as u64, out);
            for x in a {
                encode_into(x, out);
            }
        }
        Value::Object(m) => {
            head(5, m.len() as u64, out);
            let mut keys: Vec<(&String, &Value)> = m.iter().collect();
            // Encoded text keys compare as (length, bytes): the header grows with the length.
            keys.sort_unstable_by(|a, b| {
                a.0.len()
                    .cmp(&b.0.len())
                    .then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
            });
            for (k, x) in keys {
                encode_text(k, out);
                encode_into(x, out);
            }
        }
    }
}

/// Canonical CBOR of a whole node `{type, payload, timestamp}`, as the file layout stores it.
pub fn encode_node(type_id: &str, payload_cbor: &[u8], timestamp: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_cbor.len() + 40);
    out.push(0xa3);
    encode_text("type", &mut out);
    encode_text(type_id, &mut out);
    encode_text("payload", &mut out);
    out.extend_from_slice(payload_cbor);
    encode_text("timestamp", &mut out);
    encode_uint(timestamp, &mut out);
    out
}

/// Decodes one CBOR item that must span all of `b`.
///
/// # Errors
/// A [`CborError`] for truncated, malformed, non-JSON or trailing input.
pub fn decode(b: &[u8]) -> Result<Value, CborError> {
    let mut d = Decoder { b, pos: 0 };
    let v = d.item(0)?;
    if d.pos != b.len() {
        return Err(CborError::Trailing(b.len() - d.pos));
    }
    Ok(v)
}

/// Decodes one item at the start of `b`, returning it and the bytes it used.
///
/// # Errors
/// As [`decode`], without the trailing-bytes check.
pub(crate) fn decode_prefix(b: &[u8]) -> Result<(Value, usize), CborError> {
    let mut d = Decoder { b, pos: 0 };
    let v = d.item(0)?;
    Ok((v, d.pos))
}

struct Decoder<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Decoder<'_> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], CborError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(CborError::Truncated(self.pos))?;
        if end > self.b.len() {
            return Err(CborError::Truncated(self.b.len()));
        }
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn arg(&mut self, info: u8, at: usize, byte: u8) -> Result<u64, CborError> {
        Ok(match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(
                self.take(2)?.try_into().expect("2 bytes"),
            )),
            26 => u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().expect("4 bytes"),
            )),
            27 => u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")),
            _ => return Err(CborError::Unsupported { byte, at }),
        })
    }

    fn text(&mut self, len: u64) -> Result<String, CborError> {
        let at = self.pos;
        let len = usize::try_from(len).map_err(|_| CborError::Truncated(self.b.len()))?;
        let s = self.take(len)?;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| CborError::Utf8(at))
    }

    fn item(&mut self, depth: usize) -> Result<Value, CborError> {
        if depth > MAX_DEPTH {
            return Err(CborError::TooDeep);
        }
        let at = self.pos;
        let byte = *self.b.get(self.pos).ok_or(CborError::Truncated(self.pos))?;
        self.pos += 1;
        let major = byte >> 5;
        let info = byte & 31;
        match major {
            0 => Ok(Value::Number(self.arg(info, at, byte)? as f64)),
            1 => Ok(Value::Number(-1.0 - self.arg(info, at, byte)? as f64)),
            3 => {
                let n = self.arg(info, at, byte)?;
                Ok(Value::String(self.text(n)?))
            }
            4 => {
                let n = self.arg(info, at, byte)?;
                // Every item takes at least one byte: bound the allocation by the input.
                let cap = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(self.b.len() - self.pos);
                let mut v = Vec::with_capacity(cap);
                for _ in 0..n {
                    v.push(self.item(depth + 1)?);
                }
                Ok(Value::Array(v))
            }
            5 => {
                let n = self.arg(info, at, byte)?;
                let cap = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min((self.b.len() - self.pos) / 2);
                let mut m = Map::with_capacity_and_hasher(cap, Default::default());
                for _ in 0..n {
                    let kat = self.pos;
                    let kb = *self.b.get(self.pos).ok_or(CborError::Truncated(self.pos))?;
                    if kb >> 5 != 3 {
                        return Err(CborError::KeyNotText(kat));
                    }
                    self.pos += 1;
                    let kl = self.arg(kb & 31, kat, kb)?;
                    let k = self.text(kl)?;
                    let v = self.item(depth + 1)?;
                    m.insert(k, v);
                }
                Ok(Value::Object(m))
            }
            7 => match info {
                20 => Ok(Value::Bool(false)),
                21 => Ok(Value::Bool(true)),
                22 => Ok(Value::Null),
                25 => {
                    let h = u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes"));
                    Ok(Value::Number(f16_to_f64(h)))
                }
                26 => {
                    let f = f32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes"));
                    Ok(Value::Number(f64::from(f)))
                }
                27 => {
                    let f = f64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"));
                    Ok(Value::Number(f))
                }
                _ => Err(CborError::Unsupported { byte, at }),
            },
            _ => Err(CborError::Unsupported { byte, at }),
        }
    }
}

fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    let mag = match exp {
        0 => frac * 2f64.powi(-24),
        31 => {
            if frac == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        }
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    };
    sign * mag
}

/// A node file `{type, payload, timestamp}` split into its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeParts {
    /// The type id as written.
    pub type_id: String,
    /// The decoded payload.
    pub payload: Value,
    /// Milliseconds since the epoch of the first write.
    pub timestamp: u64,
}

/// Decodes a node file (`CBOR({type, payload, timestamp})`), in any key order.
///
/// # Errors
/// A [`CborError`], or `Unsupported` when a field is missing or of the wrong kind.
pub fn decode_node(b: &[u8]) -> Result<NodeParts, CborError> {
    let v = decode(b)?;
    let bad = CborError::Unsupported {
        byte: b.first().copied().unwrap_or(0),
        at: 0,
    };
    let Value::Object(mut m) = v else {
        return Err(bad);
    };
    if m.len() != 3 {
        return Err(bad);
    }
    let type_id = match m.shift_remove("type") {
        Some(Value::String(s)) => s,
        _ => return Err(bad),
    };
    let payload = m.shift_remove("payload").ok_or(bad.clone())?;
    let timestamp = match m.shift_remove("timestamp") {
        Some(Value::Number(n)) if n >= 0.0 && n.fract() == 0.0 && n <= u64::MAX as f64 => n as u64,
        _ => return Err(bad),
    };
    Ok(NodeParts {
        type_id,
        payload,
        timestamp,
    })
}

/// The parts of a node file already in canonical form: exactly what [`encode_node`] writes for
/// a canonical payload. The payload stays as bytes, checked but not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanonicalNode<'a> {
    /// The type id as written.
    pub type_id: &'a str,
    /// The payload's canonical CBOR.
    pub payload_cbor: &'a [u8],
    /// Milliseconds since the epoch of the first write.
    pub timestamp: u64,
}

/// Splits `b` when it is a node file in canonical form, without building the payload's
/// [`Value`]: `Some` exactly when `decode_node(b)` succeeds and `encode_node` of its parts
/// gives `b` back. `None` for anything else, canonical or not, which [`decode_node`] then
/// settles.
pub fn split_canonical_node(b: &[u8]) -> Option<CanonicalNode<'_>> {
    let mut c = Canon { b, pos: 0 };
    c.expect(&[0xa3, 0x64])?;
    c.expect(b"type")?;
    let type_id = c.text()?;
    c.expect(&[0x67])?;
    c.expect(b"payload")?;
    let start = c.pos;
    c.item(0)?;
    let payload_cbor = &b[start..c.pos];
    c.expect(&[0x69])?;
    c.expect(b"timestamp")?;
    let head = c.byte()?;
    if head >> 5 != 0 {
        return None;
    }
    let timestamp = c.arg(head & 31)?;
    // The decoder reads the timestamp as a JavaScript number: beyond 2^53 it may round.
    (c.pos == b.len() && (timestamp as f64) as u64 == timestamp).then_some(CanonicalNode {
        type_id,
        payload_cbor,
        timestamp,
    })
}

/// A reader that accepts only what [`encode_into`] writes.
struct Canon<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Canon<'a> {
    fn byte(&mut self) -> Option<u8> {
        let x = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(x)
    }

    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(usize::try_from(n).ok()?)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn expect(&mut self, bytes: &[u8]) -> Option<()> {
        (self.take(bytes.len() as u64)? == bytes).then_some(())
    }

    /// A head's argument, refused unless in its shortest form.
    fn arg(&mut self, info: u8) -> Option<u64> {
        let (n, least) = match info {
            0..=23 => return Some(u64::from(info)),
            24 => (u64::from(self.byte()?), 24),
            25 => (
                u64::from(u16::from_be_bytes(self.take(2)?.try_into().ok()?)),
                0x100,
            ),
            26 => (
                u64::from(u32::from_be_bytes(self.take(4)?.try_into().ok()?)),
                0x1_0000,
            ),
            27 => (
                u64::from_be_bytes(self.take(8)?.try_into().ok()?),
                0x1_0000_0000,
            ),
            _ => return None,
        };
        (n >= least).then_some(n)
    }

    fn text(&mut self) -> Option<&'a str> {
        let head = self.byte()?;
        if head >> 5 != 3 {
            return None;
        }
        let n = self.arg(head & 31)?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    fn item(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let head = self.byte()?;
        let info = head & 31;
        let max_safe = super::value::MAX_SAFE_INTEGER as u64;
        match head >> 5 {
            0 => (self.arg(info)? <= max_safe).then_some(()),
            // -1 - n must be a safe integer.
            1 => (self.arg(info)? < max_safe).then_some(()),
            3 => {
                self.pos -= 1;
                self.text().map(|_| ())
            }
            4 => {
                let n = self.arg(info)?;
                for _ in 0..n {
                    self.item(depth + 1)?;
                }
                Some(())
            }
            5 => {
                let n = self.arg(info)?;
                let mut prev: Option<&str> = None;
                for _ in 0..n {
                    let k = self.text()?;
                    // Strictly increasing (length, bytes): sorted, and no key twice.
                    if prev.is_some_and(|p| (p.len(), p.as_bytes()) >= (k.len(), k.as_bytes())) {
                        return None;
                    }
                    prev = Some(k);
                    self.item(depth + 1)?;
                }
                Some(())
            }
            7 => match info {
                20..=22 => Some(()),
                // Integral safe values are written as integers, everything else as float64.
                27 => {
                    let f = f64::from_be_bytes(self.take(8)?.try_into().ok()?);
                    (!is_safe_integer(f)).then_some(())
                }
                _ => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn appendix_vectors() {
        let v = Value::from_json_str(r#"{"b":1,"aa":2,"a":3,"$status":"x"}"#).unwrap();
        assert_eq!(
            hex(&encode(&v)),
            "a46161036162016261610267247374617475736178"
        );
        for (j, h) in [
            ("1.5", "fb3ff8000000000000"),
            ("1000", "1903e8"),
            ("-1", "20"),
            ("9007199254740992", "fb4340000000000000"),
            ("0.1", "fb3fb999999999999a"),
            ("-0", "00"),
        ] {
            assert_eq!(hex(&encode(&Value::from_json_str(j).unwrap())), h, "{j}");
        }
    }

    #[test]
    fn decoder_rejects_garbage() {
        assert!(matches!(
            decode(&[0x82, 0x01]),
            Err(CborError::Truncated(_))
        ));
        assert!(matches!(decode(&[0x01, 0x01]), Err(CborError::Trailing(1))));
        assert!(decode(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(matches!(
            decode(&[0x40]),
            Err(CborError::Unsupported { .. })
        ));
    }
}
