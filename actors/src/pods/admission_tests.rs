//! Table tests of the kubelet's predicate admission: one row per reason, with the kubelet's
//! exact texts, and the request arithmetic (init containers, sidecars, overhead).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{
    admission::{Rejection, admit, rejected_status, rejection_event},
    pod_requests::pod_requests,
};

fn node(extra: Value) -> Node {
    let mut node = json!({
        "metadata": {"name": "worker-1", "labels": {"kubernetes.io/os": "linux", "zone": "a", "cores": "8"}},
        "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "3", "ephemeral-storage": "10Gi", "example.com/gpu": "1"}}
    });
    merge(&mut node, extra);
    serde_json::from_value(node).expect("a Node")
}

fn pod(spec: Value) -> Pod {
    let mut pod = json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {"nodeName": "worker-1", "containers": [{"name": "app", "image": "busybox"}]}
    });
    merge(&mut pod, json!({ "spec": spec }));
    serde_json::from_value(pod).expect("a Pod")
}

fn requesting(cpu: &str, memory: &str) -> Pod {
    pod(json!({"containers": [{"name": "app", "image": "busybox",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}))
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, extra) => *base = extra,
    }
}

fn refused(reason: &str, message: &str) -> Result<(), Rejection> {
    Err(Rejection {
        reason: reason.to_owned(),
        message: message.to_owned(),
    })
}

