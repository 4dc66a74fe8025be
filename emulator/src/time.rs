//! Wall-clock timestamps in the two formats the Kubernetes API uses.
//!
//! `metav1.Time` is RFC 3339 with whole seconds (`2024-05-01T12:00:00Z`), `metav1.MicroTime` has six
//! fractional digits. This module formats and parses both without a date library; it never reads
//! the clock itself (callers pass `now`), so the logic that uses it stays testable.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats `t` as a `metav1.Time` (`YYYY-MM-DDTHH:MM:SSZ`).
pub fn format_time(t: SystemTime) -> String {
    let (secs, _) = split(t);
    let (date, clock) = civil(secs);
    format!("{date}T{clock}Z")
}

/// Formats `t` as a `metav1.MicroTime` (`YYYY-MM-DDTHH:MM:SS.ffffffZ`).
pub fn format_micro_time(t: SystemTime) -> String {
    let (secs, nanos) = split(t);
    let (date, clock) = civil(secs);
    format!("{date}T{clock}.{:06}Z", nanos / 1_000)
}

/// Parses an RFC 3339 timestamp (`Z` or `±HH:MM` offset, optional fraction) into a `SystemTime`.
/// Returns `None` for anything else; callers treat an unparsable time as absent.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b't')
    {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> { text.get(range)?.parse().ok() };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos: u32 = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded = format!("{:0<9}", &fraction[..digits.min(9)]);
        nanos = padded.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':' =>
        {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

fn split(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(_) => (0, 0),
    }
}

fn civil(secs: i64) -> (String, String) {
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!(
            "{:02}:{:02}:{:02}",
            of_day / 3600,
            (of_day % 3600) / 60,
            of_day % 60
        ),
    )
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        let t = UNIX_EPOCH + Duration::new(1_714_564_800, 123_456_789);
        assert_eq!(format_time(t), "2024-05-01T12:00:00Z");
        assert_eq!(format_micro_time(t), "2024-05-01T12:00:00.123456Z");
        assert_eq!(format_time(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn parse_round_trips_both_formats_and_offsets() {
        let t = UNIX_EPOCH + Duration::new(1_714_564_800, 123_456_000);
        assert_eq!(parse_time(&format_micro_time(t)), Some(t));
        assert_eq!(
            parse_time("2024-05-01T14:00:00+02:00"),
            Some(UNIX_EPOCH + Duration::from_secs(1_714_564_800))
        );
        assert_eq!(
            parse_time("2024-02-29T00:00:00Z")
                .map(format_time)
                .as_deref(),
            Some("2024-02-29T00:00:00Z")
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2024-13-01T00:00:00Z"), None);
    }
}
