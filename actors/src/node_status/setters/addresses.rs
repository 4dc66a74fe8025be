//! `status.addresses`: `[InternalIP, Hostname]`, from the configured node IPs (each checked to
//! be assigned to a local interface) or else the default-route address. The `Hostname` is the
//! node's name: nodepulse's `nodeName` is the kubelet's `--hostname-override`, which sets both,
//! so kube-apiserver (which dials `Hostname` first) reaches this node and not the machine's name.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use super::{SetterError, SetterResult, StatusInputs};

/// Whether a node may report `address` as its own.
fn usable(address: &IpAddr) -> bool {
    let bad = match address {
        IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_multicast() || v4.is_link_local() || v4.is_unspecified()
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unicast_link_local()
                || v6.is_unspecified()
        }
    };
    !bad
}

fn address(kind: &str, value: String) -> NodeAddress {
    NodeAddress {
        type_: kind.to_owned(),
        address: value,
    }
}

pub(super) fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> SetterResult {
    let configured = &inputs.settings.node_ips;
    for ip in configured {
        if !usable(ip) {
            return Err(SetterError::UnusableNodeIp { ip: *ip });
        }
        if !inputs.machine.local_addresses.contains(ip) {
            return Err(SetterError::NodeIpNotOnHost { ip: *ip });
        }
    }
    let hostname = inputs.node_name.to_owned();
    let mut addresses: Vec<NodeAddress> = configured
        .iter()
        .map(|ip| address("InternalIP", ip.to_string()))
        .collect();
    if addresses.is_empty() {
        let picked = hostname
            .parse::<IpAddr>()
            .ok()
            .or(inputs.machine.default_route_address)
            .filter(usable)
            .ok_or_else(|| SetterError::NoNodeAddress {
                node: inputs.node_name.to_owned(),
            })?;
        addresses.push(address("InternalIP", picked.to_string()));
    }
    addresses.push(address("Hostname", hostname));
    node.status.get_or_insert_with(Default::default).addresses = Some(addresses);
    Ok(Vec::new())
}
