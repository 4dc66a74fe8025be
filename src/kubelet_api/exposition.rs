//! The Prometheus text exposition (0.0.4) as the Go client writes it for the kubelet's
//! registries: families sorted by name, each with its `# HELP` and `# TYPE`, samples sorted by
//! their labels (given sorted by name), an explicit millisecond timestamp where the family
//! has one; a family without samples is left out.

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
            let _ = write!(text, " {value}");
            if let Some(timestamp) = timestamp {
                let _ = write!(text, " {timestamp}");
            }
            text.push('\n');
        }
    }
    text
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
