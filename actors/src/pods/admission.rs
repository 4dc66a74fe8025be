//! The kubelet's predicate admission (`lifecycle/predicate.go` over the scheduler's
//! `AdmissionCheck`): may this pod run here beside the pods already admitted? Checked in the
//! kubelet's order — OS label and field, SupplementalGroupsPolicy, pod count and resources, node
//! affinity, node name, host ports, untolerated NoExecute taints — and only the first failure is
//! reported, with the kubelet's reason and text.

use std::{collections::BTreeMap, sync::Arc};

use k8s_openapi::api::core::v1::{ContainerPort, Node, Pod, PodStatus, Taint, Toleration};

use super::{
    node_affinity::matches_required_affinity,
    pod_requests::{ResourceAmounts, amounts, is_extended, is_scalar, pod_requests},
};
use crate::ports::PodEvent;

/// Why the kubelet refuses a pod: the status `reason` and the event's reason and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

impl Rejection {
    pub(crate) fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn predicate(name: &str, description: &str) -> Self {
        Self::new(name, format!("Predicate {name} failed: {description}"))
    }
}

/// Decides whether `pod` may run on `node` beside `admitted`: the pods already accepted and not
/// yet terminal (the kubelet's active pods, `pod` itself not among them). A static pod skips
/// the NoExecute taint check, as in the kubelet (an HTTP source's pods carry no toleration).
pub fn admit(pod: &Pod, node: &Node, admitted: &[Arc<Pod>]) -> Result<(), Rejection> {
    check_platform(pod, node)?;
    let unexpected = |error: crate::quantity::QuantityError| {
        Rejection::new("UnexpectedAdmissionError", error.to_string())
    };
    let status = node.status.as_ref();
    let allocatable =
        amounts(status.and_then(|status| status.allocatable.as_ref())).map_err(unexpected)?;
    let mut requested = pod_requests(pod).map_err(unexpected)?;
    // Extended resources the Node does not list are cluster-level (or DRA): not the kubelet's.
    requested.retain(|name, _| !is_extended(name) || allocatable.contains_key(name));
    let mut used = ResourceAmounts::new();
    for other in admitted {
        for (name, amount) in pod_requests(other).map_err(unexpected)? {
            *used.entry(name).or_default() += amount;
        }
    }
    check_resources(&requested, &used, &allocatable, admitted.len())?;
    if !matches_required_affinity(pod, node) {
        return Err(Rejection::predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    let wanted_node = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref());
    if wanted_node
        .is_some_and(|name| !name.is_empty() && Some(name) != node.metadata.name.as_deref())
    {
        return Err(Rejection::predicate(
            "NodeName",
            "node(s) didn't match the requested node name",
        ));
    }
    let taken: Vec<ContainerPort> = admitted
        .iter()
        .flat_map(|other| host_ports(other))
        .collect();
    if host_ports(pod)
        .iter()
        .any(|port| port_conflicts(port, &taken))
    {
        return Err(Rejection::predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default();
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.tolerations.as_deref())
        .unwrap_or_default();
    // The kubelet looks only at NoExecute taints: NoSchedule is the scheduler's business.
    let untolerated = !crate::config_source::is_static_pod(pod)
        && taints.iter().any(|taint| {
            taint.effect == "NoExecute"
                && !tolerations
                    .iter()
                    .any(|toleration| tolerates(toleration, taint))
        });
    if untolerated {
        return Err(Rejection::predicate(
            "TaintToleration",
            "node(s) had taints that the pod didn't tolerate",
        ));
    }
    Ok(())
}

/// The status the kubelet gives a refused pod: Failed, the reason, "Pod was rejected: …", and
/// the qosClass the API server already set.
pub fn rejected_status(pod: &Pod, rejection: &Rejection) -> PodStatus {
    PodStatus {
        phase: Some("Failed".to_owned()),
        reason: Some(rejection.reason.clone()),
        message: Some(format!("Pod was rejected: {}", rejection.message)),
        qos_class: pod
            .status
            .as_ref()
            .and_then(|status| status.qos_class.clone()),
        ..PodStatus::default()
    }
}

/// The Warning event the kubelet records on the refused pod (its message has no prefix).
pub fn rejection_event(rejection: &Rejection) -> PodEvent {
    PodEvent {
        warning: true,
        reason: rejection.reason.clone(),
        message: rejection.message.clone(),
        annotations: BTreeMap::new(),
    }
}

/// The checks preemption cannot help with, made first: the pod's `kubernetes.io/os` label,
/// `spec.os`, and a Strict
/// SupplementalGroupsPolicy on a Node that does not declare support for it.
fn check_platform(pod: &Pod, node: &Node) -> Result<(), Rejection> {
    const OS_LABEL: &str = "kubernetes.io/os";
    // A Node label that is missing or names another OS is read as this OS (the kubelet
    // corrects the label on its next status sync), so the pod's label is compared with ours.
    let this_os = std::env::consts::OS;
    let pod_os = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(OS_LABEL));
    if pod_os.is_some_and(|os| os != this_os) {
        return Err(Rejection::new(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        ));
    }
    let spec = pod.spec.as_ref();
    if spec
        .and_then(|spec| spec.os.as_ref())
        .is_some_and(|os| os.name != this_os)
    {
        return Err(Rejection::new(
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS",
        ));
    }
    let policy = spec
        .and_then(|spec| spec.security_context.as_ref())
        .and_then(|context| context.supplemental_groups_policy.as_deref());
    let supported = node
        .status
        .as_ref()
        .and_then(|status| status.features.as_ref())
        .and_then(|features| features.supplemental_groups_policy)
        .unwrap_or(false);
    if policy == Some("Strict") && !supported {
        return Err(Rejection::new(
            "SupplementalGroupsPolicyNotSupported",
            "SupplementalGroupsPolicy=Strict is not supported in this node",
        ));
    }
    Ok(())
}

/// The scheduler's `fitsRequest`: pods first, then cpu, memory, ephemeral-storage, then the
/// scalar resources (by name here; Go's map order is random).
fn check_resources(
    requested: &ResourceAmounts,
    used: &ResourceAmounts,
    allocatable: &ResourceAmounts,
    pods: usize,
) -> Result<(), Rejection> {
    let get = |list: &ResourceAmounts, name: &str| list.get(name).copied().unwrap_or(0);
    let insufficient = |name: &str, requested: i64, used: i64, capacity: i64| {
        Rejection::new(
            format!("OutOf{name}"),
            format!(
                "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
        )
    };
    let pods = i64::try_from(pods).unwrap_or(i64::MAX);
    let allowed_pods = get(allocatable, "pods");
    if pods + 1 > allowed_pods {
        return Err(insufficient("pods", 1, pods, allowed_pods));
    }
    let scalars = requested
        .keys()
        .filter(|name| is_scalar(name))
        .map(String::as_str);
    for name in ["cpu", "memory", "ephemeral-storage"]
        .into_iter()
        .chain(scalars)
    {
        let wanted = get(requested, name);
        if wanted > 0 && wanted > get(allocatable, name) - get(used, name) {
            return Err(insufficient(
                name,
                wanted,
                get(used, name),
                get(allocatable, name),
            ));
        }
    }
    Ok(())
}

/// Host ports of the app containers and the sidecars (which run as long as the pod).
fn host_ports(pod: &Pod) -> Vec<ContainerPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|container| super::pod_requests::is_sidecar(container));
    sidecars
        .chain(&spec.containers)
        .flat_map(|container| container.ports.iter().flatten())
        .filter(|port| port.host_port.unwrap_or(0) > 0)
        .cloned()
        .collect()
}

/// `HostPortInfo.CheckConflict`: same protocol and port, and either side bound to all addresses
/// (`0.0.0.0`, the default) or both to the same one.
fn port_conflicts(wanted: &ContainerPort, taken: &[ContainerPort]) -> bool {
    let key = |port: &ContainerPort| {
        let ip = port
            .host_ip
            .as_deref()
            .filter(|ip| !ip.is_empty())
            .unwrap_or("0.0.0.0")
            .to_owned();
        let protocol = port
            .protocol
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP")
            .to_owned();
        (ip, protocol, port.host_port.unwrap_or(0))
    };
    let (ip, protocol, port) = key(wanted);
    taken
        .iter()
        .map(key)
        .any(|(other_ip, other_protocol, other_port)| {
            other_protocol == protocol
                && other_port == port
                && (ip == "0.0.0.0" || other_ip == "0.0.0.0" || other_ip == ip)
        })
}

/// `Toleration.ToleratesTaint`: empty effect or key match any; operator Exists ignores the
/// value, Equal (the default) compares it.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    let key = toleration.key.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect || !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}
