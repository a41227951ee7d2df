//! Node ids: 64-bit XXH64 values written as 13 Crockford base-32 characters.
//!
//! The value is read most significant bit first as 13 groups of 5 bits, that is 65 bits with
//! one implicit leading zero bit, so the first character is always in `0-9A-F`.

use std::fmt;
use std::str::FromStr;

/// The Crockford alphabet, upper case, without I, L, O and U.
pub(crate) const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Number of characters in a node id.
pub(crate) const ID_LEN: usize = 13;

/// A content address: the XXH64 of a node's type id and canonical payload.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u64);

/// Why a string is not a node id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// Not 13 characters long.
    #[error("invalid id \"{0}\": expected 13 Crockford base-32 characters")]
    Length(String),
    /// A character outside the Crockford alphabet.
    #[error(
        "invalid id \"{0}\": character {1:?} is not in the Crockford alphabet (0-9, A-Z without I, L, O, U)"
    )]
    Char(String, char),
    /// The first character encodes more than the 64 bits of an id.
    #[error("invalid id \"{0}\": the first character must be 0-9 or A-F")]
    Overflow(String),
}

/// Value of one Crockford character, case-insensitive; `None` outside the alphabet.
#[inline]
pub(crate) fn digit_value(c: u8) -> Option<u8> {
    DECODE[c as usize].filter(|_| c.is_ascii())
}

const DECODE: [Option<u8>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < 32 {
        let c = ALPHABET[i];
        t[c as usize] = Some(i as u8);
        t[c.to_ascii_lowercase() as usize] = Some(i as u8);
        i += 1;
    }
    t
};

impl NodeId {
    /// The 13 upper-case ASCII characters of this id.
    #[inline]
    pub(crate) fn to_chars(self) -> [u8; ID_LEN] {
        let mut out = [0u8; ID_LEN];
        let mut x = self.0;
        for slot in out.iter_mut().rev() {
            *slot = ALPHABET[(x & 31) as usize];
            x >>= 5;
        }
        out
    }

    /// Parses 13 Crockford characters; lower case is accepted.
    ///
    /// # Errors
    /// Returns an [`IdError`] naming the input when it is not an id.
    pub fn parse(s: &str) -> Result<NodeId, IdError> {
        let b = s.as_bytes();
        if b.len() != ID_LEN {
            return Err(IdError::Length(s.to_string()));
        }
        let mut x: u64 = 0;
        for (i, &c) in b.iter().enumerate() {
            let Some(d) = digit_value(c) else {
                let ch = s[i..].chars().next().unwrap_or('?');
                return Err(IdError::Char(s.to_string(), ch));
            };
            if i == 0 && d >= 16 {
                return Err(IdError::Overflow(s.to_string()));
            }
            x = (x << 5) | u64::from(d);
        }
        Ok(NodeId(x))
    }

    /// Decodes 13 upper-case Crockford characters at compile time, for ids written into the
    /// source: `const X: NodeId = NodeId::from_crockford("CTS5P6RD8HMCS");`.
    ///
    /// # Panics
    /// When `s` is not an upper-case id; in a `const` that is a build error.
    pub(crate) const fn from_crockford(s: &str) -> NodeId {
        let b = s.as_bytes();
        assert!(b.len() == ID_LEN, "an id has 13 characters");
        let mut x: u64 = 0;
        let mut i = 0;
        while i < ID_LEN {
            let mut d = 0;
            while ALPHABET[d] != b[i] {
                d += 1;
                assert!(d < 32, "not an upper-case Crockford character");
            }
            assert!(i > 0 || d < 16, "the first character must be 0-9 or A-F");
            x = (x << 5) | d as u64;
            i += 1;
        }
        NodeId(x)
    }

    /// Parses an id written exactly as the TypeScript tool writes it (upper case only).
    pub fn parse_strict(s: &str) -> Option<NodeId> {
        if s.bytes().any(|c| c.is_ascii_lowercase()) {
            return None;
        }
        NodeId::parse(s).ok()
    }

    /// The id as a `String`.
    pub fn to_wire(self) -> String {
        let c = self.to_chars();
        // The alphabet is ASCII.
        String::from_utf8(c.to_vec()).expect("crockford characters are ASCII")
    }
}

/// Whether `s` matches the `ocas_ref` format `^[0-9A-HJKMNP-TV-Z]{13}$` (case-sensitive).
pub(crate) fn is_ocas_ref(s: &str) -> bool {
    s.len() == ID_LEN
        && s.bytes()
            .all(|c| !c.is_ascii_lowercase() && digit_value(c).is_some())
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.to_chars();
        f.write_str(std::str::from_utf8(&c).expect("crockford characters are ASCII"))
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({self})")
    }
}

impl FromStr for NodeId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeId::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_vector() {
        assert_eq!(NodeId(0xef46db3751d8e999).to_string(), "EYHPV6X8XHTCS");
        assert_eq!(
            NodeId::parse("eyhpv6x8xhtcs").unwrap().0,
            0xef46db3751d8e999
        );
    }

    #[test]
    fn rejects_bad_ids() {
        assert!(matches!(NodeId::parse("ABC"), Err(IdError::Length(_))));
        assert!(matches!(
            NodeId::parse("EYHPV6X8XHTCI"),
            Err(IdError::Char(_, 'I'))
        ));
        assert!(matches!(
            NodeId::parse("GYHPV6X8XHTCS"),
            Err(IdError::Overflow(_))
        ));
        assert!(!is_ocas_ref("eyhpv6x8xhtcs"));
        assert!(is_ocas_ref("EYHPV6X8XHTCS"));
    }
}
