//! The route table and how a request finds its handler: a method and a path pattern whose
//! `{param}` segments match one percent-decoded segment each. A request whose `Host` names
//! another host is a 403 (`host.rs`), a path no pattern matches a 404, a known path with
//! another method a 405, all as JSON like every other error.
//! To add a route: write `async fn(Call) -> Result<Reply, DebugError>` and add one line to
//! [`ROUTES`].

use std::rc::Rc;

use futures::future::LocalBoxFuture;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use percent_encoding::percent_decode_str;
use serde::de::DeserializeOwned;

use super::{
    DebugContext, PAGE, actors,
    error::DebugError,
    health, kubelet_api, metrics, probes,
    reply::{self, Reply},
};

/// What a handler gets: the shared context and the parts of the request it may read.
pub struct Call {
    pub context: Rc<DebugContext>,
    /// The `{param}` segments of the pattern, in order, percent-decoded.
    pub params: Vec<String>,
    query: String,
    pub headers: HeaderMap,
}

impl Call {
    /// The query string as `T`: an unknown, repeated or malformed parameter is a 400.
    pub fn query<T: DeserializeOwned>(&self) -> Result<T, DebugError> {
        serde_urlencoded::from_str(&self.query)
            .map_err(|error| DebugError::BadRequest(format!("invalid query string: {error}")))
    }

    /// The first `{param}` of the pattern.
    pub fn param(&self) -> &str {
        self.params.first().map_or("", String::as_str)
    }
}

type Handler = fn(Call) -> LocalBoxFuture<'static, Result<Reply, DebugError>>;

struct Route {
    method: Method,
    pattern: &'static str,
    handler: Handler,
}

const ROUTES: &[Route] = &[
    get("/healthz", |call| Box::pin(health::healthz(call))),
    get("/metrics", |call| Box::pin(metrics::metrics(call))),
    get("/debug", |_| {
        Box::pin(async { Ok(reply::redirect("/debug/")) })
    }),
    get("/debug/", |_| Box::pin(async { Ok(page()) })),
    get("/debug/node", |call| Box::pin(actors::node(call))),
    get("/debug/volumes", |call| Box::pin(actors::volumes(call))),
    get("/debug/probes", |call| Box::pin(probes::probes(call))),
    get("/debug/kubelet-api", |call| {
        Box::pin(kubelet_api::in_flight(call))
    }),
    get("/debug/actors", |call| Box::pin(actors::list(call))),
    get("/debug/actors/{name}", |call| Box::pin(actors::one(call))),
    post("/debug/actors/{name}/kill", |call| {
        Box::pin(actors::kill(call))
    }),
];

const fn get(pattern: &'static str, handler: Handler) -> Route {
    Route {
        method: Method::GET,
        pattern,
        handler,
    }
}

const fn post(pattern: &'static str, handler: Handler) -> Route {
    Route {
        method: Method::POST,
        pattern,
        handler,
    }
}

fn page() -> Reply {
    reply::with_type(StatusCode::OK, "text/html; charset=utf-8", PAGE)
}

/// The captured parameters when `path` matches `pattern`; `Err` for a parameter that is not
/// UTF-8 once decoded (no actor or node has such a name).
fn matches(pattern: &str, path: &str) -> Option<Result<Vec<String>, DebugError>> {
    let mut params = Vec::new();
    let mut wanted = pattern.split('/');
    let mut given = path.split('/');
    loop {
        match (wanted.next(), given.next()) {
            (None, None) => return Some(Ok(params)),
            (Some(want), Some(segment)) if want.starts_with('{') && !segment.is_empty() => {
                match percent_decode_str(segment).decode_utf8() {
                    Ok(decoded) => params.push(decoded.into_owned()),
                    Err(_) => {
                        return Some(Err(DebugError::NotFound(
                            "a path segment is not UTF-8 once decoded".to_owned(),
                        )));
                    }
                }
            }
            (Some(want), Some(segment)) if want == segment => {}
            _ => return None,
        }
    }
}

/// Runs the handler `method` and `path` name, or answers why none does.
pub async fn dispatch(
    context: Rc<DebugContext>,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: HeaderMap,
) -> Reply {
    // A Host that is not valid text names no host this endpoint knows.
    if let Some(host) = headers.get(header::HOST) {
        let host = host.to_str().unwrap_or_default();
        if !context.allowed_hosts.allows(host) {
            return DebugError::Forbidden(format!(
                "Host {host:?} does not name this endpoint; use its address or localhost"
            ))
            .into_reply();
        }
    }
    let mut allowed: Vec<&str> = Vec::new();
    for route in ROUTES {
        let Some(params) = matches(route.pattern, path) else {
            continue;
        };
        if route.method != *method {
            allowed.push(route.method.as_str());
            continue;
        }
        let call = params.map(|params| Call {
            context,
            params,
            query: query.unwrap_or_default().to_owned(),
            headers,
        });
        return match call {
            Ok(call) => (route.handler)(call).await,
            Err(error) => Err(error),
        }
        .unwrap_or_else(DebugError::into_reply);
    }
    if allowed.is_empty() {
        return DebugError::NotFound(format!(
            "no route {method} {path}; see /debug/ for the actor page, /debug/actors, /healthz and /metrics"
        ))
        .into_reply();
    }
    let mut reply =
        DebugError::MethodNotAllowed(format!("{method} is not allowed on {path}")).into_reply();
    if let Ok(allow) = HeaderValue::from_str(&allowed.join(", ")) {
        reply.headers_mut().insert(header::ALLOW, allow);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn params(pattern: &str, path: &str) -> Option<Vec<String>> {
        matches(pattern, path).map(|result| result.unwrap_or_else(|_| vec!["<not UTF-8>".into()]))
    }

    #[test]
    fn a_pattern_matches_whole_segments_and_decodes_its_parameters() {
        let kill = "/debug/actors/{name}/kill";
        assert_eq!(
            params(kill, "/debug/actors/lease/kill"),
            Some(vec!["lease".to_owned()])
        );
        assert_eq!(
            params(kill, "/debug/actors/..%2fetc/kill"),
            Some(vec!["../etc".to_owned()])
        );
        assert_eq!(
            params(kill, "/debug/actors/%ff%fe/kill"),
            Some(vec!["<not UTF-8>".to_owned()])
        );
        assert_eq!(params(kill, "/debug/actors//kill"), None);
        assert_eq!(params(kill, "/debug/actors/lease/kill/again"), None);
        assert_eq!(params("/debug/actors", "//debug///actors"), None);
        assert_eq!(params("/debug/", "/debug/"), Some(vec![]));
        assert_eq!(params("/debug", "/debug/"), None);
    }
}
