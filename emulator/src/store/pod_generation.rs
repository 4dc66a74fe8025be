//! A Pod's `metadata.generation` and the `observedGeneration`s its status carries, as
//! kube-apiserver's pod strategies keep them: the generation moves by one with every change of
//! the spec (`updatePodGeneration`, on the main resource and the ephemeralcontainers
//! subresource alike), and a pods/status write that leaves `status.observedGeneration` or a
//! condition's `observedGeneration` unset keeps the stored one (`preserveOldObservedGeneration`).
//! Pure; the strategy calls them on the typed round-trip of both objects.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::strategy::object_entry;

/// Bumps `new`'s generation when its spec differs from `old`'s. Both are in their stored
/// form (round-tripped through the typed Pod), so a field sent as `null` or left out is no
/// change, as Go's semantic equality sees it.
pub fn bump_on_spec_change(old: &Value, new: &mut Map<String, Value>) {
    if old.get("spec") == new.get("spec") {
        return;
    }
    let generation = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    object_entry(new, "metadata").insert("generation".into(), (generation + 1).into());
}

/// A status write that clears an `observedGeneration` (absent or 0) keeps the stored value:
/// the status's own, and each condition's from the stored condition of its type (in order,
/// when a type repeats).
pub fn preserve_observed_generation(old: &Value, new: &mut Map<String, Value>) {
    let generation_of = |value: Option<&Value>| value.and_then(Value::as_i64).unwrap_or(0);
    let status = object_entry(new, "status");
    if generation_of(status.get("observedGeneration")) == 0 {
        match old.pointer("/status/observedGeneration") {
            Some(stored) if generation_of(Some(stored)) != 0 => {
                status.insert("observedGeneration".into(), stored.clone());
            }
            _ => {}
        }
    }
    let mut stored: HashMap<&str, Vec<i64>> = HashMap::new();
    for condition in old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = condition.get("type").and_then(Value::as_str).unwrap_or("");
        stored
            .entry(kind)
            .or_default()
            .push(generation_of(condition.get("observedGeneration")));
    }
    for stored in stored.values_mut() {
        stored.reverse();
    }
    let Some(Value::Array(conditions)) = status.get_mut("conditions") else {
        return;
    };
    for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
        let kind = condition.get("type").and_then(Value::as_str).unwrap_or("");
        let previous = stored.get_mut(kind).and_then(Vec::pop).unwrap_or(0);
        if generation_of(condition.get("observedGeneration")) == 0 && previous != 0 {
            condition.insert("observedGeneration".into(), previous.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{bump_on_spec_change, preserve_observed_generation};

    fn map(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn only_a_changed_spec_moves_the_generation_by_one() {
        let old = json!({"metadata": {"generation": 4}, "spec": {"a": 1}});
        let mut same =
            map(json!({"metadata": {"generation": 4, "labels": {"x": "y"}}, "spec": {"a": 1}}));
        bump_on_spec_change(&old, &mut same);
        assert_eq!(same["metadata"]["generation"], 4);
        let mut changed = map(json!({"metadata": {"generation": 4}, "spec": {"a": 2}}));
        bump_on_spec_change(&old, &mut changed);
        assert_eq!(changed["metadata"]["generation"], 5);
    }

    #[test]
    fn a_status_write_without_observed_generations_keeps_the_stored_ones() {
        let old = json!({"status": {"observedGeneration": 3, "conditions": [
            {"type": "Ready", "observedGeneration": 3},
            {"type": "custom", "observedGeneration": 1},
            {"type": "custom", "observedGeneration": 2},
        ]}});
        let mut new = map(json!({"status": {"conditions": [
            {"type": "custom"},
            {"type": "Ready", "observedGeneration": 0},
            {"type": "custom", "observedGeneration": 7},
            {"type": "PodScheduled"},
        ]}}));
        preserve_observed_generation(&old, &mut new);
        assert_eq!(
            Value::Object(new),
            json!({"status": {"observedGeneration": 3, "conditions": [
                {"type": "custom", "observedGeneration": 1},
                {"type": "Ready", "observedGeneration": 3},
                {"type": "custom", "observedGeneration": 7},
                {"type": "PodScheduled"},
            ]}})
        );
    }

    #[test]
    fn a_status_write_with_observed_generations_sets_them() {
        let old = json!({"status": {"observedGeneration": 3, "conditions": [{"type": "Ready", "observedGeneration": 3}]}});
        let mut new = map(
            json!({"status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "observedGeneration": 2}]}}),
        );
        preserve_observed_generation(&old, &mut new);
        assert_eq!(new["status"]["observedGeneration"], 2);
        assert_eq!(new["status"]["conditions"][0]["observedGeneration"], 2);
    }
}
