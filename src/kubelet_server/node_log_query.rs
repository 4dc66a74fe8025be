//! The node log query (`/logs/?query=…`, with `enableSystemLogQuery`) as the kubelet's
//! `newNodeLogQuery` decodes it and `validate` checks it: `query` (repeatable; with `/` or `\`
//! a file under the log directory, otherwise a service), `sinceTime`/`untilTime` (RFC 3339),
//! `tailLines`, `boot`, `pattern`; the first value of each counts. Errors read as apimachinery's
//! field errors, aggregated. Pure but for the one `stat` of a queried file.

use std::path::Path;

use jiff::{Timestamp, civil::DateTime};
use nodepulse_validation::FieldError;

use super::go_regexp;
use rustix::fs::{Mode, OFlags, ResolveFlags};

/// The kubelet's bounds.
const MAX_TAIL_LINES: i64 = 100_000;
const MAX_SERVICE_LENGTH: usize = 256;
const MAX_SERVICES: usize = 4;

/// A decoded query: services (journald units, or files by the kubelet's heuristics) or one
/// file, and the options that apply to services.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLogQuery {
    pub services: Vec<String>,
    pub files: Vec<String>,
    pub options: QueryOptions,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOptions {
    pub since_time: Option<WallTime>,
    pub until_time: Option<WallTime>,
    pub tail_lines: Option<i64>,
    pub boot: Option<i64>,
    pub pattern: String,
}

/// An RFC 3339 time as Go keeps it: the instant, and the wall clock in the offset it was
/// written with (what `--since` is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallTime {
    pub instant: Timestamp,
    pub wall: DateTime,
    /// Seconds east of UTC; `None` for `Z`.
    pub offset: Option<i32>,
}

impl WallTime {
    /// Go's `2006-1-2 15:4:5` layout, which journalctl reads: no zero padding.
    pub fn journal(&self) -> String {
        let wall = self.wall;
        format!(
            "{}-{}-{} {}:{}:{}",
            wall.year(),
            wall.month(),
            wall.day(),
            wall.hour(),
            wall.minute(),
            wall.second()
        )
    }

    /// Go's `time.Time.String()`: `2006-01-02 15:04:05.999999999 -0700 MST`.
    fn go_string(&self) -> String {
        let fraction = match self.wall.subsec_nanosecond() {
            0 => String::new(),
            nanos => format!(".{nanos:09}").trim_end_matches('0').to_owned(),
        };
        let offset = self.offset.unwrap_or(0);
        let (sign, minutes) = (if offset < 0 { '-' } else { '+' }, offset.abs() / 60);
        let numeric = format!("{sign}{:02}{:02}", minutes / 60, minutes % 60);
        let zone = if self.offset.is_none() {
            "UTC"
        } else {
            &numeric
        };
        let clock = self.wall.strftime("%Y-%m-%d %H:%M:%S");
        format!("{clock}{fraction} {numeric} {zone}")
    }
}

/// `newNodeLogQuery`: `Ok(None)` when the request asks nothing of it (then the log directory
/// is served as without a query); the field errors otherwise (a 400).
pub fn parse(query: &str) -> Result<Option<NodeLogQuery>, Vec<FieldError>> {
    let pairs: Vec<(String, String)> = query
        .split('&')
        // Go's `url.ParseQuery` skips a pair with a `;` (and one it cannot decode).
        .filter(|pair| !pair.is_empty() && !pair.contains(';'))
        .filter_map(|pair| serde_urlencoded::from_str::<Vec<(String, String)>>(pair).ok())
        .flatten()
        .collect();
    let first = |key: &str| {
        pairs
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    };
    let mut errors = Vec::new();
    let mut parsed = NodeLogQuery::default();
    let queries: Vec<&str> = (pairs.iter())
        .filter(|(name, _)| name == "query")
        .map(|(_, value)| value.as_str())
        .collect();
    for query in &queries {
        if query.contains(['/', '\\']) {
            parsed.files.push((*query).to_owned());
        } else if !query.trim().is_empty() {
            parsed.services.push((*query).to_owned());
        }
    }
    if !queries.is_empty() && parsed.files.is_empty() && parsed.services.is_empty() {
        errors.push(FieldError::invalid_shown(
            "query",
            &go_strings(&queries),
            "query cannot be empty",
        ));
    }
    for (name, slot) in [
        ("sinceTime", &mut parsed.options.since_time),
        ("untilTime", &mut parsed.options.until_time),
    ] {
        if let Some(value) = first(name) {
            match rfc3339(value) {
                Some(time) => *slot = Some(time),
                None => errors.push(FieldError::invalid(
                    name,
                    &value.into(),
                    "invalid time format",
                )),
            }
        }
    }
    for (name, slot) in [
        ("boot", &mut parsed.options.boot),
        ("tailLines", &mut parsed.options.tail_lines),
    ] {
        if let Some(value) = first(name) {
            match atoi(value) {
                Ok(number) => *slot = Some(number),
                Err(problem) => {
                    errors.push(FieldError::invalid(
                        name,
                        &value.into(),
                        &problem.to_string(),
                    ));
                }
            }
        }
    }
    parsed.options.pattern = first("pattern").unwrap_or_default().to_owned();
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((parsed != NodeLogQuery::default()).then_some(parsed))
}

