//! In-place resize of running containers (the kubelet's `computePodResizeAction` for
//! containers whose `resizePolicy` is `NotRequired`): the CPU and memory the spec asks for,
//! against what the runtime reports it applied; each one that differs is updated with CRI
//! UpdateContainerResources. Pure: the worker makes the calls.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    container::linux_resources,
    plan::{app_containers, init_containers, is_sidecar},
    view::PodRuntime,
};
use nodepulse_actors::ports::{ContainerState, LinuxResources};

/// One UpdateContainerResources to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeAction {
    pub container: String,
    pub container_id: String,
    pub resources: LinuxResources,
}

/// Whether the runtime holds what is asked for (the `oom_score_adj` is not read back).
fn applied(asked: &LinuxResources, runtime: &LinuxResources) -> bool {
    asked.cpu_shares == runtime.cpu_shares
        && asked.memory_limit_in_bytes == runtime.memory_limit_in_bytes
        && (asked.cpu_quota == runtime.cpu_quota || asked.cpu_period == 0 && runtime.cpu_quota <= 0)
}

/// The containers that may be resized: app containers and sidecars (an init container that
/// ran to completion is not resized, as `IsResizableContainer`).
fn resizable(pod: &Pod) -> impl Iterator<Item = &Container> {
    init_containers(pod)
        .iter()
        .filter(|c| is_sidecar(c))
        .chain(app_containers(pod))
}

/// The updates that bring each running container to its spec's CPU and memory. A runtime that
/// does not report what it applied gets none (nothing to compare with).
pub fn resize_actions(pod: &Pod, runtime: &PodRuntime, memory_capacity: u64) -> Vec<ResizeAction> {
    resizable(pod)
        .filter_map(|container| {
            let newest = runtime.newest(&container.name)?;
            if newest.state != ContainerState::Running {
                return None;
            }
            let asked = linux_resources(pod, container, memory_capacity);
            let held = newest.resources.as_ref()?;
            (!applied(&asked, held)).then(|| ResizeAction {
                container: container.name.clone(),
                container_id: newest.id.clone(),
                resources: asked,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use nodepulse_actors::ports::{ContainerStatus, Labels};

    fn pod(cpu: &str, memory: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": cpu, "memory": memory},
                "limits": {"cpu": cpu, "memory": memory},
            }}]},
        }))
        .unwrap()
    }

    fn runtime(state: ContainerState, applied: Option<LinuxResources>) -> PodRuntime {
        PodRuntime::new(
            Vec::new(),
            vec![ContainerStatus {
                id: "c-1".into(),
                name: "c".into(),
                attempt: 0,
                state,
                created_at: 1,
                started_at: 1,
                finished_at: 0,
                exit_code: 0,
                image: String::new(),
                image_ref: String::new(),
                reason: String::new(),
                message: String::new(),
                labels: [("io.kubernetes.container.name".to_owned(), "c".to_owned())]
                    .into_iter()
                    .collect::<Labels>(),
                annotations: Labels::new(),
                log_path: "x".into(),
                mounts: Vec::new(),
                resources: applied,
            }],
        )
    }

    fn held(pod: &Pod) -> LinuxResources {
        let container = &app_containers(pod)[0];
        LinuxResources {
            oom_score_adj: 0,
            ..linux_resources(pod, container, 8 << 30)
        }
    }

    #[test]
    fn a_running_container_holding_other_sizes_is_updated_to_the_spec() {
        let before = pod("100m", "100Mi");
        let after = pod("200m", "200Mi");
        let actions = resize_actions(
            &after,
            &runtime(ContainerState::Running, Some(held(&before))),
            8 << 30,
        );
        assert_eq!(actions.len(), 1);
        assert_eq!(actions[0].container_id, "c-1");
        assert_eq!(actions[0].resources.cpu_shares, 204);
        assert_eq!(actions[0].resources.cpu_quota, 20_000);
        assert_eq!(actions[0].resources.memory_limit_in_bytes, 200 << 20);
    }

    #[test]
    fn nothing_is_updated_when_applied_not_running_or_unknown() {
        let spec = pod("200m", "200Mi");
        for runtime in [
            runtime(ContainerState::Running, Some(held(&spec))),
            runtime(ContainerState::Exited, Some(held(&pod("1", "1Gi")))),
            runtime(ContainerState::Running, None),
        ] {
            assert_eq!(resize_actions(&spec, &runtime, 8 << 30), Vec::new());
        }
    }
}
