//! `pods/exec`, `pods/attach` and `pods/portforward` (GET and POST), as kube-apiserver 1.36
//! serves them for a node that does not declare `ExtendWebSocketsToKubelet` (nodepulse does
//! not): the pod and container resolved with the apiserver's errors, the node's kubelet
//! endpoint dialed with the kubelet-client certificate (`kubelet_client`), and
//!
//! - a WebSocket `v5.channel.k8s.io` exec/attach (kubectl's default) translated to SPDY
//!   (`translate`);
//! - a WebSocket `SPDY/3.1+portforward.k8s.io` port-forward (kubectl's default) tunnelled
//!   (`relay::tunnel`);
//! - any other WebSocket upgrade (the legacy `channel.k8s.io` … `v4.channel.k8s.io`) passed
//!   to the kubelet as it is (`relay::splice`).
//!
//! A SPDY upgrade from the client (`KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`, or client-go's
//! fallback) is the one thing not served: actix-web hands a handler the bytes after an upgrade
//! only for `Upgrade: websocket`, so it is answered with a 500 that says so.

mod relay;
mod spdy;
mod translate;
mod websocket;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use super::auth::authenticate_request;
use super::pod_log::{encode, node_endpoint, record, serde_urlencoded_pairs};
use super::{AppState, error_response};
use crate::api::resource::PODS;
use crate::api::{ApiError, Verb};
use crate::kubelet_client::Upgrade;
use crate::store::ObjectKey;

/// The streaming subresources and the kubelet path each goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subresource {
    Exec,
    Attach,
    PortForward,
}

pub fn configure(config: &mut web::ServiceConfig) {
    for (name, subresource) in [
        ("exec", Subresource::Exec),
        ("attach", Subresource::Attach),
        ("portforward", Subresource::PortForward),
    ] {
        let handler = move |req: HttpRequest,
                            payload: web::Payload,
                            path: web::Path<(String, String)>,
                            state: web::Data<AppState>| {
            serve(req, payload, path.into_inner(), state, subresource)
        };
        config.route(
            &format!("/api/v1/namespaces/{{namespace}}/pods/{{name}}/{name}"),
            web::route()
                .guard(actix_web::guard::Any(actix_web::guard::Get()).or(actix_web::guard::Post()))
                .to(handler),
        );
    }
}

async fn serve(
    req: HttpRequest,
    payload: web::Payload,
    (namespace, name): (String, String),
    state: web::Data<AppState>,
    subresource: Subresource,
) -> HttpResponse {
    let identity = match authenticate_request(&req, &state) {
        Ok(identity) => identity,
        Err(error) => return error_response(&error),
    };
    let response = match connect(&req, payload, &state, &namespace, &name, subresource).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    let verb = if req.method() == actix_web::http::Method::POST {
        Verb::Create
    } else {
        Verb::Get
    };
    let label = match subresource {
        Subresource::Exec => "exec",
        Subresource::Attach => "attach",
        Subresource::PortForward => "portforward",
    };
    record(&state, identity, verb, label, namespace, name, &response);
    response
}

/// Where the kubelet is and what to ask it, with the apiserver's errors for a request that
/// cannot be located.
struct Location {
    endpoint: crate::kubelet_client::KubeletEndpoint,
    path_and_query: String,
    options: translate::Options,
}