/// (case, pod, node, pods already admitted, expected verdict)
type AdmissionCase = (&'static str, Pod, Node, Vec<Pod>, Result<(), Rejection>);

#[test]
fn every_refusal_has_the_kubelets_reason_and_message() {
    let busy_port = pod(json!({"containers": [{"name": "web", "image": "nginx",
        "ports": [{"containerPort": 80, "hostPort": 8080}]}]}));
    let cases: Vec<AdmissionCase> = vec![
        (
            "fits",
            requesting("500m", "100Mi"),
            node(json!({})),
            vec![],
            Ok(()),
        ),
        (
            "too many pods",
            pod(json!({})),
            node(json!({})),
            vec![pod(json!({})), pod(json!({})), pod(json!({}))],
            refused(
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
            ),
        ),
        (
            "cpu over allocatable",
            requesting("2", "1Mi"),
            node(json!({})),
            vec![],
            refused(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000",
            ),
        ),
        (
            "cpu used by admitted pods",
            requesting("600m", "1Mi"),
            node(json!({})),
            vec![requesting("500m", "0")],
            refused(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000",
            ),
        ),
        (
            "memory",
            requesting("100m", "2Gi"),
            node(json!({})),
            vec![],
            refused(
                "OutOfmemory",
                "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824",
            ),
        ),
        (
            "ephemeral storage",
            pod(json!({"containers": [{"name": "app", "image": "busybox",
            "resources": {"requests": {"ephemeral-storage": "11Gi"}}}]})),
            node(json!({})),
            vec![],
            refused(
                "OutOfephemeral-storage",
                "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240",
            ),
        ),
        (
            "extended resource",
            pod(json!({"containers": [{"name": "app", "image": "busybox",
            "resources": {"requests": {"example.com/gpu": "2"}, "limits": {"example.com/gpu": "2"}}}]})),
            node(json!({})),
            vec![],
            refused(
                "OutOfexample.com/gpu",
                "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1",
            ),
        ),
        (
            "extended resource the node does not know is ignored",
            pod(json!({"containers": [{"name": "app", "image": "busybox",
            "resources": {"requests": {"other.io/fpga": "4"}}}]})),
            node(json!({})),
            vec![],
            Ok(()),
        ),
        (
            "hugepages the node lacks",
            pod(json!({"containers": [{"name": "app", "image": "busybox",
            "resources": {"requests": {"hugepages-2Mi": "2Mi", "memory": "1Mi"}}}]})),
            node(json!({})),
            vec![],
            refused(
                "OutOfhugepages-2Mi",
                "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0",
            ),
        ),
        (
            "node selector",
            pod(json!({"nodeSelector": {"zone": "b"}})),
            node(json!({})),
            vec![],
            refused(
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            ),
        ),
        (
            "required affinity",
            pod(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]}}}}),
            ),
            node(json!({})),
            vec![],
            refused(
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            ),
        ),
        (
            "another node's pod",
            pod(json!({"nodeName": "worker-2"})),
            node(json!({})),
            vec![],
            refused(
                "NodeName",
                "Predicate NodeName failed: node(s) didn't match the requested node name",
            ),
        ),
        (
            "host port taken",
            busy_port.clone(),
            node(json!({})),
            vec![busy_port.clone()],
            refused(
                "NodePorts",
                "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
            ),
        ),
        (
            "NoExecute taint",
            pod(json!({})),
            node(
                json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}),
            ),
            vec![],
            refused(
                "TaintToleration",
                "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
            ),
        ),
        (
            "a static pod skips the taint check",
            {
                let mut pod = pod(json!({}));
                pod.metadata.annotations =
                    Some([("kubernetes.io/config.source".to_owned(), "http".to_owned())].into());
                pod
            },
            node(
                json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}),
            ),
            vec![],
            Ok(()),
        ),
        (
            "NoSchedule taints are the scheduler's",
            pod(json!({})),
            node(json!({"spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}})),
            vec![],
            Ok(()),
        ),
        (
            "tolerated NoExecute taint",
            pod(json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db"}]})),
            node(
                json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}),
            ),
            vec![],
            Ok(()),
        ),
        (
            "only the first failure is reported",
            pod(
                json!({"nodeSelector": {"zone": "b"}, "containers": [{"name": "app", "image": "x",
            "resources": {"requests": {"cpu": "3"}}}]}),
            ),
            node(json!({})),
            vec![],
            refused(
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 1000",
            ),
        ),
        (
            "a node without allocatable pods admits nothing",
            pod(json!({})),
            node(json!({"status": {"allocatable": {"pods": "0"}}})),
            vec![],
            refused(
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 0, capacity: 0",
            ),
        ),
        (
            "a bad quantity is an error, not a guess",
            pod(json!({"overhead": {"cpu": "lots"}})),
            node(json!({})),
            vec![],
            refused(
                "UnexpectedAdmissionError",
                "invalid quantity \"lots\": expected a number, such as 100Mi",
            ),
        ),
    ];
    for (name, pod, node, admitted, expected) in cases {
        let admitted: Vec<Arc<Pod>> = admitted.into_iter().map(Arc::new).collect();
        assert_eq!(admit(&pod, &node, &admitted), expected, "{name}");
    }
}

#[test]
fn node_affinity_operators_match_as_the_scheduler() {
    let term = |expressions: Value| {
        pod(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}}),
        )
    };
    let cases = [
        (
            json!([{"key": "zone", "operator": "In", "values": ["a", "b"]}]),
            true,
        ),
        (
            json!([{"key": "zone", "operator": "In", "values": ["b"]}]),
            false,
        ),
        (
            json!([{"key": "rack", "operator": "NotIn", "values": ["r1"]}]),
            true,
        ),
        (json!([{"key": "zone", "operator": "Exists"}]), true),
        (json!([{"key": "zone", "operator": "DoesNotExist"}]), false),
        (
            json!([{"key": "cores", "operator": "Gt", "values": ["4"]}]),
            true,
        ),
        (
            json!([{"key": "cores", "operator": "Lt", "values": ["4"]}]),
            false,
        ),
        (
            json!([{"key": "zone", "operator": "Gt", "values": ["4"]}]),
            false,
        ),
        (
            json!([{"key": "cores", "operator": "Gt", "values": ["x"]}]),
            false,
        ),
        (
            json!([{"key": "zone", "operator": "Exists"}, {"key": "zone", "operator": "In", "values": ["c"]}]),
            false,
        ),
        (json!([]), false),
    ];
    for (expressions, fits) in cases {
        let result = admit(&term(expressions.clone()), &node(json!({})), &[]);
        assert_eq!(result.is_ok(), fits, "{expressions}");
    }
    let by_field = pod(
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-2"]}]},
                               {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-1"]}]}]}}}}),
    );
    assert_eq!(
        admit(&by_field, &node(json!({})), &[]),
        Ok(()),
        "terms are ORed"
    );
}