impl NodeLogQuery {
    /// `validate`, with the queried file looked up under `log_dir` (never outside it).
    pub fn validate(&self, log_dir: &Path) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for service in &self.services {
            let problem = if service.len() > MAX_SERVICE_LENGTH {
                Some(format!("length must be less than {MAX_SERVICE_LENGTH}"))
            } else if !service
                .bytes()
                // `[a-zA-Z\-_.:0-9@]` (1.36 also allows `.` and `:`: `kubelet.service` is a name).
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'@'))
            {
                Some("input contains unsupported characters".to_owned())
            } else {
                None
            };
            if let Some(problem) = problem {
                errors.push(FieldError::invalid(
                    "query",
                    &service.as_str().into(),
                    &problem,
                ));
            }
        }
        if self.services.len() > MAX_SERVICES {
            errors.push(FieldError {
                reason: "FieldValueTooMany",
                field: "query".to_owned(),
                message: format!(
                    "Too many: {}: must have at most {MAX_SERVICES} items",
                    self.services.len()
                ),
            });
        }
        let files = go_strings(&self.files);
        match (self.files.as_slice(), self.services.is_empty()) {
            ([], true) => errors.push(FieldError::required(
                "query",
                "cannot be empty with options",
            )),
            ([_, ..], false) => errors.push(FieldError::invalid(
                "query",
                &format!("[{}], [{}]", self.files.join(" "), self.services.join(" ")).into(),
                "cannot specify a file and service",
            )),
            ([_, _, ..], true) => errors.push(FieldError::invalid_shown(
                "query",
                &files,
                "cannot specify more than one file",
            )),
            ([_], true) if self.options != QueryOptions::default() => {
                errors.push(FieldError::invalid_shown(
                    "query",
                    &files,
                    "cannot specify file with options",
                ));
            }
            ([file], true) => {
                if let Err(problem) = stat_within(log_dir, file).map_err(|e| e.to_string()) {
                    errors.push(FieldError::invalid_shown("query", &files, &problem));
                }
            }
            ([], false) => {}
        }
        let options = &self.options;
        if let (Some(since), Some(until)) = (options.since_time, options.until_time)
            && since.instant > until.instant
        {
            errors.push(FieldError::invalid_shown(
                "untilTime",
                &until.go_string(),
                "must be after `sinceTime`",
            ));
        }
        if let Some(boot) = options.boot.filter(|boot| *boot > 0) {
            errors.push(FieldError::invalid(
                "boot",
                &boot.into(),
                "must be less than 1",
            ));
        }
        if let Some(lines) = options
            .tail_lines
            .filter(|lines| !(0..=MAX_TAIL_LINES).contains(lines))
        {
            errors.push(FieldError::invalid(
                "tailLines",
                &lines.into(),
                &format!("must be between 0 and {MAX_TAIL_LINES}, inclusive"),
            ));
        }
        if let Err(message) = go_regexp::check(&options.pattern).map_err(|e| e.to_string()) {
            errors.push(FieldError::invalid(
                "pattern",
                &options.pattern.as_str().into(),
                &message,
            ));
        }
        errors
    }
}

