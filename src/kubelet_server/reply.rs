//! The kubelet API's answers: plain-text bodies as Go's `http.Error` writes them, JSON, and
//! streamed bodies (logs) behind one boxed body type.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};

pub type Body = BoxBody<Bytes, std::io::Error>;
pub type Reply = Response<Body>;

pub fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

/// `text` with Go's sniffed type for it, as the kubelet's handlers answer without one.
pub fn text(status: StatusCode, text: impl Into<Bytes>) -> Reply {
    let mut reply = Response::new(full(text));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

/// Go's `http.Error`: the message and a newline, `X-Content-Type-Options: nosniff`.
pub fn error(status: StatusCode, message: &str) -> Reply {
    let mut reply = text(status, format!("{message}\n"));
    reply.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    reply
}

pub fn json(status: StatusCode, value: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(value) {
        Ok(body) => {
            let mut reply = Response::new(full(body));
            *reply.status_mut() = status;
            reply.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            reply
        }
        Err(failure) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("Internal Error: {failure}"),
        ),
    }
}

/// The kubelet's (go-restful's) answer for a path no route serves.
pub fn not_found() -> Reply {
    text(StatusCode::NOT_FOUND, "404: Page Not Found")
}
