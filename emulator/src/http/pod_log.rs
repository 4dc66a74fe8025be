//! `GET /api/v1/namespaces/{namespace}/pods/{name}/log`, as kube-apiserver serves it: the
//! container resolved from the pod spec (its errors), the node's kubelet endpoint
//! (`kubelet_client`), `/containerLogs/{ns}/{pod}/{container}` with the log options passed on,
//! the kubelet's answer streamed back as `text/plain`, and its failures turned into `Status`
//! errors as kube-apiserver's response checker turns them (400 BadRequest with the kubelet's
//! text, 500 InternalError, 404 and 401 generic, 403 Forbidden with the text).

use std::time::Instant;

use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::auth::{Identity, authenticate_request};
use super::{AppState, error_response};
use crate::api::resource::{NODES, PODS};
use crate::api::{ApiError, Verb};
use crate::kubelet_client::KubeletEndpoint;
use crate::request_log::RequestRecord;
use crate::store::ObjectKey;

/// The log options kube-apiserver passes on to the kubelet.
const PASSED: &[&str] = &[
    "follow",
    "limitBytes",
    "previous",
    "sinceSeconds",
    "sinceTime",
    "tailLines",
    "timestamps",
];

pub fn configure(config: &mut web::ServiceConfig) {
    config.route(
        "/api/v1/namespaces/{namespace}/pods/{name}/log",
        web::get().to(pod_log),
    );
}

async fn pod_log(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> HttpResponse {
    let (namespace, name) = path.into_inner();
    let identity = match authenticate_request(&req, &state) {
        Ok(identity) => identity,
        Err(error) => return error_response(&error),
    };
    let response = match serve(&req, &state, &namespace, &name).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    record(
        &state,
        identity,
        Verb::Get,
        "log",
        namespace,
        name,
        &response,
    );
    response
}

/// Records a `pods/{subresource}` request for the tests' request log.
pub(super) fn record(
    state: &AppState,
    identity: Identity,
    verb: Verb,
    subresource: &str,
    namespace: String,
    name: String,
    response: &HttpResponse,
) {
    state.requests.record(RequestRecord {
        user: match identity {
            Identity::User(user) => user.name,
            Identity::Anonymous => "system:anonymous".to_owned(),
        },
        verb,
        group: String::new(),
        resource: "pods".to_owned(),
        subresource: subresource.to_owned(),
        namespace,
        name,
        field_selector: String::new(),
        code: response.status().as_u16(),
        received: Instant::now(),
    });
}

async fn serve(
    req: &HttpRequest,
    state: &AppState,
    namespace: &str,
    name: &str,
) -> Result<HttpResponse, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded_pairs(req.query_string())?;
    let pod = state
        .store
        .get(PODS.stored, &ObjectKey::new(namespace, name))
        .ok_or_else(|| ApiError::not_found(&PODS, name))?;
    let requested = pairs
        .iter()
        .find(|(key, _)| key == "container")
        .map(|(_, value)| value.clone());
    let container = choose_container(&pod, name, requested)?;
    let endpoint = node_endpoint(state, &pod, name)?;
    let mut query: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(key, _)| PASSED.contains(&key.as_str()))
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    query.sort_unstable();
    let encoded = query
        .iter()
        .map(|(key, value)| format!("{key}={}", encode(value)))
        .collect::<Vec<_>>()
        .join("&");
    let path = format!(
        "/containerLogs/{}/{}/{}{}{encoded}",
        encode(namespace),
        encode(name),
        encode(&container),
        if encoded.is_empty() { "" } else { "?" }
    );
    let answer = state
        .kubelet
        .get(&endpoint, &path)
        .await
        .map_err(ApiError::internal)?;
    let status = answer.status().as_u16();
    if status == 200 {
        let body = http_body_util::BodyStream::new(answer.into_body()).filter_map(|frame| async {
            match frame {
                Ok(frame) => frame.into_data().ok().map(Ok::<_, std::io::Error>),
                Err(error) => Some(Err(std::io::Error::other(error))),
            }
        });
        return Ok(HttpResponse::Ok()
            .content_type("text/plain")
            .streaming(body));
    }
    let body = answer
        .into_body()
        .collect()
        .await
        .map(|collected| String::from_utf8_lossy(&collected.to_bytes()).into_owned())
        .unwrap_or_default();
    Err(kubelet_failure(status, body.trim_end(), name))
}

