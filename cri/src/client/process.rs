//! The host process of a container or a sandbox, from the runtime's verbose status (`info`'s
//! `info` JSON has the `pid`, as containerd and CRI-O write it, and a sandbox's `image`): where a container's cgroup and
//! a pod's network namespace are found, as cAdvisor finds them through its own runtime
//! handlers. `None` when the runtime's answer has no process (a stopped container, a runtime
//! that writes no such info).

use futures::{FutureExt, future::BoxFuture};
use nodepulse_actors::ports::ContainerRuntimeResult;

use super::{CriClient, proto, proto::paths};

/// A running container's or sandbox's process, and the image the runtime says it runs (a
/// sandbox's pause image; containerd names it, a container's the pods view has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeProcess {
    pub pid: u32,
    pub image: Option<String>,
}

/// The process of a verbose status's `info`.
pub fn process_of(info: &std::collections::HashMap<String, String>) -> Option<RuntimeProcess> {
    let text = info.get("info")?;
    let parsed: serde_json::Value = serde_json::from_str(text).ok()?;
    let pid = parsed.get("pid")?.as_u64()?;
    let pid = u32::try_from(pid).ok().filter(|pid| *pid > 0)?;
    let image = (parsed.get("image").and_then(serde_json::Value::as_str))
        .filter(|image| !image.is_empty())
        .map(str::to_owned);
    Some(RuntimeProcess { pid, image })
}

impl CriClient {
    /// Container `id`'s init process.
    pub fn container_process(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Option<RuntimeProcess>>> {
        let request = proto::VerboseContainerStatusRequest {
            container_id: id,
            verbose: true,
        };
        self.call_with(
            "ContainerStatus",
            paths::CONTAINER_STATUS,
            request,
            |response: proto::VerboseInfoResponse| Ok(process_of(&response.info)),
        )
        .boxed()
    }

    /// Sandbox `id`'s process (its pause container), in the pod's namespaces.
    pub fn sandbox_process(
        &self,
        id: String,
    ) -> BoxFuture<'static, ContainerRuntimeResult<Option<RuntimeProcess>>> {
        let request = proto::PodSandboxStatusRequest {
            pod_sandbox_id: id,
            verbose: true,
        };
        self.call_with(
            "PodSandboxStatus",
            paths::POD_SANDBOX_STATUS,
            request,
            |response: proto::VerboseInfoResponse| Ok(process_of(&response.info)),
        )
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn the_pid_is_read_from_the_verbose_info_json_and_its_absence_is_none() {
        let info = |text: &str| [("info".to_owned(), text.to_owned())].into_iter().collect();
        let pid = |text: &str| process_of(&info(text)).map(|process| process.pid);
        assert_eq!(
            pid(r#"{"sandboxID":"s","pid":4242,"removing":false}"#),
            Some(4242)
        );
        assert_eq!(pid(r#"{"pid":0}"#), None, "a stopped container");
        assert_eq!(pid("not json"), None);
        assert_eq!(process_of(&Default::default()), None);
        assert_eq!(
            process_of(&info(r#"{"pid":9,"image":"registry.k8s.io/pause:3.9"}"#)),
            Some(RuntimeProcess {
                pid: 9,
                image: Some("registry.k8s.io/pause:3.9".into()),
            })
        );
    }

    #[test]
    fn a_verbose_status_answer_is_read_past_its_status() {
        // ContainerStatusResponse { status = 1 (a message), info = 2 (a map) }, as sent.
        let mut wire = Vec::new();
        proto::ContainerStatusResponse {
            status: Some(proto::ContainerStatus::default()),
        }
        .encode(&mut wire)
        .expect("encode");
        proto::VerboseInfoResponse {
            info: [("info".to_owned(), r#"{"pid":7}"#.to_owned())]
                .into_iter()
                .collect(),
        }
        .encode(&mut wire)
        .expect("encode");
        let decoded = proto::VerboseInfoResponse::decode(wire.as_slice()).expect("decode");
        assert_eq!(process_of(&decoded.info).map(|p| p.pid), Some(7));
    }
}
