//! `resourceFieldRef`: a container's requests or limits as a number, divided by the divisor and
//! rounded up, as the kubelet's `containerResourceRuntimeValue`. A cpu, memory or
//! ephemeral-storage limit the container does not set reads as the Node's allocatable
//! (`defaultPodLimitsForDownwardAPI`); pod-level limits are not consulted here.

use k8s_openapi::{
    api::core::v1::{Container, ResourceFieldSelector},
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
    let container = match field
        .container_name
        .as_deref()
        .filter(|name| !name.is_empty())
    {
        None => container,
        Some(name) => find_container(context, name)?,
    };
    let (kind, resource) = field
        .resource
        .split_once('.')
        .filter(|(kind, _)| matches!(*kind, "limits" | "requests"))
        .ok_or_else(|| EnvError::UnsupportedResource(field.resource.clone()))?;
    let defaulted = matches!(resource, "cpu" | "memory" | "ephemeral-storage");
    if !defaulted && !resource.starts_with("hugepages-") {
        return Err(EnvError::UnsupportedResource(field.resource.clone()));
    }
    let resources = container.resources.as_ref();
    let list = match kind {
        "limits" => resources.and_then(|resources| resources.limits.as_ref()),
        _ => resources.and_then(|resources| resources.requests.as_ref()),
    };
    let mut amount = list.and_then(|list| list.get(resource));
    if amount.is_none() && kind == "limits" && defaulted {
        amount = context.node_allocatable.get(resource);
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

fn find_container<'a>(context: &EnvContext<'a>, name: &str) -> Result<&'a Container, EnvError> {
    let spec = context.pod.spec.as_ref();
    let containers = spec
        .map(|spec| spec.containers.as_slice())
        .unwrap_or_default();
    let init = spec
        .and_then(|spec| spec.init_containers.as_deref())
        .unwrap_or_default();
    containers
        .iter()
        .chain(init)
        .find(|container| container.name == name)
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
