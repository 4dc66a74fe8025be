//! The nodes of a simulated fleet: those listed under `nodes:`, filled up to `--nodes N` with
//! generated names; and the main API client's limits a fleet gets by default, which grow with
//! its size.

use std::num::NonZeroUsize;

use super::{Config, FleetNodeConfig};

/// The kubelet's own main-client budget (`kubeAPIQPS`, `kubeAPIBurst`): one node's default,
/// and what each simulated node brings to its fleet's shared client.
pub const NODE_API_QPS: u32 = 50;
pub const NODE_API_BURST: u32 = 100;

/// The most a fleet's shared client asks by default: ten kubelets' budget. Past about this
/// rate one client holds most of a kube-apiserver's default in-flight limit for writes (200)
/// and is answered 429 along with every real node; it still registers 1,000 nodes in about
/// 2 s and 10,000 in about 20 s. An explicit `kubeAPIQPS`/`kubeAPIBurst` goes past it.
pub const FLEET_API_QPS_CAP: u32 = 500;
pub const FLEET_API_BURST_CAP: u32 = 1_000;

/// The most requests each of a fleet's two API clients has in flight at once. Over HTTP/1 each
/// one holds a connection and its buffers; unbounded, a fleet's start opened one for nearly
/// every node. Two clients at 64 stay under a kube-apiserver's default 200 mutating requests
/// in flight, and still carry 10,000 nodes' renewals (1,000 a second) with room to spare.
pub const FLEET_REQUESTS_IN_FLIGHT: usize = 64;

/// The pod syncs each of a fleet's StatusManagers runs at once (one node's: 16; the
/// kubelet's status manager syncs one pod at a time). A sync waiting its turn in the node's
/// queue costs its job; one waiting behind the fleet's shared client costs its request's
/// futures, about 5.5 KiB, and a fleet starting its pods queued a GET and a PATCH for most of
/// them at once.
pub const FLEET_NODE_STATUS_SYNCS: NonZeroUsize = NonZeroUsize::new(2).unwrap();

/// The volumes each of a fleet's VolumeManagers fetches the sources of at once (one node's:
/// as many as are due, as the kubelet's). A fetch waiting behind the fleet's shared client
/// holds its TokenRequest's futures, about 6 KiB; a fleet starting its pods asked for all
/// their tokens at once (12 MiB of the heap's peak with 200 nodes and 2,000 pods).
pub const FLEET_NODE_VOLUME_FETCHES: NonZeroUsize = NonZeroUsize::new(2).unwrap();

/// `per_node` for each of `nodes` nodes (one node at least), at most `cap`.
fn scaled(per_node: u32, nodes: usize, cap: u32) -> u32 {
    let nodes = u32::try_from(nodes.max(1)).unwrap_or(u32::MAX);
    per_node.saturating_mul(nodes).min(cap.max(per_node))
}

impl Config {
    /// `kubeAPIQPS`, or by default the kubelet's 50 for each node of the fleet (one node:
    /// 50), at most [`FLEET_API_QPS_CAP`].
    pub fn effective_api_qps(&self) -> u32 {
        self.kube_api_qps
            .unwrap_or_else(|| scaled(NODE_API_QPS, self.nodes.len(), FLEET_API_QPS_CAP))
    }

    /// `kubeAPIBurst`, or by default the kubelet's 100 for each node, at most
    /// [`FLEET_API_BURST_CAP`], and never below the QPS.
    pub fn effective_api_burst(&self) -> u32 {
        self.kube_api_burst.unwrap_or_else(|| {
            scaled(NODE_API_BURST, self.nodes.len(), FLEET_API_BURST_CAP)
                .max(self.effective_api_qps())
        })
    }

    /// Requests each API client may have in flight: unbounded for one node (it has a few at
    /// most), [`FLEET_REQUESTS_IN_FLIGHT`] for a fleet.
    pub fn api_requests_in_flight(&self) -> Option<usize> {
        (!self.nodes.is_empty()).then_some(FLEET_REQUESTS_IN_FLIGHT)
    }
}

/// A fleet size that cannot hold the nodes the configuration lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--nodes {count} is fewer than the {listed} nodes listed under nodes:")]
pub struct FleetSizeError {
    pub count: usize,
    pub listed: usize,
}

/// The generated name of the fleet's `index`-th node.
pub fn generated_name(base: &str, index: usize) -> String {
    format!("{base}-{index}")
}

/// `count` nodes: those listed under `nodes:` first, then generated ones named after
/// `base` (`<base>-<i>`) up to `count`. Fewer than the list is an error: nothing listed is
/// silently left out.
pub fn with_generated(
    listed: &[FleetNodeConfig],
    base: &str,
    count: usize,
) -> Result<Vec<FleetNodeConfig>, FleetSizeError> {
    if count < listed.len() {
        return Err(FleetSizeError {
            count,
            listed: listed.len(),
        });
    }
    let mut nodes = listed.to_vec();
    let mut index = 0;
    while nodes.len() < count {
        let name = generated_name(base, index);
        index += 1;
        if !listed.iter().any(|node| node.name == name) {
            nodes.push(FleetNodeConfig {
                name,
                labels: Default::default(),
                capacity: Default::default(),
            });
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str) -> FleetNodeConfig {
        FleetNodeConfig {
            name: name.to_owned(),
            labels: [("zone".to_owned(), "a".to_owned())].into(),
            capacity: Default::default(),
        }
    }

    #[test]
    fn generated_nodes_fill_up_after_the_listed_ones_without_taking_their_names() {
        let nodes = with_generated(&[listed("sim-1")], "sim", 3).expect("enough");
        let names: Vec<&str> = nodes.iter().map(|node| node.name.as_str()).collect();
        assert_eq!(names, ["sim-1", "sim-0", "sim-2"]);
        assert_eq!(nodes[0].labels.get("zone").map(String::as_str), Some("a"));
    }

    #[test]
    fn default_api_limits_grow_with_the_fleet_up_to_the_cap() {
        assert_eq!(scaled(NODE_API_QPS, 0, FLEET_API_QPS_CAP), 50, "one node");
        assert_eq!(scaled(NODE_API_QPS, 4, FLEET_API_QPS_CAP), 200);
        assert_eq!(scaled(NODE_API_QPS, 10_000, FLEET_API_QPS_CAP), 500);
        assert_eq!(scaled(NODE_API_BURST, 10_000, FLEET_API_BURST_CAP), 1_000);
        assert_eq!(
            scaled(NODE_API_QPS, usize::MAX, FLEET_API_QPS_CAP),
            500,
            "no overflow"
        );
    }

    #[test]
    fn only_a_fleet_bounds_its_requests_in_flight() {
        let mut config = Config::embedded_default().expect("the embedded default is valid");
        assert_eq!(config.api_requests_in_flight(), None, "one node");
        config.nodes = with_generated(&[], "sim", 2).expect("two nodes");
        assert_eq!(
            config.api_requests_in_flight(),
            Some(FLEET_REQUESTS_IN_FLIGHT)
        );
    }

    #[test]
    fn fewer_nodes_than_listed_is_an_error() {
        let error = with_generated(&[listed("a"), listed("b")], "sim", 1).expect_err("refused");
        assert!(
            error.to_string().contains("fewer than the 2 nodes listed"),
            "{error}"
        );
    }
}
