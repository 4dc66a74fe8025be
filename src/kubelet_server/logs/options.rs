//! `/containerLogs` query parameters decoded as the kubelet decodes `v1.PodLogOptions`:
//! booleans are true for anything but absent, `0` or `false`; `tail` is the legacy alias of
//! `tailLines` (`all` = unset); the kubelet's 400 and 422 bodies for what does not decode or
//! validate. Every number an `int64` holds is taken, none overflows: a `sinceSeconds` further
//! back than time goes asks for every line.

use jiff::Timestamp;

/// What a request asks of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    /// Lines before this are skipped (the later of `sinceSeconds` and `sinceTime`).
    pub since: Option<Timestamp>,
    pub tail_lines: Option<u64>,
    pub limit_bytes: Option<u64>,
}

/// Why a query was refused: the status and the kubelet's JSON-looking body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub body: String,
}

fn undecodable() -> Refusal {
    Refusal {
        status: 400,
        body: r#"{"message": "Unable to decode query."}"#.to_owned(),
    }
}

fn invalid() -> Refusal {
    Refusal {
        status: 422,
        body: r#"{"message": "Invalid request."}"#.to_owned(),
    }
}

fn flag(value: &str) -> bool {
    !matches!(value, "" | "0" | "false" | "False" | "FALSE" | "f" | "F")
}

/// Decodes `query` at `now` (for `sinceSeconds`).
pub fn parse(query: &str, now: Timestamp) -> Result<LogOptions, Refusal> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query).map_err(|_| undecodable())?;
    // The last value wins, as url.Values' decoding into a scalar does.
    let last = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    };
    let number = |key: &str| -> Result<Option<i64>, Refusal> {
        last(key)
            .map(|value| value.parse::<i64>().map_err(|_| undecodable()))
            .transpose()
    };
    let tail_lines = match (number("tailLines")?, last("tail")) {
        (Some(lines), _) => Some(lines),
        (None, Some("all") | None) => None,
        (None, Some(value)) => Some(value.parse::<i64>().map_err(|_| undecodable())?),
    };
    let since_seconds = number("sinceSeconds")?;
    let since_time = last("sinceTime")
        .map(|value| value.parse::<Timestamp>().map_err(|_| undecodable()))
        .transpose()?;
    let limit_bytes = number("limitBytes")?;
    if let Some(stream) = last("stream")
        && stream != "All"
    {
        return Err(Refusal {
            status: 400,
            body: format!(
                "unable to return the given log stream: {stream:?}. Please enable PodLogsQuerySplitStreams feature gate in kubelet"
            ),
        });
    }
    if tail_lines.is_some_and(|lines| lines < 0)
        || limit_bytes.is_some_and(|bytes| bytes < 1)
        || since_seconds.is_some_and(|seconds| seconds < 1)
        || (since_seconds.is_some() && since_time.is_some())
    {
        return Err(invalid());
    }
    let since = match (since_seconds, since_time) {
        // Further back than time goes (up to `i64::MAX` seconds): every line is newer.
        (Some(seconds), _) => Some(
            now.checked_sub(jiff::SignedDuration::from_secs(seconds))
                .unwrap_or(Timestamp::MIN),
        ),
        (None, time) => time,
    };
    Ok(LogOptions {
        follow: last("follow").is_some_and(flag),
        previous: last("previous").is_some_and(flag),
        timestamps: last("timestamps").is_some_and(flag),
        since,
        tail_lines: tail_lines.and_then(|lines| u64::try_from(lines).ok()),
        limit_bytes: limit_bytes.and_then(|bytes| u64::try_from(bytes).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("time")
    }

    #[test]
    fn every_parameter_decodes_as_the_kubelets() {
        let options = parse(
            "follow=true&previous=1&timestamps=yes&tailLines=3&limitBytes=10&sinceSeconds=60",
            at(1000),
        )
        .expect("valid");
        assert_eq!(
            options,
            LogOptions {
                follow: true,
                previous: true,
                timestamps: true,
                since: Some(at(940)),
                tail_lines: Some(3),
                limit_bytes: Some(10),
            }
        );
        assert_eq!(
            parse("follow=false&previous=0&tail=all", at(0)).expect("valid"),
            LogOptions::default()
        );
        assert_eq!(parse("tail=2", at(0)).expect("valid").tail_lines, Some(2));
        assert_eq!(
            parse("sinceTime=1970-01-01T00:10:00Z", at(0))
                .expect("valid")
                .since,
            Some(at(600))
        );
    }

    #[test]
    fn every_int64_is_taken_at_its_boundaries_and_past_them_is_400() {
        let now = at(1_000_000);
        let max = i64::MAX;
        let options = parse(
            &format!("sinceSeconds={max}&tailLines={max}&limitBytes={max}"),
            now,
        )
        .expect("valid");
        assert_eq!(options.since, Some(Timestamp::MIN), "every line");
        assert_eq!(options.tail_lines, Some(max.unsigned_abs()));
        assert_eq!(options.limit_bytes, Some(max.unsigned_abs()));
        let ones = parse("sinceSeconds=1&tailLines=0&limitBytes=1", now).expect("valid");
        assert_eq!(
            (ones.since, ones.tail_lines, ones.limit_bytes),
            (Some(at(999_999)), Some(0), Some(1))
        );
        assert_eq!(
            parse(&format!("tail={max}"), now)
                .expect("valid")
                .tail_lines,
            Some(max.unsigned_abs())
        );
        for name in ["sinceSeconds", "tailLines", "limitBytes", "tail"] {
            for past in ["9223372036854775808", "-9223372036854775809", "1e3", " 1"] {
                assert_eq!(
                    parse(&format!("{name}={past}"), now).map(|_| ()),
                    Err(undecodable()),
                    "{name}={past}"
                );
            }
            assert_eq!(
                parse(&format!("{name}={}", i64::MIN), now).map(|_| ()),
                Err(invalid()),
                "{name}=MIN"
            );
        }
    }

    #[test]
    fn what_does_not_decode_is_400_and_what_does_not_validate_422() {
        for query in ["tailLines=x", "sinceTime=yesterday", "limitBytes=1.5"] {
            assert_eq!(
                parse(query, at(0)).map(|_| ()),
                Err(undecodable()),
                "{query}"
            );
        }
        for query in [
            "tailLines=-1",
            "limitBytes=0",
            "sinceSeconds=0",
            "sinceSeconds=5&sinceTime=1970-01-01T00:00:00Z",
        ] {
            assert_eq!(parse(query, at(0)).map(|_| ()), Err(invalid()), "{query}");
        }
        let stream = parse("stream=Stdout", at(0)).expect_err("off");
        assert_eq!(stream.status, 400);
        assert!(
            stream.body.contains("PodLogsQuerySplitStreams"),
            "{}",
            stream.body
        );
    }
}
