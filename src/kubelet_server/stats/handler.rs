//! `/stats/summary` (GET and POST, as the kubelet's): the Summary as JSON, the reduced form
//! for `?only_cpu_and_memory=true` (exactly one value, `true`), and `500 Internal Error: …`
//! when the query does not decode or the figures cannot be read.

use http::StatusCode;

use super::{Scope, collect};
use crate::kubelet_server::reply::{self, Reply};

/// The scope a query asks for: the kubelet reads `only_cpu_and_memory` as a bool only when it
/// is given once.
pub fn scope(query: &str) -> Result<Scope, serde_urlencoded::de::Error> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)?;
    let values: Vec<&str> = (pairs.iter())
        .filter(|(key, _)| key == "only_cpu_and_memory")
        .map(|(_, value)| value.as_str())
        .collect();
    Ok(match values.as_slice() {
        ["true"] => Scope::CpuAndMemory,
        _ => Scope::Full,
    })
}

pub async fn summary(state: &crate::kubelet_server::ApiState, query: &str) -> Reply {
    let scope = match scope(query) {
        Ok(scope) => scope,
        Err(error) => {
            return reply::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Error: parse form failed: {error}"),
            );
        }
    };
    match collect(state, scope).await {
        Ok(summary) => reply::json(StatusCode::OK, &summary),
        // go-restful's WriteErrorString: the text alone, no newline.
        Err(error) => reply::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Internal Error: {error}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_only_cpu_and_memory_true_reduces_the_summary() {
        for (query, expected) in [
            ("", Scope::Full),
            ("only_cpu_and_memory=true", Scope::CpuAndMemory),
            ("only_cpu_and_memory=false", Scope::Full),
            ("only_cpu_and_memory=1", Scope::Full),
            (
                "only_cpu_and_memory=true&only_cpu_and_memory=true",
                Scope::Full,
            ),
        ] {
            assert_eq!(scope(query).expect("decodes"), expected, "{query:?}");
        }
    }
}