/// Where kube-apiserver dials the kubelet of pod `name` (`pod`): its node's endpoint, or the
/// errors of a pod with no node and of a node that is not there.
pub(super) fn node_endpoint(
    state: &AppState,
    pod: &Value,
    name: &str,
) -> Result<KubeletEndpoint, ApiError> {
    let node_name = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|node| !node.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!("pod {name} does not have a host assigned"))
        })?;
    let node = state
        .store
        .get(NODES.stored, &ObjectKey::new("", node_name))
        .ok_or_else(|| ApiError::not_found(&NODES, node_name))?;
    state
        .kubelet_addresses
        .endpoint(&node)
        .map_err(ApiError::internal)
}

/// The `Status` kube-apiserver makes of a kubelet's non-200 answer for pod `name`'s log.
fn kubelet_failure(status: u16, body: &str, name: &str) -> ApiError {
    let details = json!({"name": name, "kind": "pods/log"});
    let suffix = format!(" ( pods/log {name})");
    match status {
        400 => ApiError::new(400, "BadRequest", body.to_owned(), None),
        500 => ApiError::internal(body),
        401 => ApiError::new(
            401,
            "Unauthorized",
            format!("the server has asked for the client to provide credentials{suffix}"),
            Some(details),
        ),
        403 => ApiError::new(403, "Forbidden", format!("{body}{suffix}"), Some(details)),
        404 => ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource{suffix}"),
            Some(details),
        ),
        _ => ApiError::new(
            status,
            "InternalError",
            format!(
                "an error on the server (\"{body}\") has prevented the request from succeeding{suffix}"
            ),
            Some(details),
        ),
    }
}

/// The container a log request reads, as kube-apiserver picks it.
fn choose_container(
    pod: &Value,
    name: &str,
    requested: Option<String>,
) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .map(|containers| {
                containers
                    .iter()
                    .filter_map(|container| container["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let containers = names("containers");
    match requested.filter(|container| !container.is_empty()) {
        Some(container) => {
            let known = containers
                .iter()
                .chain(&names("initContainers"))
                .chain(&names("ephemeralContainers"))
                .any(|known| *known == container);
            if known {
                Ok(container)
            } else {
                Err(ApiError::bad_request(format!(
                    "container {container} is not valid for pod {name}"
                )))
            }
        }
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}

pub(super) fn serde_urlencoded_pairs(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode(key)?, decode(value)?))
        })
        .collect()
}

fn decode(text: &str) -> Result<String, ApiError> {
    let spaced = text.replace('+', " ");
    let bytes = spaced.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = spaced
                .get(index + 1..index + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| ApiError::bad_request(format!("invalid URL escape in {text:?}")))?;
            out.push(hex);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ApiError::bad_request("the query is not UTF-8"))
}

pub(super) fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_is_chosen_as_kube_apiserver_chooses_it() {
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "init"}]}});
        assert_eq!(
            choose_container(&pod, "p", None).map_err(|e| e.message),
            Err("a container name must be specified for pod p, choose one of: [a b]".into())
        );
        assert_eq!(
            choose_container(&pod, "p", Some("init".into())).map_err(|e| e.message),
            Ok("init".into())
        );
        assert_eq!(
            choose_container(&pod, "p", Some("c".into())).map_err(|e| e.message),
            Err("container c is not valid for pod p".into())
        );
        let single = json!({"spec": {"containers": [{"name": "only"}]}});
        assert_eq!(
            choose_container(&single, "p", None).map_err(|e| e.message),
            Ok("only".into())
        );
    }
}
