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

#[test]
fn a_priority_or_policy_other_than_the_class_gives_is_refused() {
    for (spec, refused) in [
        (json!({"priority": 0}), None),
        (
            json!({"priorityClassName": "system-node-critical", "priority": 2_000_001_000}),
            None,
        ),
        (json!({"priorityClassName": "custom", "priority": 5}), None),
        (
            json!({"priority": 5}),
            Some(
                "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name",
            ),
        ),
        (
            json!({"preemptionPolicy": "Never"}),
            Some(
                "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
            ),
        ),
    ] {
        assert_eq!(
            priority_refusal(&json!({"spec": spec})).as_deref(),
            refused,
            "{spec}"
        );
    }
}

#[test]
fn probes_ports_and_volumes_get_their_defaults() {
    let pod = prepared(json!({"spec": {
        "containers": [{"name": "c", "image": "i:1", "ports": [{"containerPort": 80}],
            "readinessProbe": {"httpGet": {"port": 80}, "periodSeconds": 5}}],
        "volumes": [{"name": "s", "secret": {"secretName": "s"}}, {"name": "h", "hostPath": {"path": "/x"}},
            {"name": "m", "configMap": {"name": "m", "defaultMode": 256}},
            {"name": "kitten", "image": {"reference": "registry.test/kitten:1.7"}},
            {"name": "latest", "image": {"reference": "registry.test/kitten"}},
            {"name": "never", "image": {"reference": "registry.test/kitten", "pullPolicy": "Never"}}]}}));
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["protocol"], "TCP");
    assert_eq!(
        container["readinessProbe"],
        json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "periodSeconds": 5,
            "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    );
    let volumes = &pod["spec"]["volumes"];
    assert_eq!(volumes[0]["secret"]["defaultMode"], 420);
    assert_eq!(volumes[1]["hostPath"]["type"], "");
    assert_eq!(volumes[2]["configMap"]["defaultMode"], 256);
    let policies: Vec<&Value> = (3..6).map(|i| &volumes[i]["image"]["pullPolicy"]).collect();
    assert_eq!(policies, ["IfNotPresent", "Always", "Never"]);
}

#[test]
fn field_references_tokens_and_sourceless_volumes_get_their_defaults() {
    let pod = prepared(json!({"spec": {
        "containers": [{"name": "c", "image": "i:1",
            "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}],
        "volumes": [{"name": "scratch"},
            {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
                {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}]}}));
    assert_eq!(
        pod["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
        "v1"
    );
    let volumes = &pod["spec"]["volumes"];
    assert_eq!(volumes[0], json!({"name": "scratch", "emptyDir": {}}));
    let sources = &volumes[1]["projected"]["sources"];
    assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3600);
    assert_eq!(
        sources[1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
        "v1"
    );
    assert_eq!(volumes[1]["projected"]["defaultMode"], 420);
}

#[test]
fn default_toleration_seconds_adds_not_ready_and_unreachable_unless_tolerated() {
    let pod = prepared(json!({"spec": {"containers": []}}));
    assert_eq!(
        pod["spec"]["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    let own = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5});
    let pod = prepared(json!({"spec": {"tolerations": [own.clone()]}}));
    assert_eq!(
        pod["spec"]["tolerations"],
        json!([own, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}])
    );
    let everything = json!({"operator": "Exists"});
    let pod = prepared(json!({"spec": {"tolerations": [everything.clone()]}}));
    assert_eq!(pod["spec"]["tolerations"], json!([everything]));
}

#[test]
fn the_service_account_alias_follows_the_name_and_fills_it_when_alone() {
    let aliased = |spec: Value| {
        let mut pod = json!({"spec": spec});
        if let Some(map) = pod.as_object_mut() {
            alias_service_account(map);
        }
        pod["spec"].clone()
    };
    assert_eq!(
        aliased(json!({"serviceAccount": "robot"})),
        json!({"serviceAccountName": "robot", "serviceAccount": "robot"})
    );
    assert_eq!(
        aliased(json!({"serviceAccountName": "new", "serviceAccount": "old"})),
        json!({"serviceAccountName": "new", "serviceAccount": "new"}),
        "the name wins"
    );
    assert_eq!(
        aliased(json!({"serviceAccountName": "", "serviceAccount": ""})),
        json!({})
    );
}
