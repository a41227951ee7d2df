//! Times given to the thread commands (`--after`, `--before`) and shown by them; the calendar
//! arithmetic and the formats are [`crate::time`]'s.

use super::{Result, ThreadError};
pub(crate) use crate::time::format_iso;

/// Parses a `--after`/`--before` value: `<n>d`, `<n>h`, `<n>m`, `<n>s` before `now_ms`, an ISO date or
/// date-time (UTC unless it has an offset), or milliseconds since the epoch.
///
/// # Errors
/// `invalid time format: <value>`.
pub(crate) fn parse_time(s: &str, now_ms: u64) -> Result<u64> {
    crate::time::parse_time(s, now_ms)
        .ok_or_else(|| ThreadError::Invalid(format!("invalid time format: {s}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_absolute() {
        let now = 1_767_225_600_000;
        assert_eq!(parse_time("7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(parse_time("24h", now).unwrap(), now - 86_400_000);
        assert_eq!(parse_time("30m", now).unwrap(), now - 1_800_000);
        assert_eq!(parse_time("2026-01-01", 0).unwrap(), 1_767_225_600_000);
        assert_eq!(
            parse_time("2026-01-01T01:00:00Z", 0).unwrap(),
            1_767_225_600_000 + 3_600_000
        );
        assert_eq!(
            parse_time("2026-01-01T01:00:00+01:00", 0).unwrap(),
            1_767_225_600_000
        );
        assert_eq!(
            parse_time("soon", 0).unwrap_err().to_string(),
            "invalid time format: soon"
        );
        assert!(parse_time("2026-13-01", 0).is_err());
    }
}
