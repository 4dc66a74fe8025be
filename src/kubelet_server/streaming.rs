//! `/exec`, `/attach` (`{ns}/{pod}[/{uid}]/{container}`) and `/portForward` (`{ns}/{pod}[/{uid}]`)
//! as the kubelet serves them: the pod found in the node's PodsView (404 `pod does not
//! exist`), its running container or sandbox, a CRI call for the one-shot URL on the
//! runtime's streaming server, and the client's upgrade relayed there byte for byte, as the
//! kubelet's upgrade-aware proxy does: the same method and headers with the URL's path, the
//! runtime's 101 handed back, then both directions copied until either side closes (then the
//! other is shut too). The runtime speaks SPDY and the legacy WebSocket protocols itself.

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use nodepulse_actors::{pods::PodsView, ports::ContainerState};

use super::{
    forwarded_ports::forwarded_ports,
    metrics::KUBELET_API_METRICS,
    reply::{self, Reply},
};
use nodepulse_cri::client::{CriClient, StreamingError, proto::streaming as cri};

/// Which stream a path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Exec,
    Attach,
    PortForward,
}

impl Kind {
    /// The path class the kind is served under (and counted by).
    fn class(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            Self::Attach => "attach",
            Self::PortForward => "portForward",
        }
    }
}

/// Serves `request` for `kind` with the path's segments after the prefix.
pub async fn serve(
    kind: Kind,
    segments: &[String],
    pods: &PodsView,
    runtime: Option<&CriClient>,
    request: Request<Incoming>,
) -> Reply {
    let (namespace, pod, uid, container) = match (kind, segments) {
        (Kind::PortForward, [namespace, pod]) => (namespace, pod, None, None),
        (Kind::PortForward, [namespace, pod, uid]) => (namespace, pod, Some(uid), None),
        (Kind::Exec | Kind::Attach, [namespace, pod, container]) => {
            (namespace, pod, None, Some(container))
        }
        (Kind::Exec | Kind::Attach, [namespace, pod, uid, container]) => {
            (namespace, pod, Some(uid), Some(container))
        }
        _ => return reply::not_found(),
    };
    let query: Vec<(String, String)> =
        serde_urlencoded::from_str(request.uri().query().unwrap_or("")).unwrap_or_default();
    let flag = |name: &str| query.iter().any(|(key, value)| key == name && value == "1");
    let (stdin, stdout, tty) = (flag("input"), flag("output"), flag("tty"));
    // A terminal has no separate stderr.
    let stderr = flag("error") && !tty;
    if kind != Kind::PortForward && !(stdin || stdout || stderr) {
        return reply::error(
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 of stdin, stdout, stderr",
        );
    }
    // Read before the pod is looked for, as the kubelet reads its options first.
    let ports = match kind {
        Kind::PortForward => match forwarded_ports(request.headers(), &query) {
            Ok(ports) => ports,
            Err(error) => return reply::text(StatusCode::BAD_REQUEST, error.to_string()),
        },
        Kind::Exec | Kind::Attach => Vec::new(),
    };
    let snapshot = pods.snapshot();
    let Some(record) = snapshot.by_name(namespace, pod) else {
        return reply::error(StatusCode::NOT_FOUND, "pod does not exist");
    };
    if uid.is_some_and(|uid| *uid != record.uid) {
        return reply::error(StatusCode::NOT_FOUND, "pod not found");
    }
    let Some(runtime) = runtime else {
        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "no container runtime");
    };
    let running = container.and_then(|name| {
        record
            .instances(name)
            .find(|instance| instance.state == ContainerState::Running)
            .map(|instance| instance.id.clone())
    });
    let url = match (kind, container) {
        (Kind::Exec, Some(name)) => {
            let Some(container_id) = running else {
                return reply::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("container not found ({name:?})"),
                );
            };
            let cmd = query
                .iter()
                .filter(|(key, _)| key == "command")
                .map(|(_, value)| value.clone())
                .collect();
            runtime
                .exec_url(cri::ExecRequest {
                    container_id,
                    cmd,
                    tty,
                    stdin,
                    stdout,
                    stderr,
                })
                .await
        }
        (Kind::Attach, Some(name)) => {
            let Some(container_id) = running else {
                return reply::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("container {name} not found in pod {pod}_{namespace}"),
                );
            };
            runtime
                .attach_url(cri::AttachRequest {
                    container_id,
                    stdin,
                    tty,
                    stdout,
                    stderr,
                })
                .await
        }
        _ => {
            let Some(sandbox) = record.sandbox_id() else {
                return reply::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("pod not found (\"{pod}_{namespace}\")"),
                );
            };
            runtime
                .port_forward_url(cri::PortForwardRequest {
                    pod_sandbox_id: sandbox.to_owned(),
                    port: ports,
                })
                .await
        }
    };
    match url {
        Ok(url) => relay(request, &url, kind.class()).await,
        Err(error) => {
            let status = match error {
                StreamingError::NotFound(_) => StatusCode::NOT_FOUND,
                StreamingError::Exhausted(_) => StatusCode::TOO_MANY_REQUESTS,
                StreamingError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let mut answer = reply::error(status, &error.to_string());
            if status == StatusCode::TOO_MANY_REQUESTS {
                answer
                    .headers_mut()
                    .insert(header::RETRY_AFTER, http::HeaderValue::from_static("60"));
            }
            answer
        }
    }
}

