//! Calendar arithmetic and the time formats uwf reads and writes: ISO dates, JavaScript's
//! `toISOString()`, durations; UTC throughout, no I/O.

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn num(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn parse_iso(s: &str) -> Option<i64> {
    let (date, rest) = match s.find(['T', ' ']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let (y, m, d) = (
        num(parts.next()?)?,
        num(parts.next()?)?,
        num(parts.next()?)?,
    );
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut ms = days_from_civil(y, m, d) * 86_400_000;
    let Some(rest) = rest else {
        return Some(ms);
    };
    let (time, offset) = if let Some(t) = rest.strip_suffix('Z') {
        (t, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (t, o) = rest.split_at(i);
        let sign = if o.starts_with('-') { -1 } else { 1 };
        let (oh, om) = o[1..].split_once(':').unwrap_or((&o[1..], "0"));
        (t, sign * (num(oh)? * 60 + num(om)?) * 60_000)
    } else {
        (rest, 0)
    };
    let mut tp = time.split(':');
    let h = num(tp.next()?)?;
    let mi = num(tp.next()?)?;
    let (sec, frac) = match tp.next() {
        Some(s) => match s.split_once('.') {
            Some((a, b)) => (num(a)?, {
                let b3: String = b.chars().chain("000".chars()).take(3).collect();
                num(&b3)?
            }),
            None => (num(s)?, 0),
        },
        None => (0, 0),
    };
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    ms += ((h * 60 + mi) * 60 + sec) * 1000 + frac - offset;
    Some(ms)
}

/// Parses a `--after`/`--before` value: `<n>d`, `<n>h`, `<n>m`, `<n>s` before `now_ms`, an ISO date or
/// date-time (UTC unless it has an offset), or milliseconds since the epoch.
/// `None` when it is none of these.
pub(crate) fn parse_time(s: &str, now_ms: u64) -> Option<u64> {
    let t = s.trim();
    if let Some(unit) = t.chars().last()
        && let Some(n) = num(&t[..t.len() - 1])
    {
        let per = match unit {
            'd' => 86_400_000,
            'h' => 3_600_000,
            'm' => 60_000,
            's' => 1000,
            _ => 0,
        };
        if per > 0 {
            return Some(now_ms.saturating_sub(n as u64 * per));
        }
    }
    if let Some(n) = num(t)
        && t.len() > 8
    {
        return Some(n as u64);
    }
    parse_iso(t).filter(|ms| *ms >= 0).map(|ms| ms as u64)
}

/// JavaScript's `toISOString()`: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn format_iso(ms: u64) -> String {
    let mut out = String::with_capacity(24);
    push_iso(ms, &mut out);
    out
}

/// [`format_iso`] of `ms` appended to `out` (a log line's time, written for every event).
pub(crate) fn push_iso(ms: u64, out: &mut String) {
    let secs = (ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let digits = |out: &mut String, v: i64, n: u32| {
        for p in (0..n).rev() {
            out.push(char::from(b'0' + (v / 10_i64.pow(p) % 10) as u8));
        }
    };
    if (0..10_000).contains(&y) {
        digits(out, y, 4);
    } else {
        out.push_str(&format!("{y:04}"));
    }
    for (sep, v, n) in [
        ('-', m, 2),
        ('-', d, 2),
        ('T', s / 3600, 2),
        (':', (s / 60) % 60, 2),
        (':', s % 60, 2),
        ('.', (ms % 1000) as i64, 3),
    ] {
        out.push(sep);
        digits(out, v, n);
    }
    out.push('Z');
}

/// The UTC date of `ms`: `YYYY-MM-DD`.
pub(crate) fn utc_date(ms: u64) -> String {
    let (y, m, d) = civil_from_days((ms / 86_400_000) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DD HH:MM:SS` in UTC, no zone suffix: JavaScript's `toISOString()` with the `T`
/// made a space and the milliseconds and `Z` dropped.
pub(crate) fn format_utc(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

/// A step's duration as the TypeScript tool writes it: `<ms>ms` below a second, `<s.s>s`
/// (`toFixed(1)`) below a minute, else `<m>m<s>s` with the seconds rounded half up, so
/// 119.6 s is `1m60s`. `ms` is a JavaScript number: a missing time makes it NaN.
pub(crate) fn format_duration(ms: f64) -> String {
    use crate::cas::value::js_number_string;
    if ms < 1000.0 {
        return format!("{}ms", js_number_string(ms));
    }
    let seconds = ms / 1000.0;
    if seconds < 60.0 {
        return format!("{}s", to_fixed_1(seconds));
    }
    let minutes = (seconds / 60.0).floor();
    // Math.round: half up.
    let r = seconds % 60.0;
    let rest = if r - r.floor() >= 0.5 {
        r.floor() + 1.0
    } else {
        r.floor()
    };
    format!("{}m{}s", js_number_string(minutes), js_number_string(rest))
}

/// `x.toFixed(1)` for `0 <= x < 1e21`: the exact decimal value rounded to one place, a tie
/// going up (Rust's `{:.1}` would round a tie such as 1.25 to even).
fn to_fixed_1(x: f64) -> String {
    // 1100 places hold any double's exact decimal expansion.
    let exact = format!("{x:.1100}");
    let (int, frac) = exact.split_once('.').expect("a fraction was asked for");
    let tenths = frac.as_bytes()[0] - b'0';
    let rest = &frac[1..];
    let up = rest.as_bytes()[0] >= b'5';
    let mut digits: Vec<u8> = int.bytes().chain([b'0' + tenths]).collect();
    if up {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let n = digits.len();
    format!(
        "{}.{}",
        String::from_utf8_lossy(&digits[..n - 1]),
        digits[n - 1] as char
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_as_javascript_writes_them() {
        for (ms, iso) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(format_iso(ms), iso);
        }
        for ms in (0..4_000_000_000_000u64).step_by(7_919_876_543) {
            let old = format!("{}.{:03}Z", format_utc(ms).replacen(' ', "T", 1), ms % 1000);
            assert_eq!(format_iso(ms), old);
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_utc(1_767_225_600_000), "2026-01-01 00:00:00");
        assert_eq!(format_utc(1_767_225_661_999), "2026-01-01 00:01:01");
        assert_eq!(format_duration(999.0), "999ms");
        assert_eq!(format_duration(-5.0), "-5ms");
        assert_eq!(format_duration(1.5), "1.5ms");
        assert_eq!(format_duration(15_293.0), "15.3s");
        assert_eq!(format_duration(1_250.0), "1.3s");
        assert_eq!(format_duration(59_999.0), "60.0s");
        assert_eq!(format_duration(125_000.0), "2m5s");
        assert_eq!(format_duration(119_600.0), "1m60s");
        assert_eq!(format_duration(f64::NAN), "NaNmNaNs");
    }
}
