//! Machine identity, `capacity` and `allocatable`: cpu, memory, pods and ephemeral-storage
//! from the host; allocatable = capacity − systemReserved − kubeReserved − the hard eviction
//! threshold (memory and nodefs only), never below zero. Keys set by others (extended
//! resources) are left alone. A changed boot ID is a Warning `Rebooted` event.

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::Node, apimachinery::pkg::api::resource::Quantity};

use super::{NodeEvent, SetterError, SetterResult, StatusInputs};
use crate::quantity::{format_binary, format_cpu};

pub(super) fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> SetterResult {
    let machine = inputs.machine;
    let settings = inputs.settings;
    let mut events = Vec::new();
    let status = node.status.get_or_insert_with(Default::default);
    let info = status.node_info.get_or_insert_with(Default::default);
    info.machine_id = machine.machine_id.clone();
    info.system_uuid = machine.system_uuid.clone();
    if let Some(previous) = inputs
        .previous_boot_id
        .filter(|previous| !previous.is_empty())
        && previous != machine.boot_id
    {
        events.push(NodeEvent::warning(
            "Rebooted",
            format!(
                "Node {} has been rebooted, boot id: {}",
                inputs.node_name, machine.boot_id
            ),
        ));
    }
    info.boot_id = machine.boot_id.clone();

    let pods = if settings.pods_per_core > 0 {
        (machine.cpu_cores.saturating_mul(settings.pods_per_core)).min(settings.max_pods)
    } else {
        settings.max_pods
    };
    // (name, capacity as a number, its rendering)
    let mut resources: Vec<(&str, f64, String)> = vec![
        (
            "cpu",
            f64::from(machine.cpu_cores),
            format_cpu(u64::from(machine.cpu_cores) * 1000),
        ),
        (
            "memory",
            machine.memory_bytes as f64,
            format_binary(machine.memory_bytes),
        ),
        ("pods", f64::from(pods), pods.to_string()),
    ];
    if let Some(bytes) = machine.ephemeral_storage_bytes {
        resources.push(("ephemeral-storage", bytes as f64, format_binary(bytes)));
    }
    let capacity = status.capacity.get_or_insert_with(BTreeMap::new);
    let allocatable = status.allocatable.get_or_insert_with(BTreeMap::new);
    for (name, amount, rendered) in resources {
        capacity.insert(name.to_owned(), Quantity(rendered));
        let threshold = match name {
            "memory" => settings.hard_eviction_memory,
            "ephemeral-storage" => settings.hard_eviction_nodefs,
            _ => None,
        };
        let eviction = threshold.map_or(0.0, |value| value.amount(amount as u64) as f64);
        let reserved = settings.reserved.get(name).copied().unwrap_or(0.0) + eviction;
        let left = (amount - reserved).max(0.0);
        let rendered = match name {
            "cpu" => format_cpu((left * 1000.0).round() as u64),
            "pods" => (left.round() as u64).to_string(),
            _ => format_binary(left.round() as u64),
        };
        allocatable.insert(name.to_owned(), Quantity(rendered));
    }
    if machine.cpu_cores == 0 || machine.memory_bytes == 0 {
        return Err(SetterError::IncompleteMachineInfo);
    }
    Ok(events)
}