fn is_upgrade(request: &Request<Incoming>) -> bool {
    request
        .headers()
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

/// Relays the upgrade `request` to `url` on the runtime's streaming server.
async fn relay(mut request: Request<Incoming>, url: &str, class: &'static str) -> Reply {
    let failed = |message: String| reply::error(StatusCode::INTERNAL_SERVER_ERROR, &message);
    if !is_upgrade(&request) {
        return failed("Upgrade request required".to_owned());
    }
    let Ok(target) = url.parse::<http::Uri>() else {
        return failed(format!("invalid streaming URL {url:?}"));
    };
    let Some(authority) = target.authority().map(|authority| authority.to_string()) else {
        return failed(format!("invalid streaming URL {url:?}"));
    };
    let stream = match tokio::net::TcpStream::connect(&authority).await {
        Ok(stream) => super::server::no_delay(stream),
        Err(error) => {
            return failed(format!(
                "error dialing backend: dial tcp {authority}: {error}"
            ));
        }
    };
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
            Ok(pair) => pair,
            Err(error) => return failed(format!("error dialing backend: {error}")),
        };
    tokio::spawn(connection.with_upgrades());
    let mut backend = Request::builder()
        .method(request.method().clone())
        .uri(target.path_and_query().map_or("/", |path| path.as_str()));
    for (name, value) in request.headers() {
        backend = backend.header(name, value);
    }
    let Ok(backend) = backend.body(Empty::<Bytes>::new()) else {
        return failed("cannot build the streaming request".to_owned());
    };
    let mut answer = match sender.send_request(backend).await {
        Ok(answer) => answer,
        Err(error) => return failed(format!("error proxying to the streaming server: {error}")),
    };
    let status = answer.status();
    if status == StatusCode::SWITCHING_PROTOCOLS {
        let headers = answer.headers().clone();
        let backend_upgrade = hyper::upgrade::on(&mut answer);
        let client_upgrade = hyper::upgrade::on(&mut request);
        let open = KUBELET_API_METRICS.stream(class);
        tokio::spawn(async move {
            let _open = open;
            let (Ok(client), Ok(backend)) = tokio::join!(client_upgrade, backend_upgrade) else {
                return;
            };
            let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
            // Ends when both directions are done; an error on one drops both connections.
            let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
        });
        let mut switching = http::Response::new(reply::full(Bytes::new()));
        *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        *switching.headers_mut() = headers;
        return switching;
    }
    if status.is_client_error() || status.is_server_error() {
        let (parts, body) = answer.into_parts();
        let body = body
            .collect()
            .await
            .map(|collected| collected.to_bytes())
            .unwrap_or_default();
        let mut relayed = http::Response::new(reply::full(body));
        *relayed.status_mut() = parts.status;
        *relayed.headers_mut() = parts.headers;
        return relayed;
    }
    failed(format!(
        "invalid upgrade response: status code {}",
        status.as_u16()
    ))
}
