//! `GET /containerLogs/{namespace}/{pod}/{container}`: the container instance the request
//! names (the newest, or with `previous` the one before it) found in the node's PodsView, its
//! CRI log file streamed with the kubelet's query parameters (`options.rs`), line rendering
//! (`format.rs`) and following (`follow.rs`), and the kubelet's error texts. The body is
//! chunked and flushed as it goes, its end in a write of its own (`end_apart.rs`).

mod end_apart;
mod follow;
mod format;
pub(super) mod options;

use http::StatusCode;
use http_body_util::{BodyExt, StreamBody};
use nodepulse_actors::{pods::PodsView, ports::ContainerState};

use end_apart::EndApart;

use super::{
    metrics::KUBELET_API_METRICS,
    reply::{self, Reply},
};

/// Answers the route's three path segments (percent-decoded) and query.
pub fn container_logs(pods: &PodsView, segments: &[String], query: &str) -> Reply {
    let [namespace, pod, container] = segments else {
        return reply::not_found();
    };
    let missing = |what: &str| {
        reply::text(
            StatusCode::BAD_REQUEST,
            format!(r#"{{"message": "Missing {what}."}}"#),
        )
    };
    if pod.is_empty() {
        return missing("podID");
    }
    if container.is_empty() {
        return missing("container name");
    }
    if namespace.is_empty() {
        return missing("podNamespace");
    }
    let options = match options::parse(query, jiff::Timestamp::now()) {
        Ok(options) => options,
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST);
            return reply::text(status, refusal.body);
        }
    };
    let snapshot = pods.snapshot();
    let Some(record) = snapshot.by_name(namespace, pod) else {
        return reply::text(
            StatusCode::NOT_FOUND,
            format!("pod {pod:?} does not exist\n"),
        );
    };
    let bad = |message: String| reply::error(StatusCode::BAD_REQUEST, &message);
    let instance = if options.previous {
        match record
            .previous(container)
            .filter(|instance| instance.state == ContainerState::Exited)
        {
            Some(instance) => instance,
            None => {
                return bad(format!(
                    "previous terminated container {container:?} in pod {pod:?} not found"
                ));
            }
        }
    } else {
        match record.container(container) {
            Some(instance) if instance.state == ContainerState::Created => {
                return bad(format!(
                    "container {container:?} in pod {pod:?} is waiting to start: ContainerCreating"
                ));
            }
            Some(instance) => instance,
            None => {
                return bad(format!(
                    "container {container:?} in pod {pod:?} is waiting to start - no logs yet"
                ));
            }
        }
    };
    let path = instance.log_path.clone();
    if let Err(error) = std::fs::metadata(&path) {
        return bad(format!(
            "failed to try resolving symlinks in path {:?}: {error}",
            path.display().to_string()
        ));
    }
    let still_running: follow::StillRunning = {
        let (pods, uid, id) = (pods.clone(), record.uid.clone(), instance.id.clone());
        Box::new(move || {
            pods.snapshot().by_uid(&uid).is_some_and(|pod| {
                pod.containers.iter().any(|container| {
                    container.id == id && container.state == ContainerState::Running
                })
            })
        })
    };
    let (sink, frames) = tokio::sync::mpsc::channel(16);
    let open = KUBELET_API_METRICS.stream("containerLogs");
    tokio::spawn(async move {
        let _open = open;
        if let Err(error) = follow::stream(path.clone(), options, still_running, sink).await {
            tracing::info!(%error, path = %path.display(), "a container log stream ended early");
        }
    });
    streamed(frames)
}

/// The answer whose body is what `frames` receives, its end written apart from the last line.
fn streamed(mut frames: tokio::sync::mpsc::Receiver<follow::SinkItem>) -> Reply {
    let frames = futures::stream::poll_fn(move |cx| frames.poll_recv(cx));
    let mut answer = http::Response::new(StreamBody::new(EndApart::new(frames)).boxed());
    answer.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}
