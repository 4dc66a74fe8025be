//! A pod status in the form kube-apiserver serves it. Go's encoder leaves out every empty
//! `omitempty` field (`""`, `[]`, an empty map) and always writes struct-valued ones (a
//! container's `lastState: {}`, a condition's zero `lastProbeTime: null`), so a status that
//! nodepulse holds as `None` comes back as `{}`, and one it holds as `Some("")` comes back
//! absent. Both sides of a comparison are brought to one form first, where every such empty
//! is absent; compared as they are, a status the API already has would look changed at every
//! batch pass and be PATCHed, for nothing, forever. Pure.

use serde_json::Value;

/// A container state's members: `{"running": {}}` (running, start time unknown) says something
/// that `{}` does not, so these empty objects are kept.
const STATE_MEMBERS: [&str; 3] = ["running", "waiting", "terminated"];

/// Removes, at every depth, the members whose value is empty as Go's `omitempty` sees it:
/// `null`, `""`, `[]` and `{}` (an empty container state member excepted). Go decodes an
/// absent field to that same zero value, so nothing the API would store is lost; booleans and
/// numbers are kept (`ready: false` and `uid: 0` are not omitted by Go).
pub fn without_empty_fields(value: &mut Value) {
    match value {
        Value::Object(members) => {
            for (_, member) in members.iter_mut() {
                without_empty_fields(member);
            }
            members.retain(|key, member| {
                !is_empty(member) || (STATE_MEMBERS.contains(&key.as_str()) && member.is_object())
            });
        }
        Value::Array(items) => items.iter_mut().for_each(without_empty_fields),
        _ => {}
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::without_empty_fields;

    fn canonical(mut value: Value) -> Value {
        without_empty_fields(&mut value);
        value
    }

    #[test]
    fn go_empties_are_absent_and_meaningful_values_stay() {
        let cases = [
            (
                "a served container status: lastState {} and the zero times",
                json!({"containerStatuses": [{"name": "app", "imageID": "", "lastState": {}, "ready": false,
                    "restartCount": 0, "state": {"running": {"startedAt": null}}}],
                    "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null}]}),
                json!({"containerStatuses": [{"name": "app", "ready": false, "restartCount": 0,
                    "state": {"running": {}}}],
                    "conditions": [{"type": "Ready", "status": "True"}]}),
            ),
            (
                "empty strings, lists and maps at any depth",
                json!({"message": "", "podIPs": [], "containerStatuses": [{"name": "a", "allocatedResources": {}}]}),
                json!({"containerStatuses": [{"name": "a"}]}),
            ),
            (
                "a waiting state without a reason is still waiting; root's uid 0 is kept",
                json!({"state": {"waiting": {"reason": ""}}, "user": {"linux": {"uid": 0, "gid": 0}}}),
                json!({"state": {"waiting": {}}, "user": {"linux": {"uid": 0, "gid": 0}}}),
            ),
        ];
        for (name, served, expected) in cases {
            assert_eq!(canonical(served), expected, "{name}");
        }
    }
}
