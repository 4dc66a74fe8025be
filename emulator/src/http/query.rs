//! Query parameters of list, watch, write and delete requests.

use std::collections::HashMap;
use std::time::Duration;

use crate::api::{ApiError, ApiResource};
use crate::select::{FieldSelector, LabelSelector, Selector};

/// The decoded query string.
#[derive(Debug, Default)]
pub struct Query {
    params: HashMap<String, String>,
}

impl Query {
    /// Parses a raw query string; malformed encodings are a 400 like in kube-apiserver.
    pub fn parse(raw: &str) -> Result<Query, ApiError> {
        let params = actix_web::web::Query::<HashMap<String, String>>::from_query(raw)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?
            .into_inner();
        Ok(Query { params })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// `watch=true` (or `watch=1`).
    pub fn watch(&self) -> bool {
        self.flag("watch")
    }

    /// Both selectors, validated against the resource's field labels.
    pub fn selector(&self, resource: &ApiResource) -> Result<Selector, ApiError> {
        let labels = LabelSelector::parse(self.get("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(self.get("fieldSelector").unwrap_or(""), resource)
            .map_err(ApiError::bad_request)?;
        Ok(Selector { labels, fields })
    }

    /// A numeric query parameter; an unparsable one is a 400.
    pub fn number(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid value for {key}: {v:?}")))
            })
            .transpose()
    }

    /// `timeoutSeconds` as a duration.
    pub fn timeout(&self) -> Result<Option<Duration>, ApiError> {
        Ok(self
            .number("timeoutSeconds")?
            .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0))))
    }
}

/// The continue token of a paginated list: the revision of the first page and the last key sent.
/// Opaque to clients (hex of `rv/namespace/name`).
pub fn encode_continue(revision: u64, namespace: &str, name: &str) -> String {
    format!("{revision}/{namespace}/{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decodes [`encode_continue`]; a token that does not decode is a 400 as in kube-apiserver.
pub fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    if !token.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let bytes: Result<Vec<u8>, _> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect();
    let text = String::from_utf8(bytes.map_err(|_| invalid())?).map_err(|_| invalid())?;
    let mut parts = text.splitn(3, '/');
    let revision = parts
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or_else(invalid)?;
    let namespace = parts.next().ok_or_else(invalid)?.to_string();
    let name = parts.next().ok_or_else(invalid)?.to_string();
    Ok((revision, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_garbage_is_rejected() {
        let token = encode_continue(42, "default", "pod-a");
        assert_eq!(
            decode_continue(&token).ok(),
            Some((42, "default".into(), "pod-a".into()))
        );
        assert_eq!(decode_continue("zz").map_err(|e| e.code), Err(400));
    }
}
