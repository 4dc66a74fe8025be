//! A pod's QoS class (`qos.ComputePodQOS`, PodLevelResources on as in 1.36): what
//! kube-apiserver persists in `status.qosClass` at create, and what the kubelet falls back to
//! when that field is empty. Only positive CPU and memory count: pod-level `spec.resources`
//! when the pod sets them, else every app and init container's.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::quantity::milli_value;

pub const GUARANTEED: &str = "Guaranteed";
pub const BURSTABLE: &str = "Burstable";
pub const BEST_EFFORT: &str = "BestEffort";

/// Sums of positive CPU and memory quantities, in thousandths.
struct Tally {
    requests: BTreeMap<&'static str, i64>,
    limits: BTreeMap<&'static str, i64>,
    guaranteed: bool,
}

impl Tally {
    /// Adds one `resources` object; one whose limits miss CPU or memory is not Guaranteed.
    fn add(&mut self, resources: Option<&Value>) {
        add_positive(
            &mut self.requests,
            resources.and_then(|r| r.get("requests")),
        );
        if add_positive(&mut self.limits, resources.and_then(|r| r.get("limits"))) < 2 {
            self.guaranteed = false;
        }
    }
}

/// Adds the positive `cpu` and `memory` of `list` into `into`; how many of the two it held.
fn add_positive(into: &mut BTreeMap<&'static str, i64>, list: Option<&Value>) -> usize {
    let mut found = 0;
    for name in ["cpu", "memory"] {
        let amount = (list.and_then(|list| list.get(name)))
            .and_then(|quantity| match quantity {
                Value::String(text) => milli_value(text).ok(),
                Value::Number(number) => milli_value(&number.to_string()).ok(),
                _ => None,
            })
            .filter(|&amount| amount > 0);
        if let Some(amount) = amount {
            *into.entry(name).or_default() += amount;
            found += 1;
        }
    }
    found
}

/// `ComputePodQOS` of a pod spec. Ephemeral containers cannot set resources and are left out.
pub fn compute_qos_class(spec: &Value) -> &'static str {
    let mut tally = Tally {
        requests: BTreeMap::new(),
        limits: BTreeMap::new(),
        guaranteed: true,
    };
    match spec.get("resources").filter(|r| !r.is_null()) {
        Some(pod_level) => tally.add(Some(pod_level)),
        None => {
            let containers = ["containers", "initContainers"]
                .into_iter()
                .filter_map(|list| spec.get(list).and_then(Value::as_array))
                .flatten();
            for container in containers {
                tally.add(container.get("resources"));
            }
        }
    }
    if tally.requests.is_empty() && tally.limits.is_empty() {
        return BEST_EFFORT;
    }
    let matched =
        (tally.requests.iter()).all(|(name, request)| tally.limits.get(name) == Some(request));
    if tally.guaranteed && matched && tally.requests.len() == tally.limits.len() {
        GUARANTEED
    } else {
        BURSTABLE
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_containers(resources: &[Value]) -> Value {
        let containers: Vec<Value> = (resources.iter().enumerate())
            .map(|(i, r)| json!({"name": format!("c{i}"), "image": "i", "resources": r}))
            .collect();
        json!({"containers": containers})
    }

    /// The cases of the kubelet's `TestComputePodQOS` (pkg/apis/core/v1/helper/qos) that the
    /// rules above decide.
    #[test]
    fn the_class_follows_the_kubelets_rules_for_container_resources() {
        let guaranteed = json!({"requests": {"cpu": "100m", "memory": "100Mi"},
                                "limits": {"cpu": "100m", "memory": "100Mi"}});
        let limits_only = json!({"limits": {"cpu": "100m", "memory": "100Mi"}});
        let cases = [
            (vec![json!({})], BEST_EFFORT),
            (vec![json!({}), json!({})], BEST_EFFORT),
            (vec![guaranteed.clone()], GUARANTEED),
            (vec![guaranteed.clone(), guaranteed.clone()], GUARANTEED),
            (vec![limits_only.clone(), guaranteed.clone()], BURSTABLE),
            (vec![guaranteed.clone(), json!({})], BURSTABLE),
            (vec![json!({"requests": {"cpu": "100m"}})], BURSTABLE),
            (
                vec![json!({"limits": {"cpu": "100m"}, "requests": {"cpu": "100m"}})],
                BURSTABLE,
            ),
            // Only CPU and memory count, and only positive amounts.
            (
                vec![json!({"requests": {"ephemeral-storage": "1Gi"}})],
                BEST_EFFORT,
            ),
            (
                vec![json!({"requests": {"cpu": "0", "memory": "0"}})],
                BEST_EFFORT,
            ),
            (
                vec![
                    json!({"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                            "limits": {"cpu": "1000m", "memory": "1Gi", "nvidia.com/gpu": "1"}}),
                ],
                GUARANTEED,
            ),
        ];
        for (resources, expected) in cases {
            let spec = with_containers(&resources);
            assert_eq!(compute_qos_class(&spec), expected, "{resources:?}");
        }
    }

    #[test]
    fn pod_level_resources_decide_the_class_when_the_pod_sets_them() {
        let both = json!({"cpu": "1", "memory": "1Gi"});
        let cases = [
            (json!({"requests": both, "limits": both}), GUARANTEED),
            // Without the API server's defaulting of requests from limits, as the kubelet's
            // own function sees it.
            (json!({"limits": both}), BURSTABLE),
            (
                json!({"requests": {"cpu": "500m"}, "limits": both}),
                BURSTABLE,
            ),
            (json!({"requests": {"cpu": "1"}}), BURSTABLE),
            (json!({"limits": {"memory": "1Gi"}}), BURSTABLE),
            // Set but empty: the containers' resources no longer count.
            (json!({}), BEST_EFFORT),
        ];
        let guaranteed_container = json!({"name": "c", "image": "i", "resources": {
            "requests": both, "limits": both}});
        for (resources, expected) in cases {
            let spec = json!({"resources": resources, "containers": [guaranteed_container]});
            assert_eq!(compute_qos_class(&spec), expected, "{resources}");
        }
    }
}
