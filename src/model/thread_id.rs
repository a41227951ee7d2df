//! Thread ids: the TypeScript tool's ULID variant. Here, beside the other domain types, so the
//! store and the thread layer both name them; [`crate::thread`] makes new ones from random bits.
//!
//! 48 bits of milliseconds then 80 random bits, 128 bits in all, shifted left by two (zero bits
//! at the low end) and written as 26 upper-case Crockford characters. This is not a standard
//! ULID: a thread of 2026 starts `06…` where a standard ULID starts `01…`. Ids made here are
//! always of this shape; an id read back (typed, or brought in by an import) may be any 26 ASCII
//! letters and digits, since the TypeScript tool keeps whatever string it was given, and only ids
//! of this shape carry a meaningful time.

use crate::cas::id::{ALPHABET, digit_value};
use std::fmt;

/// Characters in a thread id.
pub(crate) const THREAD_ID_LEN: usize = 26;

/// A thread id: 26 upper-case Crockford characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ThreadId(String);

impl ThreadId {
    /// A new id for time `now_ms` with 80 `random` bits (the low 80 bits of the array).
    pub fn new(now_ms: u64, random: [u8; 10]) -> ThreadId {
        let mut r: u128 = 0;
        for b in random {
            r = (r << 8) | u128::from(b);
        }
        let v: u128 = (u128::from(now_ms & 0xFFFF_FFFF_FFFF) << 80) | r;
        // 130 bits: the value shifted left by two.
        let mut out = [0u8; THREAD_ID_LEN];
        // Low 2 bits are zero: the last character holds bits 2..5 of (v << 2) = bits 0..3 of v.
        let mut x = v;
        out[THREAD_ID_LEN - 1] = ALPHABET[((x & 0b111) << 2) as usize];
        x >>= 3;
        for slot in out[..THREAD_ID_LEN - 1].iter_mut().rev() {
            *slot = ALPHABET[(x & 31) as usize];
            x >>= 5;
        }
        ThreadId(String::from_utf8(out.to_vec()).expect("crockford characters are ASCII"))
    }

    /// Parses an id of an existing thread: 26 ASCII letters and digits, upper-cased (ids are
    /// case-insensitive). Not only Crockford characters: the TypeScript tool stores any string as
    /// a thread id, and an import keeps those (`01JTEST000000000000CANCEL4`).
    ///
    /// # Errors
    /// The message names the input.
    pub fn parse(s: &str) -> Result<ThreadId, String> {
        if !is_thread_id(s) {
            return Err(format!(
                "invalid thread id \"{s}\": expected 26 letters and digits"
            ));
        }
        Ok(ThreadId(s.to_ascii_uppercase()))
    }

    /// A key of the store's thread tables, taken as it is: the store writes only ids that
    /// were parsed or made.
    pub(crate) fn from_stored(s: &str) -> ThreadId {
        ThreadId(s.to_string())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `s` is accepted as a thread id: 26 ASCII letters and digits, in any case.
pub(crate) fn is_thread_id(s: &str) -> bool {
    s.len() == THREAD_ID_LEN && s.bytes().all(|c| c.is_ascii_alphanumeric())
}

/// The time of a thread id string, or `None` when it is not 26 Crockford characters.
pub(crate) fn time_of(s: &str) -> Option<u64> {
    if s.len() != THREAD_ID_LEN {
        return None;
    }
    let mut x: u64 = 0;
    for (i, c) in s.bytes().enumerate() {
        let d = digit_value(c)?;
        if i < 10 {
            x = (x << 5) | u64::from(d);
        }
    }
    Some(x >> 2)
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips_and_matches_the_typescript_prefix() {
        let id = ThreadId::new(1_767_225_600_000, [0xFF; 10]);
        assert_eq!(id.as_str().len(), 26);
        assert_eq!(time_of(id.as_str()), Some(1_767_225_600_000));
        assert!(id.as_str().starts_with("06"), "{id}");
        // The two pad bits are zero: the last character is a multiple of 4.
        let last = digit_value(*id.as_str().as_bytes().last().unwrap()).unwrap();
        assert_eq!(last % 4, 0);
        // A thread of the TypeScript fixture.
        let t = time_of("06DQDQD8R3SYN75HX43EQ49CJR").unwrap();
        assert!((1_767_225_600_000..1_767_312_000_000).contains(&t), "{t}");
    }

    #[test]
    fn parse_accepts_any_letters_and_digits() {
        assert_eq!(
            ThreadId::parse("06dqdqd8r3syn75hx43eq49cjr")
                .unwrap()
                .as_str(),
            "06DQDQD8R3SYN75HX43EQ49CJR"
        );
        assert!(ThreadId::parse("ZZZZZZZZZZZZZZZZZZZZZZZZZZ").is_ok());
        assert!(ThreadId::parse("06DQDQD8R3SYN75HX43EQ49CJ").is_err());
        // Not Crockford, but the TypeScript tool may hold such ids.
        assert_eq!(
            ThreadId::parse("01jtest000000000000cancel4")
                .unwrap()
                .as_str(),
            "01JTEST000000000000CANCEL4"
        );
        assert_eq!(time_of("01JTEST000000000000CANCEL4"), None);
        assert!(ThreadId::parse("06DQDQD8R3SYN75HX43EQ49CJ-").is_err());
        assert!(ThreadId::parse("06DQDQD8R3SYN75HX43EQ49CJÜ").is_err());
    }
}
