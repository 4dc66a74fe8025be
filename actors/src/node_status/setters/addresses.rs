//! `status.addresses`: `[InternalIP, Hostname]`, from the configured node IPs (each checked to
//! be assigned to a local interface) or else the default-route address. The `Hostname` is the
//! node's name: nodepulse's `nodeName` is the kubelet's `--hostname-override`, which sets both,
//! so kube-apiserver (which dials `Hostname` first) reaches this node and not the machine's name.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Node, NodeAddress};

use super::{NodeEvent, StatusInputs};

fn usable(address: &IpAddr) -> Result<(), &'static str> {
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
    if bad {
        Err("must not be loopback, multicast, link-local or unspecified")
    } else {
        Ok(())
    }
}

fn address(kind: &str, value: String) -> NodeAddress {
    NodeAddress {
        type_: kind.to_owned(),
        address: value,
    }
}

pub(super) fn set(inputs: &StatusInputs<'_>, node: &mut Node) -> Result<Vec<NodeEvent>, String> {
    let configured = &inputs.settings.node_ips;
    for ip in configured {
        usable(ip).map_err(|reason| format!("node IP {ip}: {reason}"))?;
        if !inputs.machine.local_addresses.contains(ip) {
            return Err(format!(
                "node IP: {:?} not found in the host's network interfaces",
                ip.to_string()
            ));
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
            .filter(|ip| usable(ip).is_ok())
            .ok_or_else(|| format!("can't get ip address of node {}", inputs.node_name))?;
        addresses.push(address("InternalIP", picked.to_string()));
    }
    addresses.push(address("Hostname", hostname));
    node.status.get_or_insert_with(Default::default).addresses = Some(addresses);
    Ok(Vec::new())
}
