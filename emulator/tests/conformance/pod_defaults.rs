//! A created Pod as kube-apiserver stores it: decoded into its type (unknown fields dropped),
//! defaulted (`pkg/apis/core/v1/defaults.go`: spec, containers, ports, probes, volumes, image
//! volumes' pull policy), admitted by the Priority plugin (no default
//! PriorityClass: priority 0, `PreemptLowerPriority`) and given its initial status; a written
//! status read back as Go serialises it.

use serde_json::{Value, json};

use crate::common::{Cluster, unique};

/// The pod is bound to a node that does not exist, so nothing on a real cluster runs it; the
/// assertions are on the create answer, before any controller writes the pod.
#[tokio::test]
async fn a_created_pod_is_defaulted_and_keeps_what_the_client_set() {
    let cluster = Cluster::start().await;
    let name = unique("defaults");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": unique("nonode"), "restartPolicy": "Never", "colour": "red",
            "containers": [
                {"name": "untagged", "image": "busybox",
                    "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]},
                {"name": "tagged", "image": "busybox:1.36", "terminationMessagePolicy": "FallbackToLogsOnError",
                    "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 5}},
            ],
            "volumes": [{"name": "token", "secret": {"secretName": unique("nosecret")}}, {"name": "scratch"},
                {"name": "latest", "image": {"reference": "registry.test/kitten"}},
                {"name": "tagged", "image": {"reference": "registry.test/kitten:1.7"}}]},
        "status": {"phase": "Running"}});
    let created = cluster.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let spec = &created.body["spec"];
    for (field, expected) in [
        ("restartPolicy", json!("Never")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
        ("priority", json!(0)),
        ("preemptionPolicy", json!("PreemptLowerPriority")),
    ] {
        assert_eq!(spec.get(field), Some(&expected), "spec.{field}: {spec}");
    }
    assert_eq!(
        spec.get("colour"),
        None,
        "a field the Pod type lacks is dropped"
    );
    let container = |i: usize, field: &str| spec["containers"][i].get(field).cloned();
    for (i, pull, message_policy) in [
        (0, "Always", "File"),
        (1, "IfNotPresent", "FallbackToLogsOnError"),
    ] {
        assert_eq!(container(i, "imagePullPolicy"), Some(json!(pull)), "{spec}");
        assert_eq!(
            container(i, "terminationMessagePolicy"),
            Some(json!(message_policy))
        );
        assert_eq!(
            container(i, "terminationMessagePath"),
            Some(json!("/dev/termination-log"))
        );
    }
    assert_eq!(container(0, "resources"), Some(json!({})));
    assert_eq!(
        spec["containers"][1]["resources"]["requests"],
        json!({"cpu": "100m", "memory": "64Mi"}),
        "requests default to limits"
    );
    assert_eq!(spec["containers"][1]["ports"][0]["protocol"], "TCP");
    assert_eq!(
        spec["containers"][1]["readinessProbe"],
        json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "periodSeconds": 5,
            "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    );
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    let token = volumes.iter().find(|v| v["name"] == "token");
    assert_eq!(
        token.map(|v| v["secret"]["defaultMode"].clone()),
        Some(json!(420)),
        "{volumes:?}"
    );
    let scratch = volumes.iter().find(|v| v["name"] == "scratch");
    assert_eq!(
        scratch,
        Some(&json!({"name": "scratch", "emptyDir": {}})),
        "a volume without a source"
    );
    for (name, pull) in [("latest", "Always"), ("tagged", "IfNotPresent")] {
        let image = volumes.iter().find(|v| v["name"] == name);
        assert_eq!(
            image.map(|v| v["image"]["pullPolicy"].clone()),
            Some(json!(pull)),
            "an image volume's pull policy as a container's: {volumes:?}"
        );
    }
    assert_eq!(
        spec["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
        "v1"
    );
    let status = &created.body["status"];
    assert_eq!(
        (status.get("phase"), status.get("qosClass")),
        (Some(&json!("Pending")), Some(&json!("Burstable"))),
        "{status}"
    );
    let read = cluster
        .get(&format!("/api/v1/namespaces/default/pods/{name}"))
        .await;
    assert_eq!(
        read.body["spec"]["containers"], spec["containers"],
        "read back as created"
    );
    assert_eq!(read.body["spec"].get("colour"), None::<&Value>);
}

/// Go's `PodCondition` times and `ContainerStateRunning.startedAt` are `metav1.Time` structs (a
/// zero one is `null`), `ContainerStatus.lastState` a struct (`{}`): a status written without
/// them reads back with them.
#[tokio::test]
async fn a_pod_status_reads_back_as_go_serialises_it() {
    let cluster = Cluster::start().await;
    let name = unique("gostatus");
    let pod = json!({"metadata": {"name": name}, "spec": {"nodeName": unique("nonode"),
        "containers": [{"name": "c", "image": "busybox:1.36"}]}});
    let created = cluster.post("/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{"name": "c", "image": "busybox:1.36", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"running": {}}}]}});
    let patched = cluster
        .patch(
            &format!("/api/v1/namespaces/default/pods/{name}/status"),
            "application/merge-patch+json",
            &status,
        )
        .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    let read = cluster
        .get(&format!("/api/v1/namespaces/default/pods/{name}"))
        .await;
    let condition = &read.body["status"]["conditions"][0];
    assert_eq!(
        (
            condition.get("lastProbeTime"),
            condition.get("lastTransitionTime")
        ),
        (Some(&Value::Null), Some(&Value::Null)),
        "{condition}"
    );
    let container = &read.body["status"]["containerStatuses"][0];
    assert_eq!(container.get("lastState"), Some(&json!({})), "{container}");
    assert_eq!(
        container["state"]["running"].get("startedAt"),
        Some(&Value::Null),
        "{container}"
    );
}

/// The Priority admission plugin (`plugin/pkg/admission/priority`) refuses a pod whose own
/// priority or preemption policy differs from what its (here: no) PriorityClass gives.
#[tokio::test]
async fn a_pod_with_its_own_priority_is_forbidden() {
    let cluster = Cluster::start().await;
    for (field, value, shown) in [
        ("priority", json!(5), "priority (5)"),
        (
            "preemptionPolicy",
            json!("Never"),
            "PreemptionPolicy (Never)",
        ),
    ] {
        let name = unique("ownprio");
        let mut pod = json!({"metadata": {"name": name}, "spec": {"nodeName": unique("nonode"),
            "containers": [{"name": "c", "image": "busybox:1.36"}]}});
        pod["spec"][field] = value;
        let refused = cluster.post("/api/v1/namespaces/default/pods", &pod).await;
        assert_eq!(
            (refused.status, refused.body["reason"].as_str()),
            (403, Some("Forbidden")),
            "{:?}",
            refused.body
        );
        let message = refused.body["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with(&format!("pods {name:?} is forbidden: the "))
                && message.contains(&format!("{shown} must not be provided in pod spec")),
            "{message}"
        );
    }
}
