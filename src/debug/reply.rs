//! The answers the routes build: JSON, text and redirects, as complete bodies (every answer
//! is small and computed at once, so nothing streams).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

/// One complete answer.
pub type Reply = Response<Full<Bytes>>;

/// `body` with its content type.
pub fn with_type(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
    let mut reply = Response::new(Full::new(body.into()));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    reply
}

/// `value` as JSON.
pub fn json(status: StatusCode, value: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(value) {
        Ok(body) => with_type(status, "application/json", body),
        // Only a map with non-string keys fails to serialise; none of ours has one.
        Err(error) => with_type(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("cannot encode the answer: {error}"),
        ),
    }
}

/// `308 Permanent Redirect` to `location`.
pub fn redirect(location: &'static str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::new()));
    *reply.status_mut() = StatusCode::PERMANENT_REDIRECT;
    reply
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    reply
}