#[test]
fn host_ports_conflict_by_protocol_port_and_address() {
    let with_port =
        |port: Value| pod(json!({"containers": [{"name": "c", "image": "x", "ports": [port]}]}));
    let cases = [
        (
            json!({"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}),
            true,
        ),
        (json!({"containerPort": 80, "hostPort": 8081}), true),
        (
            json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"}),
            true,
        ),
        (json!({"containerPort": 80}), true),
        (json!({"containerPort": 80, "hostPort": 8080}), false),
        (
            json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1", "protocol": "TCP"}),
            false,
        ),
    ];
    let taken = Arc::new(with_port(
        json!({"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}),
    ));
    for (port, fits) in cases {
        let result = admit(
            &with_port(port.clone()),
            &node(json!({})),
            std::slice::from_ref(&taken),
        );
        assert_eq!(result.is_ok(), fits, "{port}");
    }
    let sidecar = pod(
        json!({"initContainers": [{"name": "proxy", "image": "x", "restartPolicy": "Always",
        "ports": [{"containerPort": 1, "hostPort": 9090}]}]}),
    );
    let wants = with_port(json!({"containerPort": 2, "hostPort": 9090}));
    assert!(
        admit(&wants, &node(json!({})), &[Arc::new(sidecar)]).is_err(),
        "a sidecar's host port is taken"
    );
}

#[test]
fn requests_count_init_containers_sidecars_and_overhead_as_the_scheduler() {
    let container = |name: &str, cpu: &str, sidecar: bool| {
        let mut container =
            json!({"name": name, "image": "x", "resources": {"requests": {"cpu": cpu}}});
        if sidecar {
            container["restartPolicy"] = json!("Always");
        }
        container
    };
    let cases = [
        (
            "sum of app containers",
            json!({"containers": [container("a", "200m", false), container("b", "300m", false)]}),
            500,
        ),
        (
            "largest init container wins",
            json!({"containers": [container("a", "200m", false)],
            "initContainers": [container("i", "700m", false)]}),
            700,
        ),
        (
            "sidecars add up and stay",
            json!({"containers": [container("a", "200m", false)],
            "initContainers": [container("s", "100m", true), container("i", "250m", false)]}),
            350,
        ),
        (
            "overhead is added",
            json!({"containers": [container("a", "0.1", false)], "overhead": {"cpu": "50m"}}),
            150,
        ),
        (
            "pod-level requests replace the sum",
            json!({"containers": [container("a", "200m", false)],
            "resources": {"requests": {"cpu": "1"}}}),
            1000,
        ),
    ];
    for (name, spec, millicores) in cases {
        let requests = pod_requests(&pod(spec)).expect("valid quantities");
        assert_eq!(requests.get("cpu"), Some(&millicores), "{name}");
    }
}

#[test]
fn a_rejected_pod_fails_with_the_kubelets_status_and_event() {
    let mut rejected = requesting("2", "0");
    rejected.status = Some(k8s_openapi::api::core::v1::PodStatus {
        qos_class: Some("Burstable".to_owned()),
        ..Default::default()
    });
    let rejection = admit(&rejected, &node(json!({})), &[]).expect_err("over cpu");
    let status = rejected_status(&rejected, &rejection);
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000"
        )
    );
    assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
    let event = rejection_event(&rejection);
    assert!(event.warning);
    assert_eq!(event.reason, "OutOfcpu");
    assert_eq!(event.message, rejection.message);
}
