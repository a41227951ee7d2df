//! Making thread ids: the TypeScript tool's ULID variant ([`ThreadId`]) with random bits from the
//! operating system.

pub use crate::model::ThreadId;
pub(crate) use crate::model::time_of;

impl ThreadId {
    /// A new id for `now_ms` with random bits from the operating system.
    pub fn generate(now_ms: u64) -> ThreadId {
        ThreadId::new(now_ms, random_bytes())
    }
}

/// 80 random bits from the operating system.
pub(crate) fn random_bytes() -> [u8; 10] {
    use std::io::Read;
    let mut b = [0u8; 10];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return b;
    }
    // No /dev/urandom: the standard library's randomly keyed hasher, over the pid and a
    // counter.
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let fill = |out: &mut [u8]| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let x = h.finish().to_be_bytes();
        out.copy_from_slice(&x[..out.len()]);
    };
    fill(&mut b[..8]);
    fill(&mut b[8..]);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::id::digit_value;

    #[test]
    fn made_ids_are_strict_crockford() {
        let made = ThreadId::generate(1_767_225_600_000);
        assert!(made.as_str().bytes().all(|c| digit_value(c).is_some()));
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(ThreadId::generate(1), ThreadId::generate(1));
    }
}
