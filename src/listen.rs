//! Binding a listener, and standalone mode's way when its address is taken (a kubelet, or
//! another nodepulse, on the well-known port): a port of the kernel's choosing on the same
//! address, said on stdout and in the log, so `--standalone` needs no free well-known port. A
//! daemon that is not standalone fails on a taken port, as the kubelet does.

use std::net::{SocketAddr, TcpListener};

/// What to do when the address is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenTaken {
    Fail,
    /// Serve on a port of the kernel's choosing instead, and say so.
    AnyPort,
}

impl WhenTaken {
    /// Standalone mode takes any port; a daemon in a cluster fails.
    pub fn for_standalone(standalone: bool) -> Self {
        if standalone {
            Self::AnyPort
        } else {
            Self::Fail
        }
    }
}

/// A listener on `address`, for `what` (as the message names it: "the kubelet API"), or on
/// another port of its address when it is taken and `when_taken` allows.
pub fn bind(
    what: &str,
    address: SocketAddr,
    when_taken: WhenTaken,
) -> std::io::Result<TcpListener> {
    match TcpListener::bind(address) {
        Err(error)
            if error.kind() == std::io::ErrorKind::AddrInUse
                && when_taken == WhenTaken::AnyPort
                && address.port() != 0 =>
        {
            let listener = TcpListener::bind(SocketAddr::new(address.ip(), 0))?;
            say_moved(what, address, listener.local_addr()?);
            Ok(listener)
        }
        bound => bound,
    }
}

/// Says that `what` serves on `bound` because `wanted` was taken: in the log, and on stdout,
/// where a person who started standalone mode reads what to connect to.
pub fn say_moved(what: &str, wanted: SocketAddr, bound: SocketAddr) {
    tracing::warn!(%wanted, %bound, "{what}: the address is taken, serving on a port of its own");
    println!("nodepulse standalone: {wanted} is taken; {what} serves on {bound}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_fails_unless_any_port_will_do() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("a port");
        let address = taken.local_addr().expect("address");
        let refused = bind("a test listener", address, WhenTaken::Fail).expect_err("taken");
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse);
        let moved = bind("a test listener", address, WhenTaken::AnyPort).expect("another port");
        let bound = moved.local_addr().expect("address");
        assert_eq!(bound.ip(), address.ip());
        assert_ne!(bound.port(), address.port());
    }
}
