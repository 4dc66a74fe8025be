//! Which `Host` a request to the debug endpoint may name, against DNS rebinding: a web page
//! whose name an attacker points at 127.0.0.1 could otherwise read `/debug/*` from a
//! browser on the node. Allowed: `localhost`, loopback addresses, the address the endpoint is
//! bound to, and (bound to all addresses) any IP address — an address literal cannot be
//! rebound. Any other name is refused; a request without `Host` (HTTP/1.0) is no browser's.

use std::net::{IpAddr, SocketAddr};

/// The hosts a request may name, for an endpoint bound to one address.
#[derive(Debug, Clone, Copy)]
pub struct AllowedHosts {
    bound: IpAddr,
}

impl AllowedHosts {
    pub fn new(bound: SocketAddr) -> Self {
        Self { bound: bound.ip() }
    }

    /// Whether `host` (a `Host` header's value: a name or address, with or without a port)
    /// names this endpoint.
    pub fn allows(&self, host: &str) -> bool {
        let name = without_port(host.trim());
        if name.eq_ignore_ascii_case("localhost") || name.eq_ignore_ascii_case("localhost.") {
            return true;
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || ip == self.bound || self.bound.is_unspecified(),
            Err(_) => false,
        }
    }
}

/// `host` without its `:port`; an IPv6 literal without its brackets.
fn without_port(host: &str) -> &str {
    if let Some(bracketed) = host.strip_prefix('[') {
        // No closing bracket: no address.
        return bracketed.split_once(']').map_or("", |(address, _)| address);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|byte| byte.is_ascii_digit()) => name,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_the_bound_address_are_allowed_and_other_names_not() {
        let loopback = AllowedHosts::new("127.0.0.1:10280".parse().expect("address"));
        for host in [
            "127.0.0.1:10280",
            "127.0.0.1",
            "127.1.2.3:80",
            "localhost:10280",
            "LOCALHOST",
            "localhost.:10280",
            "[::1]:10280",
            "[::1]",
        ] {
            assert!(loopback.allows(host), "{host}");
        }
        for host in [
            "rebind.attacker.example:10280",
            "localhost.attacker.example",
            "10.0.0.5:10280",
            "127.0.0.1.nip.io",
            "[::1",
            "",
        ] {
            assert!(!loopback.allows(host), "{host}");
        }
        let node_ip = AllowedHosts::new("10.0.0.5:10280".parse().expect("address"));
        assert!(node_ip.allows("10.0.0.5:10280") && node_ip.allows("localhost"));
        assert!(!node_ip.allows("10.0.0.6:10280"));
        let everywhere = AllowedHosts::new("0.0.0.0:10280".parse().expect("address"));
        assert!(everywhere.allows("10.0.0.6:10280") && everywhere.allows("[fd00::1]:10280"));
        assert!(!everywhere.allows("node-1.cluster.example:10280"));
    }
}
