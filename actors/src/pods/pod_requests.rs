//! What a pod requests, as the scheduler and the kubelet's admission count it
//! (component-helpers `resource.PodRequests`): app containers and sidecars summed, each
//! regular init container on top of the sidecars started before it, the larger of the two,
//! pod-level requests when set, plus the RuntimeClass overhead. Amounts are integers in the
//! scheduler's units: millicores for `cpu`, whole units (bytes, devices) for the rest.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Container, Pod, PodSpec},
    apimachinery::pkg::api::resource::Quantity,
};

use crate::quantity::{QuantityError, milli_value, value};

/// Amounts per resource name, in the scheduler's units.
pub type ResourceAmounts = BTreeMap<String, i64>;

/// The pod's effective requests.
pub fn pod_requests(pod: &Pod) -> Result<ResourceAmounts, QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(ResourceAmounts::new());
    };
    let mut requests = aggregate_containers(spec, false, |_| {})?;
    // Pod-level resources (beta, on in 1.36) replace the containers' sum where they are set.
    let pod_level = spec
        .resources
        .as_ref()
        .and_then(|resources| resources.requests.as_ref());
    for (name, quantity) in pod_level.into_iter().flatten() {
        if name == "cpu" || name == "memory" || name.starts_with("hugepages-") {
            requests.insert(name.clone(), amount(name, quantity)?);
        }
    }
    add(&mut requests, &amounts(spec.overhead.as_ref())?);
    Ok(requests)
}

/// component-helpers' `AggregateContainerRequests`/`AggregateContainerLimits` (the limits when
/// `limits`): app containers and sidecars summed, each regular init container on top of the
/// sidecars started before it, the larger of the two. `each` sees what `ContainerFn` sees:
/// every app container's own amounts, and every init container's with the sidecars before it.
pub fn aggregate_containers(
    spec: &PodSpec,
    limits: bool,
    mut each: impl FnMut(&ResourceAmounts),
) -> Result<ResourceAmounts, QuantityError> {
    let mut total = ResourceAmounts::new();
    for container in &spec.containers {
        let own = container_amounts(container, limits)?;
        each(&own);
        add(&mut total, &own);
    }
    // While init container i runs, the sidecars declared before it run too.
    let mut sidecars = ResourceAmounts::new();
    let mut init_peak = ResourceAmounts::new();
    for container in spec.init_containers.iter().flatten() {
        let own = container_amounts(container, limits)?;
        let running = if is_sidecar(container) {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut running = own;
            add(&mut running, &sidecars);
            running
        };
        each(&running);
        max_into(&mut init_peak, &running);
    }
    max_into(&mut total, &init_peak);
    Ok(total)
}

/// A node's allocatable (or any resource list) in the scheduler's units.
pub fn amounts(
    list: Option<&BTreeMap<String, Quantity>>,
) -> Result<ResourceAmounts, QuantityError> {
    list.into_iter()
        .flatten()
        .map(|(name, quantity)| Ok((name.clone(), amount(name, quantity)?)))
        .collect()
}

/// `restartPolicy: Always` on an init container makes it a sidecar.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// Resources the scheduler tracks besides cpu, memory and ephemeral-storage (`pods` is a
/// count, not a request): extended resources (a `/` outside `kubernetes.io/`), prefixed native
/// ones, hugepages and attachable volumes. Other names (`storage`) are ignored.
pub fn is_scalar(name: &str) -> bool {
    name.contains('/') || name.starts_with("hugepages-") || name.starts_with("attachable-volumes-")
}

/// An extended resource (`example.com/gpu`): a `/` and not in the `kubernetes.io` domain. The
/// kubelet ignores requests for those its Node does not list.
pub fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// A container's own requests, or its limits when `limits`.
fn container_amounts(
    container: &Container,
    limits: bool,
) -> Result<ResourceAmounts, QuantityError> {
    amounts(container.resources.as_ref().and_then(|resources| {
        if limits {
            resources.limits.as_ref()
        } else {
            resources.requests.as_ref()
        }
    }))
}

fn amount(name: &str, quantity: &Quantity) -> Result<i64, QuantityError> {
    if name == "cpu" {
        milli_value(&quantity.0)
    } else {
        value(&quantity.0)
    }
}

/// Adds `more` into `total`, resource by resource.
fn add(total: &mut ResourceAmounts, more: &ResourceAmounts) {
    for (name, amount) in more {
        let entry = total.entry(name.clone()).or_default();
        *entry = entry.saturating_add(*amount);
    }
}

/// Raises each resource of `total` to `other`'s where that is larger.
fn max_into(total: &mut ResourceAmounts, other: &ResourceAmounts) {
    for (name, amount) in other {
        let entry = total.entry(name.clone()).or_default();
        *entry = (*entry).max(*amount);
    }
}
