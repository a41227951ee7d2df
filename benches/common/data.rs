//! What the benches that generate node data share: splitmix64, a small fixed-seed generator,
//! and JSON objects from field lists.

use uwf::cas::Value;
use uwf::cas::value::Map;

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

/// An object of `fields`, in their order.
pub fn obj(fields: Vec<(&str, Value)>) -> Value {
    let mut m = Map::default();
    for (k, v) in fields {
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}
