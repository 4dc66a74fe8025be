//! Durations written the way the kubelet's configuration writes them (Go's `time.Duration`
//! syntax): `10s`, `100ms`, `1m30s`, `1.5h`. Negative durations are refused: no nodepulse
//! setting means anything below zero.

use std::{fmt, str::FromStr, time::Duration};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A non-negative duration parsed from Go syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoDuration(pub Duration);

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration: write a number with a unit, such as 10s")]
    Empty,
    #[error("negative duration {0:?}: durations must be zero or more")]
    Negative(String),
    #[error("missing unit in duration {0:?}: add one of ns, us, ms, s, m, h (as in 10s)")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {text:?}: use ns, us, ms, s, m or h")]
    UnknownUnit { text: String, unit: String },
    #[error("invalid duration {0:?}: expected numbers with units, such as 1m30s")]
    Malformed(String),
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let unsigned = match trimmed.as_bytes().first() {
            None => return Err(DurationError::Empty),
            Some(b'-') => return Err(DurationError::Negative(text.to_owned())),
            Some(b'+') => &trimmed[1..],
            Some(_) => trimmed,
        };
        if unsigned == "0" {
            return Ok(Self(Duration::ZERO));
        }
        let mut rest = unsigned;
        let mut total_nanos: f64 = 0.0;
        if rest.is_empty() {
            return Err(DurationError::Malformed(text.to_owned()));
        }
        while !rest.is_empty() {
            let number_end = rest
                .find(|character: char| !(character.is_ascii_digit() || character == '.'))
                .unwrap_or(rest.len());
            let (number, after_number) = rest.split_at(number_end);
            if number.is_empty() || number == "." || number.matches('.').count() > 1 {
                return Err(DurationError::Malformed(text.to_owned()));
            }
            let unit_end = after_number
                .find(|character: char| character.is_ascii_digit() || character == '.')
                .unwrap_or(after_number.len());
            let (unit, after_unit) = after_number.split_at(unit_end);
            let nanos_per_unit = match unit {
                "" => return Err(DurationError::MissingUnit(text.to_owned())),
                "ns" => 1.0,
                "us" | "µs" | "μs" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                "m" => 60e9,
                "h" => 3600e9,
                other => {
                    return Err(DurationError::UnknownUnit {
                        text: text.to_owned(),
                        unit: other.to_owned(),
                    });
                }
            };
            let value: f64 = number
                .parse()
                .map_err(|_| DurationError::Malformed(text.to_owned()))?;
            total_nanos += value * nanos_per_unit;
            rest = after_unit;
        }
        // u64 nanoseconds cover about 584 years, far beyond any sensible setting.
        if !total_nanos.is_finite() || total_nanos > u64::MAX as f64 {
            return Err(DurationError::Overflow(text.to_owned()));
        }
        Ok(Self(Duration::from_nanos(total_nanos.round() as u64)))
    }
}

impl fmt::Display for GoDuration {
    /// Go's own rendering: `1h2m3.5s`, `250ms`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < 1_000_000_000 {
            return match nanos {
                n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
                n if n % 1_000 == 0 => write!(f, "{}us", n / 1_000),
                n => write!(f, "{n}ns"),
            };
        }
        let hours = nanos / 3_600_000_000_000;
        let minutes = nanos / 60_000_000_000 % 60;
        let second_nanos = nanos % 60_000_000_000;
        if hours > 0 {
            write!(f, "{hours}h")?;
        }
        if hours > 0 || minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        let seconds = second_nanos / 1_000_000_000;
        let fraction = second_nanos % 1_000_000_000;
        if fraction == 0 {
            write!(f, "{seconds}s")
        } else {
            let digits = format!("{fraction:09}");
            write!(f, "{seconds}.{}s", digits.trim_end_matches('0'))
        }
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = GoDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"10s\" or \"1m30s\"")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<GoDuration, E> {
                text.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl From<GoDuration> for Duration {
    fn from(value: GoDuration) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Duration, DurationError> {
        text.parse::<GoDuration>().map(|duration| duration.0)
    }

    #[test]
    fn accepts_the_kubelet_syntax() {
        let cases = [
            ("10s", Duration::from_secs(10)),
            ("5m", Duration::from_secs(300)),
            ("1m30s", Duration::from_secs(90)),
            ("100ms", Duration::from_millis(100)),
            ("1.5h", Duration::from_secs(5400)),
            ("2h45m10.5s", Duration::from_millis(9_910_500)),
            ("250us", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("0", Duration::ZERO),
            ("+3s", Duration::from_secs(3)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn refuses_with_the_reason() {
        assert_eq!(parse("-5s"), Err(DurationError::Negative("-5s".into())));
        assert_eq!(parse("10"), Err(DurationError::MissingUnit("10".into())));
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert_eq!(
            parse("10x"),
            Err(DurationError::UnknownUnit {
                text: "10x".into(),
                unit: "x".into()
            })
        );
        assert_eq!(parse("s"), Err(DurationError::Malformed("s".into())));
        assert_eq!(
            parse("1..5s"),
            Err(DurationError::Malformed("1..5s".into()))
        );
        assert_eq!(
            parse("99999999999h"),
            Err(DurationError::Overflow("99999999999h".into()))
        );
    }

    #[test]
    fn renders_like_go() {
        for (text, rendered) in [
            ("90s", "1m30s"),
            ("100ms", "100ms"),
            ("1h0m1.5s", "1h0m1.5s"),
            ("0s", "0s"),
            ("40s", "40s"),
        ] {
            assert_eq!(
                parse(text).map(|d| GoDuration(d).to_string()),
                Ok(rendered.to_owned())
            );
        }
    }
}
