//! `POST /run/{ns}/{pod}/{container}` and `/run/{ns}/{pod}/{uid}/{container}`, as the
//! kubelet's `getRun` serves them: the pod found by name (404 `pod does not exist`), the
//! command from the single `cmd` parameter split on single spaces, CRI ExecSync in the
//! pod's running container with no timeout (the kubelet passes 0), and the command's stdout
//! followed by its stderr (not interleaved) as `application/json`, as the kubelet writes it.
//! A failure is a 500 with its text: `container not found ("C")`, or for a non-zero exit the
//! CRI client's `command 'CMD' exited with N: STDERR` (the output is then not returned).
//! The uid segment is not checked: the kubelet finds the runtime pod by its full name first.

use std::time::Duration;

use http::{HeaderValue, StatusCode, header};
use nodepulse_actors::{
    pods::PodsView,
    ports::{ContainerRuntime, ContainerState},
};

use super::reply::{self, Reply};
use nodepulse_cri::client::CriClient;

/// Serves `/run/` with the path's `segments` after the prefix and the request's `query`.
pub async fn serve(
    segments: &[String],
    query: &str,
    pods: &PodsView,
    runtime: Option<&CriClient>,
) -> Reply {
    let (namespace, pod, container) = match segments {
        [namespace, pod, container] | [namespace, pod, _, container] => (namespace, pod, container),
        _ => return reply::not_found(),
    };
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    // go-restful's QueryParameter: the first value, "" when absent.
    let cmd: Vec<String> = pairs
        .iter()
        .find(|(key, _)| key == "cmd")
        .map_or("", |(_, value)| value.as_str())
        .split(' ')
        .map(str::to_owned)
        .collect();
    let container_id = {
        let snapshot = pods.snapshot();
        let Some(record) = snapshot.by_name(namespace, pod) else {
            return reply::text(StatusCode::NOT_FOUND, "pod does not exist");
        };
        record
            .instances(container)
            .find(|instance| instance.state == ContainerState::Running)
            .map(|instance| instance.id.clone())
    };
    let failed = |message: String| reply::text(StatusCode::INTERNAL_SERVER_ERROR, message);
    let Some(container_id) = container_id else {
        return failed(format!("container not found ({container:?})"));
    };
    let Some(runtime) = runtime else {
        return failed("no container runtime".to_owned());
    };
    match runtime
        .exec_sync(container_id, cmd.clone(), Duration::ZERO)
        .await
    {
        Ok(output) if output.exit_code != 0 => failed(format!(
            "command '{}' exited with {}: {}",
            cmd.join(" "),
            output.exit_code,
            String::from_utf8_lossy(&output.stderr)
        )),
        Ok(output) => {
            let mut combined = output.stdout;
            combined.extend_from_slice(&output.stderr);
            let mut answer = reply::text(StatusCode::OK, combined);
            answer.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            answer
        }
        Err(error) => failed(error.to_string()),
    }
}
