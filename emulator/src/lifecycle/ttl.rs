//! The TTL controller's rule: every Node carries `node.alpha.kubernetes.io/ttl`, the seconds a
//! kubelet may cache secrets and configmaps, chosen from the cluster size with hysteresis
//! (`ttlBoundaries` in kube-controller-manager). Pure state and functions; the loop writes.

use serde_json::Value;

use crate::store::strategy::object_entry;

pub const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";

/// (size min, size max, ttl seconds): a step is left upwards above its max, downwards below
/// its min, so a cluster hovering at a boundary does not flip between two TTLs.
const BOUNDARIES: [(usize, usize, u32); 5] = [
    (0, 100, 0),
    (90, 500, 15),
    (450, 1000, 30),
    (900, 2000, 60),
    (1800, usize::MAX, 300),
];

/// The controller's memory: which boundary step the cluster size is on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ttl {
    step: usize,
}

impl Ttl {
    /// The TTL for a cluster of `nodes` Nodes, moving the step as far as the size demands.
    pub fn desired(&mut self, nodes: usize) -> u32 {
        while nodes > BOUNDARIES[self.step].1 && self.step + 1 < BOUNDARIES.len() {
            self.step += 1;
        }
        while nodes < BOUNDARIES[self.step].0 && self.step > 0 {
            self.step -= 1;
        }
        BOUNDARIES[self.step].2
    }
}

/// Sets the annotation to `ttl` on `node`; returns whether it changed.
pub fn annotate(node: &mut Value, ttl: u32) -> bool {
    let wanted = ttl.to_string();
    let current = node
        .pointer(&format!(
            "/metadata/annotations/{}",
            TTL_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str);
    if current == Some(wanted.as_str()) {
        return false;
    }
    let Some(map) = node.as_object_mut() else {
        return false;
    };
    object_entry(object_entry(map, "metadata"), "annotations")
        .insert(TTL_ANNOTATION.into(), wanted.into());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_clusters_get_zero_and_boundaries_have_hysteresis() {
        let mut ttl = Ttl::default();
        for (nodes, expected) in [
            (1, 0),
            (100, 0),
            (101, 15),
            (95, 15),
            (89, 0),
            (2500, 300),
            (1900, 300),
            (1799, 60),
            (0, 0),
        ] {
            assert_eq!(ttl.desired(nodes), expected, "{nodes} nodes");
        }
    }

    #[test]
    fn annotation_is_set_once_and_other_annotations_are_kept() {
        let mut node = json!({"metadata": {"name": "n", "annotations": {"a": "b"}}});
        assert!(annotate(&mut node, 0));
        assert_eq!(
            node["metadata"]["annotations"],
            json!({"a": "b", TTL_ANNOTATION: "0"})
        );
        assert!(!annotate(&mut node, 0), "already there: no write");
        assert!(annotate(&mut node, 15));
        assert_eq!(node["metadata"]["annotations"][TTL_ANNOTATION], "15");
    }
}
