//! Tests of the thread commands' argument rules.

use super::*;

#[test]
fn counts_read_as_javascript_numbers() {
    let c = |s: &str| parse_count(s).map_err(|e| e.message);
    assert_eq!(c("3"), Ok(3));
    assert_eq!(c(" 2 "), Ok(2));
    assert_eq!(c("0x10"), Ok(16));
    assert_eq!(c("1e2"), Ok(100));
    assert_eq!(c("2.0"), Ok(2));
    let bad = |s: &str, shown: &str| {
        assert_eq!(
            c(s),
            Err(format!("--count must be a positive integer, got: {shown}"))
        )
    };
    bad("0", "0");
    bad("-1", "-1");
    bad("1.5", "1.5");
    bad("1.50", "1.5");
    bad("", "0");
    bad("abc", "NaN");
    bad("inf", "NaN");
    bad("-Infinity", "-Infinity");
}
