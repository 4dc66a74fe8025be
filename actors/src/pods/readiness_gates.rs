//! The pod's readiness gates (`spec.readinessGates`): conditions other controllers set in the
//! pod's status, which must all be True before the kubelet reports the pod Ready
//! (`GeneratePodReadyCondition`). Read from the API's copy of the pod.

use k8s_openapi::api::core::v1::Pod;

/// The Ready condition's reason while a gate holds the pod back.
pub const NOT_READY_REASON: &str = "ReadinessGatesNotReady";

/// Why the gates hold `pod` back, in the kubelet's words joined by `", "`; `None` when every
/// gate's condition is True (or the pod has no gates).
pub fn unready_message(pod: &Pod) -> Option<String> {
    let gates = pod.spec.as_ref()?.readiness_gates.as_deref()?;
    let conditions = pod
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_deref())
        .unwrap_or_default();
    let messages: Vec<String> = gates
        .iter()
        .filter_map(|gate| {
            let kind = &gate.condition_type;
            match conditions.iter().find(|c| &c.type_ == kind) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate \"{kind}\" does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate \"{kind}\" is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    (!messages.is_empty()).then(|| messages.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "spec": {"containers": [], "readinessGates": [
                {"conditionType": "k8s.io/test-condition1"},
                {"conditionType": "k8s.io/test-condition2"},
            ]},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn every_gate_must_be_true_and_each_one_that_is_not_is_named() {
        assert_eq!(
            unready_message(&pod(
                json!([{"type": "k8s.io/test-condition1", "status": "False"}])
            ))
            .as_deref(),
            Some(
                "the status of pod readiness gate \"k8s.io/test-condition1\" is not \"True\", \
                 but False, corresponding condition of pod readiness gate \
                 \"k8s.io/test-condition2\" does not exist."
            )
        );
        let both = json!([{"type": "k8s.io/test-condition1", "status": "True"},
                          {"type": "k8s.io/test-condition2", "status": "True"}]);
        assert_eq!(unready_message(&pod(both)), None);
        let ungated: Pod = serde_json::from_value(json!({"spec": {"containers": []}})).unwrap();
        assert_eq!(unready_message(&ungated), None);
    }
}