async fn connect(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    namespace: &str,
    name: &str,
    subresource: Subresource,
) -> Result<HttpResponse, ApiError> {
    let location = locate(req, state, namespace, name, subresource)?;
    let headers = to_http_headers(req.headers());
    let kubelet = std::sync::Arc::clone(&state.kubelet);
    let is_websocket = websocket::is_websocket(req.headers());
    let protocols = websocket::protocols(req.headers());
    if is_websocket
        && subresource != Subresource::PortForward
        && protocols
            .iter()
            .any(|protocol| protocol == "v5.channel.k8s.io")
    {
        return Ok(translated(req, payload, kubelet, location));
    }
    if is_websocket && subresource == Subresource::PortForward {
        let tunnelled: Vec<&str> = protocols
            .iter()
            .filter_map(|protocol| protocol.strip_prefix("SPDY/3.1+"))
            .filter(|protocol| protocol.ends_with(".k8s.io"))
            .collect();
        if !protocols
            .iter()
            .all(|protocol| !protocol.starts_with("SPDY/3.1+"))
        {
            if tunnelled.is_empty() {
                return Ok(HttpResponse::BadRequest()
                    .content_type("text/plain; charset=utf-8")
                    .body("unable to upgrade: no tunneling spdy protocols provided\n"));
            }
            let mut spdy = headers.clone();
            for name in [
                "sec-websocket-protocol",
                "sec-websocket-key",
                "sec-websocket-version",
            ] {
                spdy.remove(name);
            }
            spdy.insert(
                http::header::UPGRADE,
                http::HeaderValue::from_static("SPDY/3.1"),
            );
            spdy.remove("x-stream-protocol-version");
            for protocol in &tunnelled {
                if let Ok(value) = http::HeaderValue::from_str(protocol) {
                    spdy.append("x-stream-protocol-version", value);
                }
            }
            let answer = kubelet
                .upgrade(
                    http::Method::POST,
                    &location.endpoint,
                    &location.path_and_query,
                    &spdy,
                )
                .await
                .map_err(dial_failure)?;
            return Ok(match answer {
                Upgrade::Switched {
                    headers: kubelet_headers,
                    io,
                } => {
                    let accept = websocket::accept_key(header(req, "sec-websocket-key"));
                    relay::tunnel(payload, &accept, &kubelet_headers, io)
                }
                Upgrade::Refused {
                    status,
                    headers,
                    body,
                } => relay::refused(status, &headers, body),
            });
        }
    }
    if is_websocket {
        let method =
            http::Method::from_bytes(req.method().as_str().as_bytes()).unwrap_or(http::Method::GET);
        let answer = kubelet
            .upgrade(
                method,
                &location.endpoint,
                &location.path_and_query,
                &headers,
            )
            .await
            .map_err(dial_failure)?;
        return Ok(match answer {
            Upgrade::Switched { headers, io } => relay::splice(payload, &headers, io),
            Upgrade::Refused {
                status,
                headers,
                body,
            } => relay::refused(status, &headers, body),
        });
    }
    if !websocket::is_upgrade(req.headers()) {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    Err(ApiError::new(
        500,
        "",
        format!(
            "the emulator serves pods/{} upgrades over WebSocket only, not {:?}: actix-web passes on the bytes after an upgrade only for WebSocket",
            match subresource {
                Subresource::Exec => "exec",
                Subresource::Attach => "attach",
                Subresource::PortForward => "portforward",
            },
            header(req, "upgrade")
        ),
        None,
    ))
}

/// The upgrade-aware proxy's answer when the kubelet cannot be dialed (its error responder:
/// a 500 `Status` with the error as the message).
fn dial_failure(error: String) -> ApiError {
    ApiError::new(500, "", format!("error dialing backend: {error}"), None)
}

/// The translator's session, answered 101 at once as `StreamTranslatorHandler` upgrades the
/// client before it dials the kubelet.
fn translated(
    req: &HttpRequest,
    payload: web::Payload,
    kubelet: std::sync::Arc<crate::kubelet_client::KubeletClient>,
    location: Location,
) -> HttpResponse {
    let (out, frames) = tokio::sync::mpsc::unbounded_channel();
    let url = format!(
        "https://{}:{}{}",
        location.endpoint.first_host(),
        location.endpoint.port,
        location.path_and_query
    );
    let mut spdy = http::HeaderMap::new();
    spdy.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("Upgrade"),
    );
    spdy.insert(
        http::header::UPGRADE,
        http::HeaderValue::from_static("SPDY/3.1"),
    );
    for protocol in translate::SPDY_PROTOCOLS {
        spdy.append(
            "x-stream-protocol-version",
            http::HeaderValue::from_static(protocol),
        );
    }
    let Location {
        endpoint,
        path_and_query,
        options,
    } = location;
    actix_web::rt::spawn(async move {
        let dial = async move {
            kubelet
                .upgrade(http::Method::POST, &endpoint, &path_and_query, &spdy)
                .await
        };
        translate::run(websocket::Reader::new(payload), out, dial, url, options).await;
    });
    let mut headers = http::HeaderMap::new();
    if let Ok(accept) =
        http::HeaderValue::from_str(&websocket::accept_key(header(req, "sec-websocket-key")))
    {
        headers.insert("sec-websocket-accept", accept);
    }
    headers.insert(
        "sec-websocket-protocol",
        http::HeaderValue::from_static("v5.channel.k8s.io"),
    );
    let mut response =
        actix_web::HttpResponse::build(actix_web::http::StatusCode::SWITCHING_PROTOCOLS);
    response.upgrade("websocket");
    for (name, value) in &headers {
        response.append_header((name.as_str(), value.as_bytes()));
    }
    response.streaming(relay::body_from(frames))
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
}

fn to_http_headers(headers: &actix_web::http::header::HeaderMap) -> http::HeaderMap {
    let mut out = http::HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_str().as_bytes()),
            http::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append(name, value);
        }
    }
    out.remove(http::header::HOST);
    out
}

