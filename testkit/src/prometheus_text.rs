//! The Prometheus text format (0.0.4) as the kubelet writes it, read strictly for the tests:
//! families with their `# HELP` and `# TYPE`, samples with their labels, value and timestamp;
//! a malformed line fails the test.

use std::collections::BTreeMap;

/// One sample of the text exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's own name: the family's, or with a histogram's `_bucket`, `_sum`, `_count`.
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    pub timestamp: Option<i64>,
}

/// One family: its `# TYPE` and its samples.
#[derive(Debug, Default)]
pub struct Family {
    pub kind: Option<String>,
    pub help: Option<String>,
    pub samples: Vec<Sample>,
}

/// A strict parser of the Prometheus text format (0.0.4) for what the kubelet writes: a
/// malformed line fails the test.
pub fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        if let Some(rest) = line.strip_prefix("# ") {
            let (keyword, rest) = rest.split_once(' ').expect("a comment keyword");
            let (name, text) = rest.split_once(' ').expect("a name and its text");
            let family = families.entry(name.to_owned()).or_default();
            match keyword {
                "TYPE" => family.kind = Some(text.to_owned()),
                "HELP" => family.help = Some(text.to_owned()),
                other => panic!("unknown comment {other:?} in {line:?}"),
            }
            continue;
        }
        let (name, labels, rest) = match line.split_once('{') {
            Some((name, rest)) => {
                let (labels, rest) = rest.split_once('}').expect("closed labels");
                (name, labels, rest)
            }
            None => {
                let (name, rest) = line.split_once(' ').expect("a value");
                (name, "", rest)
            }
        };
        let labels = labels
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').expect("label=value");
                let value = value
                    .strip_prefix('"')
                    .and_then(|value| value.strip_suffix('"'))
                    .expect("a quoted label value");
                (key.to_owned(), value.to_owned())
            })
            .collect();
        let mut fields = rest.split_whitespace();
        let value = fields.next().expect("a value").parse().expect("a float");
        let timestamp = fields
            .next()
            .map(|ms| ms.parse().expect("integer milliseconds"));
        assert!(fields.next().is_none(), "trailing fields in {line:?}");
        let family_name = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|suffix| name.strip_suffix(suffix))
            .find(|family| {
                families
                    .get(*family)
                    .is_some_and(|f| f.kind.as_deref() == Some("histogram"))
            })
            .unwrap_or(name);
        let family = families.get_mut(family_name).unwrap_or_else(|| {
            panic!("sample {line:?} before its family's # TYPE");
        });
        family.samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
            timestamp,
        });
    }
    families
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

/// The one sample of `family` with exactly `wanted` labels.
pub fn sample<'a>(
    families: &'a BTreeMap<String, Family>,
    family: &str,
    wanted: &BTreeMap<String, String>,
) -> Option<&'a Sample> {
    families
        .get(family)?
        .samples
        .iter()
        .find(|sample| &sample.labels == wanted)
}

/// The series `text` writes more than once (its name and labels; a scraper keeps one).
pub fn written_twice(text: &str) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let series = text
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'));
    let series = series.map(|line| match line.rfind('}') {
        Some(end) => &line[..=end],
        None => line.split(' ').next().unwrap_or(line),
    });
    series
        .filter(|series| !seen.insert(*series))
        .map(str::to_owned)
        .collect()
}
