//! A Pod's `metadata.generation` and `status.observedGeneration`, as the upstream "Pod
//! Generation" conformance specs see them: a new pod is at 1 whatever the client sent; only a
//! spec change moves it (by PUT or PATCH, one step each), never metadata nor a client's own
//! value; a graceful delete moves it once more. A pods/status write that leaves an
//! `observedGeneration` out keeps the stored one, on the status and on each condition.

use serde_json::{Value, json};

use crate::common::{Cluster, unique};

const PODS: &str = "/api/v1/namespaces/default/pods";

fn generation(pod: &Value) -> i64 {
    pod["metadata"]["generation"].as_i64().unwrap_or(0)
}

/// PUTs `pod` changed by `change`; the stored pod.
async fn put(cluster: &Cluster, pod: &Value, change: impl FnOnce(&mut Value)) -> Value {
    let mut body = pod.clone();
    change(&mut body);
    let name = pod["metadata"]["name"].as_str().expect("a name");
    let reply = cluster.put(&format!("{PODS}/{name}"), &body).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.body
}

#[tokio::test]
async fn pod_generation_starts_at_one_and_moves_only_with_the_spec() {
    let cluster = Cluster::start().await;
    let name = unique("generation");
    let created = cluster
        .post(
            PODS,
            &json!({"metadata": {"name": name, "generation": 100},
                "spec": {"nodeName": unique("nonode"),
                    "containers": [{"name": "c", "image": "busybox:1"}]}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(generation(&created.body), 1, "the client's 100 is ignored");

    // The upstream spec's updates, in its order, with the generation each leaves.
    let mut pod = created.body;
    pod = put(&cluster, &pod, |_| {}).await;
    assert_eq!(generation(&pod), 1, "an empty update");
    pod = put(&cluster, &pod, |p| {
        p["spec"]["tolerations"] =
            json!([{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]);
    })
    .await;
    assert_eq!(generation(&pod), 2, "tolerations");
    pod = put(&cluster, &pod, |p| {
        p["spec"]["activeDeadlineSeconds"] = json!(5000)
    })
    .await;
    assert_eq!(generation(&pod), 3, "activeDeadlineSeconds");
    pod = put(&cluster, &pod, |p| {
        p["spec"]["containers"][0]["image"] = json!("busybox:2")
    })
    .await;
    assert_eq!(generation(&pod), 4, "a container's image");
    pod = put(&cluster, &pod, |p| {
        p["metadata"]["annotations"] = json!({"key": "value"})
    })
    .await;
    assert_eq!(generation(&pod), 4, "metadata");
    pod = put(&cluster, &pod, |p| p["metadata"]["generation"] = json!(1)).await;
    assert_eq!(generation(&pod), 4, "a generation set by the client");
    let patched = cluster
        .patch(
            &format!("{PODS}/{name}"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"activeDeadlineSeconds": 4999}}),
        )
        .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    assert_eq!(
        generation(&patched.body),
        5,
        "a strategic merge patch of the spec"
    );

    let deleted = cluster
        .delete(
            &format!("{PODS}/{name}"),
            Some(&json!({"gracePeriodSeconds": 60})),
        )
        .await;
    assert_eq!(deleted.status, 200, "{:?}", deleted.body);
    assert_eq!(generation(&deleted.body), 6, "a graceful delete");
}

#[tokio::test]
async fn a_status_write_without_observed_generations_keeps_the_stored_ones() {
    let cluster = Cluster::start().await;
    let name = unique("observed");
    let created = cluster
        .post(
            PODS,
            &json!({"metadata": {"name": name},
                "spec": {"nodeName": unique("nonode"),
                    "containers": [{"name": "c", "image": "busybox:1"}]}}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let status_path = format!("{PODS}/{name}/status");
    let set = cluster
        .patch(
            &status_path,
            "application/strategic-merge-patch+json",
            &json!({"status": {"observedGeneration": 1, "conditions": [
                {"type": "Ready", "status": "False", "observedGeneration": 1},
                {"type": "PodScheduled", "status": "True", "observedGeneration": 1}]}}),
        )
        .await;
    assert_eq!(set.status, 200, "{:?}", set.body);
    assert_eq!(set.body["status"]["observedGeneration"], 1);

    // A PUT of the status with every observedGeneration left out clears none of them.
    let mut body = set.body.clone();
    body["status"]
        .as_object_mut()
        .expect("a status")
        .remove("observedGeneration");
    for condition in body["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
    {
        condition
            .as_object_mut()
            .expect("a condition")
            .remove("observedGeneration");
    }
    body["status"]["conditions"][0]["status"] = json!("True");
    let kept = cluster.put(&status_path, &body).await;
    assert_eq!(kept.status, 200, "{:?}", kept.body);
    assert_eq!(kept.body["status"]["observedGeneration"], 1);
    for condition in kept.body["status"]["conditions"]
        .as_array()
        .expect("conditions")
    {
        assert_eq!(condition["observedGeneration"], 1, "{condition}");
    }
    assert_eq!(kept.body["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        generation(&kept.body),
        1,
        "a status write is no spec change"
    );
}