/// `streamLocation` / `PortForwardLocation`: the pod, its container, its node's kubelet and the
/// kubelet URL with the options as `streamParams` encodes them (keys sorted).
fn locate(
    req: &HttpRequest,
    state: &AppState,
    namespace: &str,
    name: &str,
    subresource: Subresource,
) -> Result<Location, ApiError> {
    let pairs = serde_urlencoded_pairs(req.query_string())?;
    let values = |key: &str| -> Vec<&str> {
        pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, value)| value.as_str())
            .collect()
    };
    // PodExecOptions / PodAttachOptions: stdout and stderr default to true.
    let flag = |key: &str, default: bool| -> Result<bool, ApiError> {
        match values(key).last() {
            None => Ok(default),
            Some(value) => parse_bool(value),
        }
    };
    let options = translate::Options {
        stdin: flag("stdin", false)?,
        stdout: flag("stdout", true)?,
        stderr: flag("stderr", true)?,
        tty: flag("tty", false)?,
    };
    let pod = state
        .store
        .get(PODS.stored, &ObjectKey::new(namespace, name))
        .ok_or_else(|| ApiError::not_found(&PODS, name))?;
    let container = match subresource {
        Subresource::PortForward => None,
        _ => Some(stream_container(
            &pod,
            name,
            values("container").last().copied().unwrap_or(""),
        )?),
    };
    let endpoint = node_endpoint(state, &pod, name)?;
    let mut query: Vec<(String, String)> = Vec::new();
    match subresource {
        Subresource::PortForward => {
            let ports: Vec<&str> = values("ports");
            for port in &ports {
                port.parse::<u16>().map_err(|_| {
                    ApiError::bad_request(format!("invalid port {port:?} in the ports option"))
                })?;
            }
            if !ports.is_empty() {
                query.push(("port".to_owned(), ports.join(",")));
            }
        }
        _ => {
            if subresource == Subresource::Exec {
                for command in values("command") {
                    query.push(("command".to_owned(), command.to_owned()));
                }
            }
            for (key, on) in [
                ("error", options.stderr),
                ("input", options.stdin),
                ("output", options.stdout),
                ("tty", options.tty),
            ] {
                if on {
                    query.push((key.to_owned(), "1".to_owned()));
                }
            }
        }
    }
    let path = match (&container, subresource) {
        (Some(container), Subresource::Exec) => format!(
            "/exec/{}/{}/{}",
            encode(namespace),
            encode(name),
            encode(container)
        ),
        (Some(container), _) => format!(
            "/attach/{}/{}/{}",
            encode(namespace),
            encode(name),
            encode(container)
        ),
        (None, _) => format!("/portForward/{}/{}", encode(namespace), encode(name)),
    };
    let encoded: Vec<String> = query
        .iter()
        .map(|(key, value)| format!("{key}={}", encode(value)))
        .collect();
    let path_and_query = if encoded.is_empty() {
        path
    } else {
        format!("{path}?{}", encoded.join("&"))
    };
    Ok(Location {
        endpoint,
        path_and_query,
        options,
    })
}

/// Go's `strconv.ParseBool`, as the apiserver decodes the options' booleans.
fn parse_bool(value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing {other:?}: invalid syntax"
        ))),
    }
}

/// `validateContainer`: the named container must be one of the pod's (init, regular,
/// ephemeral); none named picks the only regular one.
fn stream_container(pod: &Value, name: &str, requested: &str) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|container| container["name"].as_str().map(str::to_owned))
            .collect()
    };
    let containers = names("containers");
    let all: Vec<String> = names("initContainers")
        .into_iter()
        .chain(containers.iter().cloned())
        .chain(names("ephemeralContainers"))
        .collect();
    if !requested.is_empty() {
        return if all.iter().any(|known| known == requested) {
            Ok(requested.to_owned())
        } else {
            Err(ApiError::bad_request(format!(
                "container {requested} is not valid for pod {name}"
            )))
        };
    }
    match containers.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        _ => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            all.join(" ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_container_is_validated_as_stream_location_validates_it() {
        let pod = json!({"spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b"}]}});
        let message =
            |requested: &str| stream_container(&pod, "p", requested).map_err(|e| e.message);
        assert_eq!(
            message(""),
            Err("a container name must be specified for pod p, choose one of: [init a b]".into())
        );
        assert_eq!(message("init"), Ok("init".into()));
        assert_eq!(
            message("c"),
            Err("container c is not valid for pod p".into())
        );
        let single = json!({"spec": {"containers": [{"name": "only"}]}});
        assert_eq!(
            stream_container(&single, "p", "").map_err(|e| e.message),
            Ok("only".into())
        );
    }
}
