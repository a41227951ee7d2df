//! Output structs as bytes: compact JSON with JavaScript's number spelling (`JSON.stringify`),
//! or a [`Value`] in the structs' field order.

use crate::cas::{NodeId, Value};
use serde::{Serialize, Serializer};
use std::io::Write;

/// A command's output struct as the line `--format json` prints (`uwf serve`'s API answers
/// with the same bytes).
///
/// # Errors
/// A value serde_json cannot write (an output struct always can).
pub(crate) fn json_line<T: Serialize>(v: &T) -> serde_json::Result<Vec<u8>> {
    // Straight to text: the same bytes as through `Value`, without building the tree.
    let mut buf = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, JsFormatter);
    v.serialize(&mut ser)?;
    buf.push(b'\n');
    Ok(buf)
}

/// `JSON.stringify`'s spelling for serde_json: every number as a JavaScript double
/// ([`crate::cas::value::write_js_number`]), the escapes of [`Value::to_json`].
struct JsFormatter;

impl JsFormatter {
    fn number<W: ?Sized + Write>(w: &mut W, n: f64) -> std::io::Result<()> {
        let mut s = String::new();
        crate::cas::value::write_js_number(n, &mut s);
        w.write_all(s.as_bytes())
    }
}

impl serde_json::ser::Formatter for JsFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        Self::number(w, v)
    }
    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, v: f32) -> std::io::Result<()> {
        Self::number(w, f64::from(v))
    }
    fn write_u64<W: ?Sized + Write>(&mut self, w: &mut W, v: u64) -> std::io::Result<()> {
        Self::number(w, v as f64)
    }
    fn write_i64<W: ?Sized + Write>(&mut self, w: &mut W, v: i64) -> std::io::Result<()> {
        Self::number(w, v as f64)
    }
    fn write_u128<W: ?Sized + Write>(&mut self, w: &mut W, v: u128) -> std::io::Result<()> {
        Self::number(w, v as f64)
    }
    fn write_i128<W: ?Sized + Write>(&mut self, w: &mut W, v: i128) -> std::io::Result<()> {
        Self::number(w, v as f64)
    }
    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        e: serde_json::ser::CharEscape,
    ) -> std::io::Result<()> {
        use serde_json::ser::CharEscape;
        let s = match e {
            CharEscape::Quote => "\\\"",
            CharEscape::ReverseSolidus => "\\\\",
            CharEscape::Solidus => "/",
            CharEscape::Backspace => "\\b",
            CharEscape::FormFeed => "\\f",
            CharEscape::LineFeed => "\\n",
            CharEscape::CarriageReturn => "\\r",
            CharEscape::Tab => "\\t",
            CharEscape::AsciiControl(b) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                return w.write_all(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]);
            }
        };
        w.write_all(s.as_bytes())
    }
}

/// `v` as a [`Value`]: fields in declaration order, numbers as doubles.
pub(crate) fn to_value<T: Serialize>(v: &T) -> Value {
    // serde_json keeps the field order (`preserve_order`), and `from_serde_json` applies the
    // number rule. An output struct has string keys and plain data only.
    let j = serde_json::to_value(v).expect("an output struct has string keys");
    Value::from_serde_json(&j)
}

/// A node id printed as its 13 Crockford characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeIdStr(pub NodeId);

impl Serialize for NodeIdStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_wire())
    }
}
