//! Pod IPs for a simulated node: the host addresses of the node's pod CIDR, handed out lowest
//! first and taken back when a pod is gone. The network address and the first host address (a
//! bridge's gateway) are never handed out, nor an IPv4 broadcast address.

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use crate::shrink::btree_set_after_removal;

/// Why a text is not a CIDR; the text is quoted in each. Retrying does not help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("{0:?} is not a CIDR (address/prefix)")]
    NoPrefix(String),
    #[error("{text:?}: {address:?} is not an IP address")]
    Address {
        text: String,
        address: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("{text:?}: the prefix must be 0..={bits}")]
    Prefix { text: String, bits: u8 },
}

/// One CIDR, e.g. `10.244.1.0/24` or `fd00:10:244:1::/64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Self, CidrError> {
        let (address, prefix) = text
            .trim()
            .split_once('/')
            .ok_or_else(|| CidrError::NoPrefix(text.to_owned()))?;
        let address: IpAddr = address.parse().map_err(|source| CidrError::Address {
            text: text.to_owned(),
            address: address.to_owned(),
            source,
        })?;
        let bits = if address.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|prefix| *prefix <= bits)
            .ok_or_else(|| CidrError::Prefix {
                text: text.to_owned(),
                bits,
            })?;
        let network = from_bits(address, to_bits(address) & mask(bits, prefix));
        Ok(Self { network, prefix })
    }

    fn bits(self) -> u8 {
        if self.network.is_ipv4() { 32 } else { 128 }
    }

    /// The `offset`-th address of the block, if it is one a pod may have.
    fn host(self, offset: u128) -> Option<IpAddr> {
        let size = 1u128.checked_shl(u32::from(self.bits() - self.prefix));
        let usable_end = match size {
            // An IPv4 block's last address is its broadcast address.
            Some(size) if self.network.is_ipv4() => size - 1,
            Some(size) => size,
            None => u128::MAX,
        };
        (offset >= 2 && offset < usable_end)
            .then(|| from_bits(self.network, to_bits(self.network) + offset))
    }
}

fn mask(bits: u8, prefix: u8) -> u128 {
    let all = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    let host_bits = u32::from(bits - prefix);
    all & !(1u128
        .checked_shl(host_bits)
        .map_or(u128::MAX, |size| size - 1))
}

fn to_bits(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_bits(like: IpAddr, bits: u128) -> IpAddr {
    match like {
        // Only ever called with bits inside an IPv4 block.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(bits).unwrap_or(u32::MAX))),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
    }
}

/// The addresses in use, and the block they come from.
#[derive(Debug, Clone)]
pub struct IpPool {
    cidr: Cidr,
    in_use: BTreeSet<IpAddr>,
}

impl IpPool {
    pub fn new(cidr: Cidr) -> Self {
        Self {
            cidr,
            in_use: BTreeSet::new(),
        }
    }

    /// Hands out addresses from `cidr` from now on; those in use stay in use (a pod keeps its
    /// address for its life, as with a real CNI plugin).
    pub fn set_cidr(&mut self, cidr: Cidr) {
        self.cidr = cidr;
    }

    /// The lowest free address, or `None` when the block is full.
    pub fn allocate(&mut self) -> Option<IpAddr> {
        let address = (2..)
            .map_while(|offset| self.cidr.host(offset))
            .find(|address| !self.in_use.contains(address))?;
        self.in_use.insert(address);
        Some(address)
    }

    /// Whether [`allocate`](Self::allocate) would hand out an address now.
    pub fn has_free(&self) -> bool {
        (2..)
            .map_while(|offset| self.cidr.host(offset))
            .any(|address| !self.in_use.contains(&address))
    }

    /// Marks `address` as taken (a pod that already had it, seen again after a restart).
    pub fn claim(&mut self, address: IpAddr) {
        self.in_use.insert(address);
    }

    pub fn release(&mut self, address: IpAddr) {
        self.in_use.remove(&address);
        btree_set_after_removal(&mut self.in_use);
    }

    pub fn in_use(&self) -> usize {
        self.in_use.len()
    }

    pub fn cidr(&self) -> String {
        format!("{}/{}", self.cidr.network, self.cidr.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(cidr: &str) -> IpPool {
        IpPool::new(Cidr::parse(cidr).expect("a CIDR"))
    }

    #[test]
    fn hands_out_host_addresses_lowest_first_skipping_network_and_gateway() {
        let mut pool = pool("10.244.1.0/24");
        assert_eq!(pool.allocate(), Some("10.244.1.2".parse().unwrap()));
        assert_eq!(pool.allocate(), Some("10.244.1.3".parse().unwrap()));
        pool.release("10.244.1.2".parse().unwrap());
        assert_eq!(pool.allocate(), Some("10.244.1.2".parse().unwrap()));
    }

    #[test]
    fn a_full_block_hands_out_nothing_and_never_the_broadcast_address() {
        let mut pool = pool("10.0.0.0/30");
        assert!(pool.has_free());
        assert_eq!(pool.allocate(), Some("10.0.0.2".parse().unwrap()));
        assert!(!pool.has_free());
        assert_eq!(pool.allocate(), None, "10.0.0.3 is the broadcast address");
    }

    #[test]
    fn ipv6_blocks_and_unaligned_cidrs_work() {
        let mut pool = pool("fd00:10:244:1::5/64");
        assert_eq!(pool.cidr(), "fd00:10:244:1::/64");
        assert_eq!(pool.allocate(), Some("fd00:10:244:1::2".parse().unwrap()));
    }

    #[test]
    fn malformed_cidrs_are_refused_with_the_reason() {
        let refusal = |text| Cidr::parse(text).unwrap_err().to_string();
        assert_eq!(
            refusal("10.0.0.0"),
            r#""10.0.0.0" is not a CIDR (address/prefix)"#
        );
        assert_eq!(
            refusal("10.0.0.0/33"),
            r#""10.0.0.0/33": the prefix must be 0..=32"#
        );
        assert_eq!(refusal("ten/8"), r#""ten/8": "ten" is not an IP address"#);
    }
}
