//! The host's addresses from procfs alone, no sockets: every local IPv4 address from
//! `/proc/net/fib_trie` (its `/32 host LOCAL` entries), IPv6 from `/proc/net/if_inet6`, and the
//! address serving the default route: the local address inside a subnet routed directly on
//! the default route's interface (`/proc/net/route`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 addresses marked `host LOCAL` in a `fib_trie` listing.
pub fn local_ipv4(fib_trie: &str) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last_address: Option<Ipv4Addr> = None;
    for line in fib_trie.lines() {
        let trimmed = line.trim();
        if let Some(address) = trimmed.strip_prefix("|-- ") {
            last_address = address.trim().parse().ok();
        } else if trimmed.starts_with("/32 host LOCAL")
            && let Some(address) = last_address
            && !found.contains(&address)
        {
            found.push(address);
        }
    }
    found
}

/// Global IPv6 addresses from `/proc/net/if_inet6` (32 hex digits first on each line).
pub fn local_ipv6(if_inet6: &str) -> Vec<Ipv6Addr> {
    if_inet6
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter_map(|hex| u128::from_str_radix(hex, 16).ok())
        .map(Ipv6Addr::from)
        .collect()
}

/// One row of `/proc/net/route`: interface, destination, gateway flag-free, and mask.
struct Route {
    interface: String,
    destination: u32,
    gateway: u32,
    mask: u32,
}

fn routes(route_table: &str) -> Vec<Route> {
    // Each field is the host-order reading of an address stored in network order: its native
    // bytes are the address's bytes.
    let hex = |field: &str| {
        u32::from_str_radix(field, 16)
            .ok()
            .map(|value| u32::from_be_bytes(value.to_ne_bytes()))
    };
    route_table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some(Route {
                interface: (*fields.first()?).to_owned(),
                destination: hex(fields.get(1)?)?,
                gateway: hex(fields.get(2)?)?,
                mask: hex(fields.get(7)?)?,
            })
        })
        .collect()
}

/// The local address that serves the default route, if any.
pub fn default_route_address(route_table: &str, local: &[Ipv4Addr]) -> Option<IpAddr> {
    let table = routes(route_table);
    let default = table
        .iter()
        .find(|route| route.destination == 0 && route.mask == 0)?;
    let subnets: Vec<(u32, u32)> = table
        .iter()
        .filter(|route| {
            route.interface == default.interface && route.gateway == 0 && route.mask != 0
        })
        .map(|route| (route.destination, route.mask))
        .collect();
    local
        .iter()
        .find(|address| {
            let bits = u32::from(**address);
            !address.is_loopback()
                && subnets
                    .iter()
                    .any(|(network, mask)| bits & mask == network & mask)
        })
        .map(|address| IpAddr::V4(*address))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB_TRIE: &str = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 127.0.0.0/8 2 0 2\n           |-- 127.0.0.1\n              /32 host LOCAL\n     +-- 10.1.0.0/16 2 0 2\n           |-- 10.1.0.0\n              /16 link UNICAST\n           |-- 10.1.4.7\n              /32 host LOCAL\n     +-- 192.0.2.0/24 2 0 2\n           |-- 192.0.2.0\n              /24 link UNICAST\n           |-- 192.0.2.2\n              /32 host LOCAL\n        |-- 192.0.2.255\n           /32 link BROADCAST\nLocal:\n           |-- 192.0.2.2\n              /32 host LOCAL\n";
    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\neth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\ncni0\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";

    #[test]
    fn local_addresses_are_the_host_local_entries_once_each() {
        let local = local_ipv4(FIB_TRIE);
        assert_eq!(
            local,
            ["127.0.0.1", "10.1.4.7", "192.0.2.2"].map(|a| a.parse::<Ipv4Addr>().expect("ip"))
        );
    }

    #[test]
    fn the_default_route_address_is_on_the_default_interface() {
        let local = local_ipv4(FIB_TRIE);
        assert_eq!(
            default_route_address(ROUTE, &local),
            Some("192.0.2.2".parse().expect("ip"))
        );
        assert_eq!(
            default_route_address("Iface\tDestination\n", &local),
            None,
            "no default route"
        );
    }

    #[test]
    fn ipv6_addresses_are_read_from_hex() {
        let if_inet6 = "20010db8000000000000000000000001 02 40 00 80 eth0\n00000000000000000000000000000001 01 80 10 80 lo\n";
        assert_eq!(
            local_ipv6(if_inet6),
            ["2001:db8::1", "::1"].map(|a| a.parse::<Ipv6Addr>().expect("ip"))
        );
    }
}