/// `errs.ToAggregate().Error()`: one message, or `[a, b]`, each message once.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut messages: Vec<String> = Vec::new();
    for message in errors.iter().map(FieldError::render) {
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    match messages.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", messages.join(", ")),
    }
}

/// Go's `%#v` of a `[]string`.
fn go_strings(items: &[impl AsRef<str>]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{:?}", s.as_ref())).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// `strconv.Atoi`'s refusal, in its words.
#[derive(Debug, thiserror::Error)]
#[error("strconv.Atoi: parsing {value:?}: {}", atoi_reason(.source))]
pub struct AtoiError {
    value: String,
    #[source]
    source: std::num::ParseIntError,
}

fn atoi_reason(error: &std::num::ParseIntError) -> &'static str {
    match error.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
            "value out of range"
        }
        _ => "invalid syntax",
    }
}

/// `strconv.Atoi`.
fn atoi(value: &str) -> Result<i64, AtoiError> {
    value.parse::<i64>().map_err(|source| AtoiError {
        value: value.to_owned(),
        source,
    })
}

/// Go's `time.Parse(time.RFC3339, value)`: `2006-01-02T15:04:05[.frac](Z|±07:00)`.
fn rfc3339(value: &str) -> Option<WallTime> {
    let bytes = value.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i32> {
        let part = value.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if bytes.len() < 20 || separators.iter().any(|(at, c)| bytes[*at] != *c) {
        return None;
    }
    let mut rest = &value[19..];
    let mut nanos = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let length = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if length == 0 || length > 9 {
            return None;
        }
        nanos = fraction[..length].parse::<i32>().ok()? * 10_i32.pow(9 - length as u32);
        rest = &fraction[length..];
    }
    let offset = match rest {
        "Z" => None,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let tail = rest.as_bytes();
            if tail.len() != 6 || tail[3] != b':' {
                return None;
            }
            let hours: i32 = rest[1..3].parse().ok()?;
            let minutes: i32 = rest[4..6].parse().ok()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            Some(sign * (hours * 3600 + minutes * 60))
        }
    };
    let wall = jiff::civil::DateTime::new(
        i16::try_from(digits(0..4)?).ok()?,
        i8::try_from(digits(5..7)?).ok()?,
        i8::try_from(digits(8..10)?).ok()?,
        i8::try_from(digits(11..13)?).ok()?,
        i8::try_from(digits(14..16)?).ok()?,
        i8::try_from(digits(17..19)?).ok()?,
        nanos,
    )
    .ok()?;
    let zone = jiff::tz::Offset::from_seconds(offset.unwrap_or(0)).ok()?;
    let instant = zone.to_timestamp(wall).ok()?;
    Some(WallTime {
        instant,
        wall,
        offset,
    })
}

/// `os.Root.Stat`'s refusal, as Go prints it.
#[derive(Debug, thiserror::Error)]
#[error("statat {name}: {}", go_errno(*.errno))]
pub struct StatError {
    name: String,
    errno: rustix::io::Errno,
}

/// Go's `os.Root.Stat`: `name` under `root`, nothing outside it reached (a link out, or `..`
/// past the root, is an error).
fn stat_within(root: &Path, name: &str) -> Result<(), StatError> {
    let relative = name.trim_start_matches('/');
    let relative = if relative.is_empty() { "." } else { relative };
    let opened = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .and_then(|dir| {
        rustix::fs::openat2(
            &dir,
            relative,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        )
    })
    .and_then(|file| rustix::fs::fstat(&file).map(drop));
    opened.map_err(|errno| StatError {
        name: name.to_owned(),
        errno,
    })
}

/// An errno as Go's `syscall.Errno` prints it (lower case, no number); a path that leaves the
/// root as `os.Root` says it.
pub(super) fn go_errno(errno: rustix::io::Errno) -> String {
    if errno == rustix::io::Errno::XDEV {
        return "path escapes from parent".to_owned();
    }
    let text = std::io::Error::from(errno).to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "node_log_query_tests.rs"]
mod tests;
