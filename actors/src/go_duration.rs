//! Go's `time.Duration.String()`, truncated to milliseconds, for the kubelet's texts that
//! print durations (`Back-off 10s restarting…`, `Successfully pulled image … in 1.5s`, a probe's
//! `command timed out after 1s`): one writer, so every message agrees with the kubelet's.

use std::time::Duration;

/// `0s`, `512ms`, `1.5s`, `1m20s`, `5m0s`, `1h0m0s`.
pub fn go_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    if millis < 1000 {
        return format!("{millis}ms");
    }
    let (hours, minutes, seconds, fraction) = (
        millis / 3_600_000,
        millis / 60_000 % 60,
        millis / 1000 % 60,
        millis % 1000,
    );
    let mut text = String::new();
    if hours > 0 {
        text.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        text.push_str(&format!("{minutes}m"));
    }
    text.push_str(&seconds.to_string());
    if fraction > 0 {
        text.push_str(format!(".{fraction:03}").trim_end_matches('0'));
    }
    text.push('s');
    text
}

/// As Go's `time.Duration.String()` to the nanosecond (`3m0.512345678s`, `1.5µs`, `12ns`),
/// for messages where the kubelet prints a measured duration (the PLEG's last relist).
pub fn go_duration_exact(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return with_fraction(nanos / 1_000, nanos % 1_000, 3, "µs");
    }
    if nanos < 1_000_000_000 {
        return with_fraction(nanos / 1_000_000, nanos % 1_000_000, 6, "ms");
    }
    let seconds = nanos / 1_000_000_000;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    let mut text = String::new();
    if hours > 0 {
        text.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        text.push_str(&format!("{minutes}m"));
    }
    text + &with_fraction(seconds % 60, nanos % 1_000_000_000, 9, "s")
}

/// `whole.fraction` (`digits` wide, trailing zeros dropped) and `unit`.
fn with_fraction(whole: u128, fraction: u128, digits: usize, unit: &str) -> String {
    if fraction == 0 {
        return format!("{whole}{unit}");
    }
    let fraction = format!("{fraction:0digits$}");
    format!("{whole}.{}{unit}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_to_the_nanosecond_as_go_prints_it() {
        let cases = [
            (0, "0s"),
            (12, "12ns"),
            (1_500, "1.5µs"),
            (100_000_000, "100ms"),
            (1_000_001, "1.000001ms"),
            (180_000_000_000, "3m0s"),
            (180_500_000_000, "3m0.5s"),
            (180_512_345_678, "3m0.512345678s"),
            (7_384_000_000_005, "2h3m4.000000005s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(
                go_duration_exact(Duration::from_nanos(nanos)),
                text,
                "{nanos} ns"
            );
        }
    }

    #[test]
    fn prints_as_go_prints_it() {
        let cases = [
            (0, "0s"),
            (512, "512ms"),
            (1_000, "1s"),
            (1_500, "1.5s"),
            (10_000, "10s"),
            (80_000, "1m20s"),
            (90_000, "1m30s"),
            (123_040, "2m3.04s"),
            (300_000, "5m0s"),
            (3_600_000, "1h0m0s"),
        ];
        for (millis, text) in cases {
            assert_eq!(
                go_duration(Duration::from_millis(millis)),
                text,
                "{millis} ms"
            );
        }
    }
}
