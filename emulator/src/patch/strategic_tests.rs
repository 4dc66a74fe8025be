//! Table tests for strategic merge patch; expected results follow apimachinery's own
//! `patch_test.go` cases for the same inputs.

use serde_json::{Value, json};

use super::apply;
use crate::patch::schema::Schema;

fn node_status(conditions: Value) -> Value {
    json!({"status": {"conditions": conditions}})
}

fn types_of(node: &Value) -> Vec<&str> {
    node["status"]["conditions"]
        .as_array()
        .map(|c| c.iter().filter_map(|x| x["type"].as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn conditions_merge_by_type_keeping_other_fields() {
    let live = node_status(json!([
        {"type": "MemoryPressure", "status": "False", "reason": "Fine"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    ]));
    let patch = node_status(json!([{"type": "Ready", "status": "False"}]));
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(types_of(&out), ["MemoryPressure", "Ready"]);
    assert_eq!(
        out["status"]["conditions"][1],
        json!({"type": "Ready", "status": "False", "reason": "KubeletReady"})
    );
    assert_eq!(out["status"]["conditions"][0]["reason"], "Fine");
}

/// apimachinery's `mergeSortedSlice` cannot place a new item relative to live ones, so without
/// `$setElementOrder` patched items come first (what kubectl users observe, too).
#[test]
fn new_list_items_without_an_order_directive_precede_server_only_items() {
    let live = node_status(json!([{"type": "Ready", "status": "True"}]));
    let patch = node_status(json!([{"type": "PIDPressure", "status": "False"}]));
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(types_of(&out), ["PIDPressure", "Ready"]);
}

#[test]
fn set_element_order_reorders_and_keeps_server_only_items() {
    let live = node_status(json!([
        {"type": "Ready", "status": "True"},
        {"type": "MemoryPressure", "status": "False"},
        {"type": "CustomNPD", "status": "False"}
    ]));
    let patch = json!({"status": {
        "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "Ready"}],
        "conditions": [{"type": "Ready", "status": "False"}]
    }});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(types_of(&out), ["MemoryPressure", "Ready", "CustomNPD"]);
    assert_eq!(out["status"]["conditions"][1]["status"], "False");
    assert!(out["status"].get("$setElementOrder/conditions").is_none());
}

#[test]
fn patch_delete_directive_removes_list_item_by_key() {
    let live = json!({"status": {"addresses": [
        {"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}
    ]}});
    let patch = json!({"status": {"addresses": [{"type": "InternalIP", "$patch": "delete"}]}});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(
        out["status"]["addresses"],
        json!([{"type": "Hostname", "address": "n1"}])
    );
}

#[test]
fn patch_replace_directive_replaces_a_list_or_a_map() {
    let live =
        node_status(json!([{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]));
    let patch = node_status(json!([{"$patch": "replace"}, {"type": "Y", "status": "False"}]));
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "Y", "status": "False"}])
    );

    let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
    let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
}

#[test]
fn patch_delete_directive_on_a_map_empties_it() {
    let live = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"unschedulable": true}});
    let patch = json!({"metadata": {"labels": {"$patch": "delete"}}});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(out["metadata"]["labels"], json!({}));
    assert_eq!(out["spec"]["unschedulable"], true);
}

#[test]
fn null_deletes_a_map_key_and_absent_keys_are_kept() {
    let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}});
    let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}}});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    assert_eq!(out["metadata"]["annotations"], json!({"x": "y"}));
}

#[test]
fn retain_keys_clears_unlisted_live_keys() {
    let live =
        json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}]}});
    let patch = json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/y"}}]}});
    let out = apply(&live, &patch, Schema::Pod).expect("patch applies");
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "v", "hostPath": {"path": "/y"}}])
    );
}

#[test]
fn retain_keys_rejects_patched_keys_it_does_not_list() {
    let live = json!({"spec": {}});
    let patch = json!({"spec": {"$retainKeys": ["a"], "b": 1}});
    assert!(apply(&live, &patch, Schema::Node).is_err());
}

#[test]
fn lists_without_merge_strategy_are_replaced() {
    let live = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
    let patch = json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(
        out["spec"]["taints"],
        json!([{"key": "b", "effect": "NoExecute"}])
    );

    let live = json!({"status": {"containerStatuses": [{"name": "a", "ready": true}, {"name": "b", "ready": true}]}});
    let patch = json!({"status": {"containerStatuses": [{"name": "a", "ready": false}]}});
    let out = apply(&live, &patch, Schema::Pod).expect("patch applies");
    assert_eq!(
        out["status"]["containerStatuses"],
        json!([{"name": "a", "ready": false}])
    );
}

#[test]
fn primitive_merge_lists_union_and_delete_from_primitive_list() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let patch = json!({"metadata": {"finalizers": ["c", "a"]}});
    let out = apply(&live, &patch, Schema::Pod).expect("patch applies");
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));

    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
    let out = apply(&live, &patch, Schema::Pod).expect("patch applies");
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn directives_inside_new_subtrees_do_not_leak_into_the_object() {
    let live = json!({"metadata": {"name": "n"}});
    let patch = json!({"status": {"$setElementOrder/conditions": [{"type": "Ready"}], "conditions": [{"type": "Ready", "status": "True"}]}});
    let out = apply(&live, &patch, Schema::Node).expect("patch applies");
    assert_eq!(
        out["status"],
        json!({"conditions": [{"type": "Ready", "status": "True"}]})
    );
}

#[test]
fn merge_list_items_need_their_merge_key() {
    let live = node_status(json!([{"type": "Ready", "status": "True"}]));
    let patch = node_status(json!([{"status": "False"}]));
    assert!(apply(&live, &patch, Schema::Node).is_err());
}
