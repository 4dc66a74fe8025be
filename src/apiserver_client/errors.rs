//! kube-rs errors in the terms the actors decide on, and the heartbeat timeout around a call.

use std::{future::Future, sync::Arc, time::Duration};

use nodepulse_actors::ports::{ApiError, ApiResult};

/// Maps a kube-rs error: 404 → NotFound, 409 AlreadyExists / Conflict, another status →
/// Refused with its code, reason and message, a body that does not decode → Decode, and
/// everything else (connect, TLS, HTTP) → Transport, named with its causes and kept as source.
pub fn from_kube(error: kube::Error) -> ApiError {
    match error {
        kube::Error::Api(status) => match (status.code, status.reason.as_str()) {
            (404, _) => ApiError::NotFound(status.message),
            (409, "AlreadyExists") => ApiError::AlreadyExists(status.message),
            (409, _) => ApiError::Conflict(status.message),
            (code, _) => ApiError::Refused {
                code,
                reason: status.reason,
                message: status.message,
            },
        },
        kube::Error::SerdeError(error) => ApiError::decode(error),
        other => ApiError::Transport {
            message: with_causes(&other),
            source: Arc::new(other),
        },
    }
}

/// The error and every cause under it (`client error (Connect): invalid peer certificate:
/// UnknownIssuer`): kube-rs's own message stops at the outermost layer, which rarely says what
/// went wrong with a connection.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let message = inner.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        cause = inner.source();
    }
    text
}

/// Runs `call`, giving up after `timeout` (the request is dropped, and with it the connection's
/// part in it). The end of `timeout` is also the deadline a `Retry-After` is weighed against
/// (see `retry_after`): a wait that would outlast it is not started.
pub async fn timed<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> ApiResult<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    let call = super::retry_after::with_deadline(deadline, call);
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result.map_err(from_kube),
        Err(_) => Err(ApiError::Timeout(timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_connection_error_names_its_causes() {
        let error = Outer(std::io::Error::other(
            "invalid peer certificate: UnknownIssuer",
        ));
        assert_eq!(
            with_causes(&error),
            "client error (Connect): invalid peer certificate: UnknownIssuer"
        );
    }

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("the message", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn statuses_map_to_what_the_actors_decide_on() {
        assert!(
            matches!(from_kube(status(404, "NotFound")), ApiError::NotFound(m) if m == "the message")
        );
        assert!(matches!(
            from_kube(status(409, "AlreadyExists")),
            ApiError::AlreadyExists(_)
        ));
        assert!(matches!(
            from_kube(status(409, "Conflict")),
            ApiError::Conflict(_)
        ));
        let invalid = from_kube(status(422, "Invalid"));
        assert_eq!(invalid.to_string(), "422 Invalid: the message");
        assert!(!invalid.is_retryable(), "the same write is invalid again");
        let throttled = from_kube(status(429, "TooManyRequests"));
        assert!(matches!(throttled, ApiError::Refused { code: 429, .. }));
        assert!(throttled.is_retryable());
    }

    #[test]
    fn a_body_that_does_not_decode_and_a_broken_connection_keep_their_source() {
        use std::error::Error as _;

        let serde = serde_json::from_str::<u32>("{}").expect_err("not a number");
        let decode = from_kube(kube::Error::SerdeError(serde));
        assert!(matches!(decode, ApiError::Decode(_)));
        assert!(decode.source().is_some());

        let io = std::io::Error::other("connection reset by peer");
        let transport = from_kube(kube::Error::ReadEvents(io));
        assert!(transport.is_retryable());
        assert!(
            transport.to_string().contains("connection reset by peer"),
            "{transport}"
        );
        assert!(transport.source().is_some(), "the kube error is the source");
    }
}
