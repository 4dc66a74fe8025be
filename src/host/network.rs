//! The node's network counters as the kubelet's summary gives them (`node.network`): every
//! interface of `/proc/net/dev` but the ones cAdvisor ignores (loopback, the pods' veths,
//! docker's and nerdctl's bridges), bytes and errors each way.

use std::path::Path;

use nodepulse_actors::ports::{HostError, InterfaceUsage};

use super::read;

/// Interface name prefixes cAdvisor leaves out of a machine's network figures.
const IGNORED_PREFIXES: [&str; 4] = ["lo", "veth", "docker", "nerdctl"];

pub fn node_interfaces(root: &Path) -> Result<Vec<InterfaceUsage>, HostError> {
    let path = root.join("proc/net/dev");
    parse_net_dev(&path, &read(&path)?)
}

/// The interfaces of a `/proc/net/dev` text: two header lines, then `name: rx… tx…` with
/// receive bytes 1st and errors 3rd, transmit bytes 9th and errors 11th.
pub fn parse_net_dev(path: &Path, text: &str) -> Result<Vec<InterfaceUsage>, HostError> {
    let mut interfaces = Vec::new();
    for line in text.lines().skip(2) {
        let malformed = || HostError::Parse {
            path: path.to_owned(),
            message: format!("unexpected interface line {line:?}"),
        };
        let (name, counters) = line.split_once(':').ok_or_else(malformed)?;
        let name = name.trim();
        if IGNORED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
        {
            continue;
        }
        let counters: Vec<u64> = counters
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| malformed())?;
        let counter = |index: usize| counters.get(index).copied().ok_or_else(malformed);
        interfaces.push(InterfaceUsage {
            name: name.to_owned(),
            rx_bytes: Some(counter(0)?),
            rx_errors: Some(counter(2)?),
            tx_bytes: Some(counter(8)?),
            tx_errors: Some(counter(10)?),
        });
    }
    Ok(interfaces)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9157 1017    0    0    0     0          0         0 9157 1017    0    0    0     0       0          0
  eth0: 1200 10 3 0 0 0 0 0 3400 20 4 0 0 0 0 0
vethab12: 5 1 0 0 0 0 0 0 6 1 0 0 0 0 0 0
";

    #[test]
    fn interfaces_but_loopback_and_veths_with_bytes_and_errors_each_way() {
        let parsed = parse_net_dev(Path::new("/proc/net/dev"), NET_DEV).expect("parses");
        assert_eq!(
            parsed,
            vec![InterfaceUsage {
                name: "eth0".into(),
                rx_bytes: Some(1200),
                rx_errors: Some(3),
                tx_bytes: Some(3400),
                tx_errors: Some(4),
            }]
        );
    }

    #[test]
    fn a_truncated_line_is_an_error_naming_the_file() {
        let text = "h1\nh2\n  eth0: 1 2 3\n";
        let error = parse_net_dev(Path::new("/proc/net/dev"), text).expect_err("short");
        assert!(error.to_string().contains("/proc/net/dev"), "{error}");
    }
}
