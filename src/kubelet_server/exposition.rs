//! The Prometheus text exposition (0.0.4) as the Go client writes it for the kubelet's
//! registries: families sorted by name, each with its `# HELP` and `# TYPE`, samples sorted by
//! their labels (given sorted by name), an explicit millisecond timestamp where the family
//! has one; a family without samples is left out. [`Family`] holds a small registry's samples
//! before they are sorted; [`sample`] and [`family`] write a large one's straight into the
//! text (`/metrics/cadvisor`, `/metrics`), in the order the caller gives.

use std::fmt::Write as _;

use http::{HeaderValue, StatusCode, header};

use super::reply::{self, Reply};

/// The exposition type the Prometheus Go client answers a scraper without `Accept` with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Label pairs, sorted by name.
pub type Labels<'a> = Vec<(&'static str, &'a str)>;

pub struct Family<'a> {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: &'static str,
    /// Labels, value, timestamp (milliseconds).
    pub samples: Vec<(Labels<'a>, f64, Option<i64>)>,
}

/// The text of `families`.
pub fn write(families: &mut [Family<'_>]) -> String {
    families.sort_by_key(|family| family.name);
    let mut text = String::new();
    for family in families.iter().filter(|family| !family.samples.is_empty()) {
        let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
        let mut samples: Vec<_> = family.samples.iter().collect();
        samples.sort_by(|a, b| a.0.cmp(&b.0));
        for (labels, value, timestamp) in samples {
            text.push_str(family.name);
            if !labels.is_empty() {
                let pairs: Vec<String> = labels
                    .iter()
                    .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
                    .collect();
                let _ = write!(text, "{{{}}}", pairs.join(","));
            }
            text.push(' ');
            float(&mut text, *value);
            if let Some(timestamp) = timestamp {
                let _ = write!(text, " {timestamp}");
            }
            text.push('\n');
        }
    }
    text
}

/// A value as the text format writes it (`+Inf`, `-Inf`, `NaN` as the Go client spells them).
pub fn float(text: &mut String, value: f64) {
    if value.is_nan() {
        text.push_str("NaN");
    } else if value.is_infinite() {
        text.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(text, "{value}");
    }
}

/// One sample line: `name{labels} value [timestamp]`; `labels` sorted by name, empty values
/// written as the Go client writes them (`container=""`).
pub fn sample(
    text: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    value: f64,
    timestamp: Option<i64>,
) {
    text.push_str(name);
    if !labels.is_empty() {
        text.push('{');
        for (index, (label, value)) in labels.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            text.push_str(label);
            text.push_str("=\"");
            if value.contains(['\\', '"', '\n']) {
                text.push_str(&escape(value));
            } else {
                text.push_str(value);
            }
            text.push('"');
        }
        text.push('}');
    }
    text.push(' ');
    float(text, value);
    if let Some(timestamp) = timestamp {
        let _ = write!(text, " {timestamp}");
    }
    text.push('\n');
}

/// A family's `# HELP` and `# TYPE` and then its `samples` (lines [`sample`] wrote); nothing
/// for a family without samples.
pub fn family(text: &mut String, name: &str, help: &str, kind: &str, samples: &str) {
    if samples.is_empty() {
        return;
    }
    let _ = writeln!(text, "# HELP {name} {help}");
    let _ = writeln!(text, "# TYPE {name} {kind}");
    text.push_str(samples);
}

/// `text` as a scrape's answer.
pub fn reply(text: String) -> Reply {
    let mut reply = reply::text(StatusCode::OK, text);
    reply
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    reply
}

/// A label value as the text format escapes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
