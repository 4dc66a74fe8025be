//! `/healthz` as the kubelet's healthz handler answers it: the named checks `ping`, `log` and
//! `syncloop` (here: the node's supervisor has no failed or long-down actor), `?verbose`,
//! `?exclude=<name>`, and `/healthz/<name>` for one check. The plain-HTTP listener serves only
//! `ping`, as the kubelet's 10248 mux does.

use std::sync::Arc;

use http::StatusCode;

use super::reply::{self, Reply};

/// The node's problems (empty while healthy), for `syncloop`.
pub type Problems = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// One check: its name and what it says now.
// String error: only ever shown as text (log, 500 body), joined from many actors' problems.
type Check<'a> = (&'static str, Box<dyn Fn() -> Result<(), String> + 'a>);

fn checks(problems: Option<&Problems>) -> Vec<Check<'_>> {
    let mut checks: Vec<Check<'_>> = vec![("ping", Box::new(|| Ok(())))];
    if let Some(problems) = problems {
        checks.push(("log", Box::new(|| Ok(()))));
        checks.push((
            "syncloop",
            Box::new(move || match problems().as_slice() {
                [] => Ok(()),
                found => Err(found.join("; ")),
            }),
        ));
    }
    checks
}

/// Answers `path` (`/healthz` or `/healthz/<check>`) with `query`; `None` for another path.
pub fn answer(path: &str, query: &str, problems: Option<&Problems>) -> Option<Reply> {
    let checks = checks(problems);
    let rest = path.strip_prefix("/healthz")?;
    if !matches!(rest, "" | "/") {
        let name = rest.strip_prefix('/')?;
        let (_, check) = checks.iter().find(|(check, _)| *check == name)?;
        return Some(match check() {
            Ok(()) => reply::text(StatusCode::OK, "ok"),
            Err(reason) => reply::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("internal server error: {reason}"),
            ),
        });
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let verbose = pairs.iter().any(|(key, _)| key == "verbose");
    let excluded: Vec<&str> = pairs
        .iter()
        .filter(|(key, _)| key == "exclude")
        .map(|(_, value)| value.as_str())
        .collect();
    let mut lines = String::new();
    let mut failed = false;
    for (name, check) in &checks {
        if excluded.contains(name) {
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match check() {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                tracing::info!(check = name, %reason, "healthz check failed");
                failed = true;
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    Some(if failed {
        reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("{lines}healthz check failed"),
        )
    } else if verbose {
        reply::text(StatusCode::OK, format!("{lines}healthz check passed\n"))
    } else {
        reply::text(StatusCode::OK, "ok")
    })
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn body(reply: Reply) -> (u16, String) {
        let status = reply.status().as_u16();
        let bytes = reply.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn the_named_checks_answer_as_the_kubelets() {
        let healthy: Problems = Arc::new(Vec::new);
        let answer_for = |path: &str, query: &str, problems: &Problems| {
            answer(path, query, Some(problems)).expect("served")
        };
        assert_eq!(
            body(answer_for("/healthz", "", &healthy)).await,
            (200, "ok".into())
        );
        assert_eq!(
            body(answer_for("/healthz", "verbose", &healthy)).await,
            (
                200,
                "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n".into()
            )
        );
        let failing: Problems = Arc::new(|| vec!["actor lease escalated".to_owned()]);
        assert_eq!(
            body(answer_for("/healthz", "", &failing)).await,
            (
                500,
                "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"
                    .into()
            )
        );
        assert_eq!(
            body(answer_for("/healthz", "exclude=syncloop", &failing)).await,
            (200, "ok".into())
        );
        assert_eq!(
            body(answer_for("/healthz/ping", "", &failing)).await,
            (200, "ok".into())
        );
        assert_eq!(
            body(answer_for("/healthz/syncloop", "", &failing)).await.0,
            500
        );
        assert!(answer("/healthz/nothing", "", Some(&healthy)).is_none());
        assert!(answer("/healthzx", "", Some(&healthy)).is_none());
    }
}
