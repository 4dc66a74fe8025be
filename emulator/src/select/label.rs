//! Label selectors (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`), parsed once per
//! request and matched against `metadata.labels`.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter. The error text is the reason for a 400.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether an object with `labels` (a JSON map or absent) satisfies every requirement.
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// Splits on commas that are not inside a parenthesised value set.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(valid_key(key.trim())?));
    }
    for (op, is_in) in [(" notin ", false), (" in ", true)] {
        if let Some(at) = part.find(op) {
            let key = valid_key(part[..at].trim())?;
            let set = part[at + op.len()..].trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| {
                    format!("unable to parse requirement: found '{set}', expected: '('")
                })?;
            let values = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            return Ok(if is_in {
                Requirement::In(key, values)
            } else {
                Requirement::NotIn(key, values)
            });
        }
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(
            valid_key(key.trim())?,
            value.trim().to_string(),
        ));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(
            valid_key(key.trim())?,
            value.trim().to_string(),
        ));
    }
    Ok(Requirement::Exists(valid_key(part)?))
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!(
            "unable to parse requirement: invalid label key {key:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_operator_matches_like_kubernetes() {
        let labels = json!({"app": "web", "tier": "front"});
        let m = |s: &str| {
            LabelSelector::parse(s)
                .expect("valid selector")
                .matches(Some(&labels))
        };
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("missing!=x"));
        assert!(m("tier in (front, back)"));
        assert!(!m("tier notin (front)"));
        assert!(m("missing notin (x)"));
        assert!(!m("missing in (x)"));
        assert!(m("!missing"));
        assert!(!m("!app"));
        assert!(m(""));
    }

    #[test]
    fn malformed_selectors_are_rejected() {
        assert!(LabelSelector::parse("a in x").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }
}
