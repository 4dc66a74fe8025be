//! The CRI log format containerd writes (`<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <content>`)
//! and what the kubelet makes of it for a reader: a partial (`P`) line's content is written
//! without a newline, so it joins the next; a full (`F`) line ends with one; `timestamps`
//! prefixes the first fragment of a line with the fixed-width time; lines before `since` are
//! skipped; output stops after `limitBytes`, cutting the last line. Unparsable lines are
//! skipped, as the kubelet skips them.

use jiff::Timestamp;

use super::options::LogOptions;

/// One parsed line of a CRI log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine<'a> {
    pub time: Timestamp,
    pub partial: bool,
    pub content: &'a [u8],
}

/// Parses one line (with or without its `\n`).
pub fn parse(line: &[u8]) -> Option<LogLine<'_>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut fields = line.splitn(4, |byte| *byte == b' ');
    let time = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let stream = fields.next()?;
    if stream != b"stdout" && stream != b"stderr" {
        return None;
    }
    let tags = fields.next()?;
    let partial = match tags.split(|byte| *byte == b':').next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    Some(LogLine {
        time,
        partial,
        content: fields.next().unwrap_or_default(),
    })
}

/// Turns parsed lines into the response's bytes, with the state a line depends on (whether
/// the previous one was partial, how many bytes went out).
#[derive(Debug)]
pub struct Renderer {
    timestamps: bool,
    since: Option<Timestamp>,
    remaining: Option<u64>,
    /// The last line written was a `P` fragment: the next continues it.
    in_partial: bool,
}

/// What to write for one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Rendered {
    Write(Vec<u8>),
    Skip,
    /// `limitBytes` is reached: write this (possibly empty) last piece, then stop.
    Last(Vec<u8>),
}

impl Renderer {
    pub fn new(options: &LogOptions) -> Self {
        Self {
            timestamps: options.timestamps,
            since: options.since,
            remaining: options.limit_bytes,
            in_partial: false,
        }
    }

    pub fn render(&mut self, raw: &[u8]) -> Rendered {
        let Some(line) = parse(raw) else {
            return Rendered::Skip;
        };
        if self.since.is_some_and(|since| line.time < since) {
            return Rendered::Skip;
        }
        let mut out = Vec::with_capacity(line.content.len() + 32);
        if self.timestamps && !self.in_partial {
            out.extend_from_slice(
                line.time
                    .strftime("%Y-%m-%dT%H:%M:%S.%9fZ ")
                    .to_string()
                    .as_bytes(),
            );
        }
        out.extend_from_slice(line.content);
        if !line.partial {
            out.push(b'\n');
        }
        self.in_partial = line.partial;
        match &mut self.remaining {
            None => Rendered::Write(out),
            Some(remaining) => {
                let length = out.len() as u64;
                if length < *remaining {
                    *remaining -= length;
                    Rendered::Write(out)
                } else {
                    out.truncate(usize::try_from(*remaining).unwrap_or(usize::MAX));
                    *remaining = 0;
                    Rendered::Last(out)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_all(options: &LogOptions, lines: &[&str]) -> String {
        let mut renderer = Renderer::new(options);
        let mut out = Vec::new();
        for line in lines {
            match renderer.render(line.as_bytes()) {
                Rendered::Write(bytes) => out.extend(bytes),
                Rendered::Skip => {}
                Rendered::Last(bytes) => {
                    out.extend(bytes);
                    break;
                }
            }
        }
        String::from_utf8(out).expect("utf-8")
    }

    const LINES: &[&str] = &[
        "2026-12-01T10:00:00.5Z stdout F first\n",
        "2026-12-01T10:00:01.000000001Z stderr P par\n",
        "2026-12-01T10:00:02Z stderr F tial\n",
        "not a log line\n",
        "2026-12-01T10:00:03Z stdout F \n",
        "2026-12-01T10:00:04Z stdout F:x last\n",
    ];

    #[test]
    fn partial_lines_join_and_full_lines_end() {
        assert_eq!(
            render_all(&LogOptions::default(), LINES),
            "first\npartial\n\nlast\n"
        );
    }

    #[test]
    fn timestamps_prefix_the_first_fragment_in_fixed_width() {
        let options = LogOptions {
            timestamps: true,
            ..LogOptions::default()
        };
        assert_eq!(
            render_all(&options, &LINES[..3]),
            "2026-12-01T10:00:00.500000000Z first\n2026-12-01T10:00:01.000000001Z partial\n"
        );
    }

    #[test]
    fn since_skips_earlier_lines_and_limit_bytes_cuts_the_last() {
        let since = LogOptions {
            since: Some("2026-12-01T10:00:02Z".parse().expect("time")),
            ..LogOptions::default()
        };
        assert_eq!(render_all(&since, LINES), "tial\n\nlast\n");
        let limited = LogOptions {
            limit_bytes: Some(8),
            ..LogOptions::default()
        };
        assert_eq!(render_all(&limited, LINES), "first\npa");
        let one = LogOptions {
            limit_bytes: Some(1),
            ..LogOptions::default()
        };
        assert_eq!(render_all(&one, LINES), "f");
    }
}
