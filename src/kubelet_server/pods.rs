//! `/pods` (the pods bound to the node, as the kubelet's pod manager has them), `/runningpods/`
//! (the runtime's view, "used for testing only" in the kubelet) and `/configz` (the effective
//! configuration in the kubelet's envelope, as `Config::published` shows it: no secrets).
//! `/pods` is a `v1.PodList` of the pods as the watch reported them (the volume manager's copy,
//! the node's one view of whole pods), items without `kind`/`apiVersion` as the kubelet's
//! typed pods have none. `/runningpods/` is a `v1.PodList`
//! with, per running pod, only `metadata.{name,namespace,uid}` and `spec.containers[].{name,image}`
//! of its running containers, as the kubelet builds it from `GetPods(false)`.

use http::StatusCode;
use nodepulse_actors::{pods::PodsView, ports::ContainerState, volume_manager::VolumeView};
use serde_json::{Value, json};

use super::reply::{self, Reply};

pub fn bound_pods(volumes: Option<&VolumeView>) -> Reply {
    let items: Vec<Value> = (volumes.map(VolumeView::pods).unwrap_or_default())
        .into_iter()
        .filter_map(|pod| {
            let mut item = serde_json::to_value(pod.as_ref()).ok()?;
            if let Some(fields) = item.as_object_mut() {
                fields.remove("kind");
                fields.remove("apiVersion");
            }
            Some(item)
        })
        .collect();
    // Go writes the list's nil slice as null.
    let items = if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items)
    };
    reply::json(
        StatusCode::OK,
        &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}),
    )
}

pub fn running_pods(pods: &PodsView) -> Reply {
    let snapshot = pods.snapshot();
    let items: Vec<Value> = snapshot
        .pods()
        .filter_map(|pod| {
            let containers: Vec<Value> = pod
                .containers
                .iter()
                .filter(|container| container.state == ContainerState::Running)
                .map(|container| json!({"name": container.name, "image": container.image}))
                .collect();
            let sandbox_ready = pod.sandboxes.first().is_some_and(|sandbox| sandbox.ready);
            (sandbox_ready || !containers.is_empty()).then(|| {
                json!({
                    "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                        "creationTimestamp": null},
                    "spec": {"containers": containers},
                    "status": {},
                })
            })
        })
        .collect();
    reply::json(
        StatusCode::OK,
        &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}),
    )
}

/// The configuration `config` (already JSON without its secrets, with the kubelet's field names
/// where they are the same) in `/configz`'s envelope.
pub fn configz(config: &Value) -> Reply {
    let mut kubelet = config.clone();
    if let Some(fields) = kubelet.as_object_mut() {
        fields.insert("kind".into(), json!("KubeletConfiguration"));
        fields.insert("apiVersion".into(), json!("kubelet.config.k8s.io/v1beta1"));
    }
    reply::json(StatusCode::OK, &json!({ "kubeletconfig": kubelet }))
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use nodepulse_actors::pods::{ContainerRecord, PodRecord, PodsPublisher, SandboxRecord};

    use super::*;

    fn container(name: &str, state: ContainerState) -> ContainerRecord {
        ContainerRecord {
            name: name.into(),
            id: format!("{name}-id"),
            state,
            restart_count: 0,
            log_path: "/var/log/pods/x/0.log".into(),
            image: "busybox:1.37".into(),
            image_ref: "sha256:1".into(),
            created_at: None,
            started_at: None,
            finished_at: None,
            exit_code: None,
        }
    }

    fn pod(name: &str, ready: bool, containers: Vec<ContainerRecord>) -> PodRecord {
        PodRecord {
            uid: format!("{name}-uid"),
            namespace: "default".into(),
            name: name.into(),
            deleting: false,
            sandboxes: vec![SandboxRecord {
                id: format!("{name}-sandbox"),
                ready,
                created_at: None,
            }],
            containers,
        }
    }

    #[tokio::test]
    async fn running_pods_list_only_what_runs_with_names_and_images() {
        let publisher = PodsPublisher::default();
        publisher.record(pod(
            "web",
            true,
            vec![
                container("app", ContainerState::Running),
                container("done", ContainerState::Exited),
            ],
        ));
        publisher.record(pod(
            "gone",
            false,
            vec![container("app", ContainerState::Exited)],
        ));
        let reply = running_pods(&publisher.view());
        let body = reply.into_body().collect().await.expect("body").to_bytes();
        let list: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(
            list,
            json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [
                {"metadata": {"name": "web", "namespace": "default", "uid": "web-uid", "creationTimestamp": null},
                 "spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}, "status": {}}]})
        );
    }
}
