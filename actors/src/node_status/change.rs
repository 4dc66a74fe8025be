//! Whether a newly computed status differs from the last known one, as the kubelet's
//! `nodeStatusHasChanged` decides: conditions compared by type with heartbeat times blanked,
//! everything else compared whole, resource quantities by value. Heartbeats alone never count.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{NodeCondition, NodeStatus},
    apimachinery::pkg::api::resource::Quantity,
};

use crate::quantity::parse_quantity;

pub fn status_changed(original: Option<&NodeStatus>, updated: &NodeStatus) -> bool {
    let Some(original) = original else {
        return true;
    };
    if conditions_without_heartbeats(original.conditions.as_deref())
        != conditions_without_heartbeats(updated.conditions.as_deref())
    {
        return true;
    }
    if !same_quantities(original.capacity.as_ref(), updated.capacity.as_ref())
        || !same_quantities(original.allocatable.as_ref(), updated.allocatable.as_ref())
    {
        return true;
    }
    let rest = |status: &NodeStatus| NodeStatus {
        conditions: None,
        capacity: None,
        allocatable: None,
        ..status.clone()
    };
    rest(original) != rest(updated)
}

fn conditions_without_heartbeats(conditions: Option<&[NodeCondition]>) -> Vec<NodeCondition> {
    let mut list: Vec<NodeCondition> = conditions
        .unwrap_or_default()
        .iter()
        .map(|condition| NodeCondition {
            last_heartbeat_time: None,
            ..condition.clone()
        })
        .collect();
    list.sort_by(|a, b| a.type_.cmp(&b.type_));
    list
}

fn same_quantities(
    a: Option<&BTreeMap<String, Quantity>>,
    b: Option<&BTreeMap<String, Quantity>>,
) -> bool {
    let empty = BTreeMap::new();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    a.len() == b.len()
        && a.iter().all(|(key, value)| {
            b.get(key).is_some_and(|other| {
                match (parse_quantity(&value.0), parse_quantity(&other.0)) {
                    (Ok(x), Ok(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(1.0),
                    _ => value == other,
                }
            })
        })
}
