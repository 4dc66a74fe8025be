//! Does a Node satisfy a pod's `nodeSelector` and required node affinity? The scheduler's
//! `GetRequiredNodeAffinity(pod).Match(node)` (component-helpers `nodeaffinity`), which the
//! kubelet re-checks at admission. Pure: labels and the node's name in, a yes or no out.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod};

/// True when every `nodeSelector` label matches and, if the pod has required node affinity,
/// at least one of its terms does.
pub fn matches_required_affinity(pod: &Pod, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_matches = spec.node_selector.iter().flatten().all(|(key, value)| {
        labels
            .get(key)
            .is_some_and(|label| label.as_str() == value.as_str())
    });
    let required = spec
        .affinity
        .as_ref()
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|node_affinity| {
            node_affinity
                .required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    selector_matches
        && required.is_none_or(|selector| {
            // Terms are ORed; an empty list matches nothing, as in the scheduler.
            selector
                .node_selector_terms
                .iter()
                .any(|term| term_matches(term, labels, node_name))
        })
}

/// A term ANDs its expressions and fields; a term with neither matches nothing, and a term
/// with an invalid requirement (the scheduler's parse error) is skipped.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, node: &str) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels_match = expressions
        .iter()
        .all(|requirement| label_requirement(requirement, labels) == Some(true));
    let fields_match = fields
        .iter()
        .all(|requirement| field_requirement(requirement, node) == Some(true));
    labels_match && fields_match
}

/// `Some(matched)`, or `None` for a requirement the scheduler refuses to parse.
fn label_requirement(
    requirement: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let label = labels.get(&requirement.key);
    match requirement.operator.as_str() {
        "In" if !values.is_empty() => Some(label.is_some_and(|label| values.contains(label))),
        "NotIn" if !values.is_empty() => Some(label.is_none_or(|label| !values.contains(label))),
        "Exists" if values.is_empty() => Some(label.is_some()),
        "DoesNotExist" if values.is_empty() => Some(label.is_none()),
        operator @ ("Gt" | "Lt") => {
            let [bound] = values else { return None };
            let bound: i64 = bound.parse().ok()?;
            let Some(Ok(value)) = label.map(|label| label.parse::<i64>()) else {
                return Some(false);
            };
            Some(if operator == "Gt" {
                value > bound
            } else {
                value < bound
            })
        }
        _ => None,
    }
}

/// `matchFields` supports only `metadata.name` with `In`/`NotIn` and one value.
fn field_requirement(requirement: &NodeSelectorRequirement, node: &str) -> Option<bool> {
    let values = requirement.values.as_deref().unwrap_or_default();
    if requirement.key != "metadata.name" || values.len() != 1 {
        return None;
    }
    match requirement.operator.as_str() {
        "In" => Some(values[0] == node),
        "NotIn" => Some(values[0] != node),
        _ => None,
    }
}
