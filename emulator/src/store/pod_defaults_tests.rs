use super::*;

fn prepared(pod: Value) -> Value {
    let mut pod = pod;
    if let Some(map) = pod.as_object_mut() {
        prepare_pod(map);
    }
    pod
}

#[test]
fn image_pull_policy_follows_the_parsed_tag() {
    for (image, policy) in [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("registry.local:5000/busybox", "Always"),
        ("registry.local:5000/busybox:1", "IfNotPresent"),
        ("busybox@sha256:abcd", "IfNotPresent"),
        ("busybox:latest@sha256:abcd", "Always"),
    ] {
        let pod = prepared(json!({"spec": {"containers": [{"name": "c", "image": image}]}}));
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"], policy,
            "{image}"
        );
    }
}

#[test]
fn priority_is_admitted_from_the_class_and_client_fields_are_kept() {
    let pod = prepared(json!({"spec": {"containers": []}}));
    assert_eq!(
        (&pod["spec"]["priority"], &pod["spec"]["preemptionPolicy"]),
        (&json!(0), &json!("PreemptLowerPriority"))
    );
    let pod = prepared(json!({"spec": {"priorityClassName": "system-node-critical"}}));
    assert_eq!(pod["spec"]["priority"], 2_000_001_000);
    let pod = prepared(json!({"spec": {"preemptionPolicy": "Never", "restartPolicy": "Never"}}));
    assert_eq!(
        (
            &pod["spec"]["preemptionPolicy"],
            &pod["spec"]["restartPolicy"]
        ),
        (&json!("Never"), &json!("Never"))
    );
    let mut updated = json!({"spec": {"containers": []}});
    if let Some(map) = updated.as_object_mut() {
        keep_admitted_priority(
            &json!({"spec": {"priority": 7, "preemptionPolicy": "Never"}}),
            map,
        );
    }
    assert_eq!(updated["spec"]["priority"], 7);
    assert_eq!(updated["spec"]["preemptionPolicy"], "Never");
}

#[test]
fn requests_default_to_limits_and_set_the_qos_class() {
    let pod = prepared(json!({"spec": {"containers": [{"name": "c", "image": "i:1",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}));
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    let pod = prepared(
        json!({"spec": {"containers": [{"name": "c", "image": "i:1"}],
        "initContainers": [{"name": "i", "image": "i:1", "resources": {"requests": {"cpu": "1"}}}]}}),
    );
    assert_eq!(pod["status"]["qosClass"], "Burstable");
    assert_eq!(
        pod["spec"]["initContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    assert_eq!(pod["spec"]["containers"][0]["resources"], json!({}));
}
