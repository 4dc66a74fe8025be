//! `resourceFieldRef`: a container's requests or limits as a number, divided by the divisor and
//! rounded up, as the kubelet's `containerResourceRuntimeValue`. A cpu, memory or
//! ephemeral-storage limit the container leaves unset (or zero) reads as the pod-level limit
//! (`spec.resources.limits`, PodLevelResources: cpu and memory) or else the Node's allocatable
//! (`defaultPodLimitsForDownwardAPI`); an init container named by `containerName` is not
//! defaulted, as the kubelet defaults only the pod's regular containers.

use k8s_openapi::{
    api::core::v1::{Container, Pod, ResourceFieldSelector},
    apimachinery::pkg::api::resource::Quantity,
};

use super::env::{EnvContext, EnvError};
use crate::quantity::{milli_value, value};

/// The value of `field` for `container` (or for the container `field.containerName` names).
pub fn resource_field_value(
    context: &EnvContext<'_>,
    container: &Container,
    field: &ResourceFieldSelector,
) -> Result<String, EnvError> {
    let (container, defaulted) = match field
        .container_name
        .as_deref()
        .filter(|name| !name.is_empty())
    {
        None => (container, true),
        Some(name) => find_container(context, name)?,
    };
    let (kind, resource) = field
        .resource
        .split_once('.')
        .filter(|(kind, _)| matches!(*kind, "limits" | "requests"))
        .ok_or_else(|| EnvError::UnsupportedResource(field.resource.clone()))?;
    let defaults = matches!(resource, "cpu" | "memory" | "ephemeral-storage");
    if !defaults && !resource.starts_with("hugepages-") {
        return Err(EnvError::UnsupportedResource(field.resource.clone()));
    }
    let resources = container.resources.as_ref();
    let list = match kind {
        "limits" => resources.and_then(|resources| resources.limits.as_ref()),
        _ => resources.and_then(|resources| resources.requests.as_ref()),
    };
    let mut amount = list.and_then(|list| list.get(resource));
    if kind == "limits" && defaults && defaulted && is_unset(amount)? {
        amount = default_limit(context, resource)?.or(amount);
    }
    let zero = Quantity("0".to_owned());
    let amount = amount.unwrap_or(&zero);
    // An unset (or zero) divisor means 1; a positive one is at least 1 after rounding up.
    let divisor = match &field.divisor {
        Some(divisor) if milli_value(&divisor.0)? != 0 => Some(divisor),
        _ => None,
    };
    let (numerator, denominator) = if resource == "cpu" {
        let divisor = divisor.map_or(Ok(1000), |divisor| milli_value(&divisor.0))?;
        (milli_value(&amount.0)?, divisor)
    } else {
        let divisor = divisor.map_or(Ok(1), |divisor| value(&divisor.0))?;
        (value(&amount.0)?, divisor)
    };
    Ok(ceiling_division(numerator, denominator).to_string())
}

/// `MergeContainerResourceLimits`: a limit absent or zero is replaced.
fn is_unset(amount: Option<&Quantity>) -> Result<bool, EnvError> {
    Ok(match amount {
        None => true,
        Some(quantity) => milli_value(&quantity.0)? == 0,
    })
}

/// What an unset limit of `resource` reads as: the Node's allocatable, replaced by the pod's
/// own non-zero cpu or memory limit when the pod sets any pod-level limit it supports; `None`
/// where the Node reports no such resource.
fn default_limit<'a>(
    context: &EnvContext<'a>,
    resource: &str,
) -> Result<Option<&'a Quantity>, EnvError> {
    let Some(allocatable) = context.node_allocatable.get(resource) else {
        return Ok(None);
    };
    if matches!(resource, "cpu" | "memory")
        && let Some(limits) = pod_level_limits(context.pod)
        && let Some(limit) = limits.get(resource)
        && !is_unset(Some(limit))?
    {
        return Ok(Some(limit));
    }
    Ok(Some(allocatable))
}

/// `spec.resources.limits` when it names a resource pod-level resources support (cpu, memory,
/// hugepages), as `IsPodLevelLimitsSet`.
fn pod_level_limits(pod: &Pod) -> Option<&std::collections::BTreeMap<String, Quantity>> {
    let limits = pod.spec.as_ref()?.resources.as_ref()?.limits.as_ref()?;
    limits
        .keys()
        .any(|name| matches!(name.as_str(), "cpu" | "memory") || name.starts_with("hugepages-"))
        .then_some(limits)
}

/// The container `name` (regular containers first), and whether its limits are defaulted:
/// only a regular container's are.
fn find_container<'a>(
    context: &EnvContext<'a>,
    name: &str,
) -> Result<(&'a Container, bool), EnvError> {
    let spec = context.pod.spec.as_ref();
    let containers = spec
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default();
    let init = spec
        .and_then(|spec| spec.init_containers.as_deref())
        .unwrap_or_default();
    let named = |container: &&Container| container.name == name;
    if let Some(container) = containers.iter().find(named) {
        return Ok((container, true));
    }
    init.iter()
        .find(named)
        .map(|container| (container, false))
        .ok_or_else(|| EnvError::ContainerNotFound(name.to_owned()))
}

/// `math.Ceil(float64(a) / float64(b))` on integers.
fn ceiling_division(numerator: i64, denominator: i64) -> i64 {
    let quotient = numerator / denominator;
    if numerator % denominator != 0 && (numerator > 0) == (denominator > 0) {
        quotient + 1
    } else {
        quotient
    }
}
