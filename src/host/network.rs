//! Network counters as cAdvisor reads them from a `/proc/net/dev`: the node's
//! (`node.network` of the summary, the root of `/metrics/cadvisor`) and a pod's (its sandbox's
//! process's network namespace, `/proc/<pid>/net/dev`), every interface but the ones cAdvisor
//! ignores (loopback, the pods' veths, docker's and nerdctl's bridges).

use std::path::Path;

use nodepulse_actors::ports::{HostError, InterfaceUsage};

use super::read;

/// Interface name prefixes cAdvisor leaves out of a machine's network figures.
const IGNORED_PREFIXES: [&str; 4] = ["lo", "veth", "docker", "nerdctl"];

/// One interface's counters, each way: bytes, packets, errors and drops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_dropped: u64,
}

impl InterfaceCounters {
    /// The summary's figures of it.
    pub fn usage(&self) -> InterfaceUsage {
        InterfaceUsage {
            name: self.name.clone(),
            rx_bytes: Some(self.rx_bytes),
            rx_errors: Some(self.rx_errors),
            tx_bytes: Some(self.tx_bytes),
            tx_errors: Some(self.tx_errors),
        }
    }
}

pub fn node_interfaces(root: &Path) -> Result<Vec<InterfaceUsage>, HostError> {
    Ok(node_counters(root)?
        .iter()
        .map(InterfaceCounters::usage)
        .collect())
}

/// The node's interfaces, every counter.
pub fn node_counters(root: &Path) -> Result<Vec<InterfaceCounters>, HostError> {
    let path = root.join("proc/net/dev");
    parse_net_dev(&path, &read(&path)?)
}

/// The interfaces of process `pid`'s network namespace (a pod's, through its sandbox).
pub fn process_counters(root: &Path, pid: u32) -> Result<Vec<InterfaceCounters>, HostError> {
    let path = root.join(format!("proc/{pid}/net/dev"));
    parse_net_dev(&path, &read(&path)?)
}

/// The interfaces of a `/proc/net/dev` text: two header lines, then `name: rx… tx…` with
/// receive bytes, packets, errors and drops 1st to 4th, transmit ones 9th to 12th.
pub fn parse_net_dev(path: &Path, text: &str) -> Result<Vec<InterfaceCounters>, HostError> {
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
        interfaces.push(InterfaceCounters {
            name: name.to_owned(),
            rx_bytes: counter(0)?,
            rx_packets: counter(1)?,
            rx_errors: counter(2)?,
            rx_dropped: counter(3)?,
            tx_bytes: counter(8)?,
            tx_packets: counter(9)?,
            tx_errors: counter(10)?,
            tx_dropped: counter(11)?,
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
            vec![InterfaceCounters {
                name: "eth0".into(),
                rx_bytes: 1200,
                rx_packets: 10,
                rx_errors: 3,
                rx_dropped: 0,
                tx_bytes: 3400,
                tx_packets: 20,
                tx_errors: 4,
                tx_dropped: 0,
            }]
        );
        assert_eq!(
            parsed[0].usage(),
            InterfaceUsage {
                name: "eth0".into(),
                rx_bytes: Some(1200),
                rx_errors: Some(3),
                tx_bytes: Some(3400),
                tx_errors: Some(4),
            }
        );
    }

    #[test]
    fn a_truncated_line_is_an_error_naming_the_file() {
        let text = "h1\nh2\n  eth0: 1 2 3\n";
        let error = parse_net_dev(Path::new("/proc/net/dev"), text).expect_err("short");
        assert!(error.to_string().contains("/proc/net/dev"), "{error}");
    }
}
