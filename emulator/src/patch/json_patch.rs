//! JSON patch (RFC 6902), the `application/json-patch+json` patch type: an ordered list of
//! `add`/`remove`/`replace`/`move`/`copy`/`test` operations addressed by JSON pointers.
//!
//! The `json-patch` crate applies the operations (all or nothing); this module keeps
//! kube-apiserver's answers, which come from evanphx/json-patch v4: a body that is not a list
//! is 400, anything wrong with an operation (its kind, a missing field, a path that does not
//! apply) is 422 with that library's message.

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::PatchError;

/// Applies the operations in `patch` (a JSON array) to a copy of `original`.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::BadRequest(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    };
    let operations = ops.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    let mut doc = original.clone();
    json_patch::patch(&mut doc, &operations)
        .map_err(|e| does_not_apply(original, &e, &operations))?;
    Ok(doc)
}

/// One operation, with evanphx's words for a missing kind or field. A missing `value` is
/// `null` there, as it is here.
fn decode(op: &Value) -> Result<PatchOperation, PatchError> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
    let unprocessable = |message: String| Err(PatchError::Unprocessable(message));
    if !matches!(
        kind,
        "add" | "remove" | "replace" | "move" | "copy" | "test"
    ) {
        return unprocessable(format!("Unexpected kind: {kind}"));
    }
    if matches!(kind, "move" | "copy") && !op.get("from").is_some_and(Value::is_string) {
        return unprocessable(format!(
            "{kind} operation failed to decode from: operation, missing from field: missing value"
        ));
    }
    if !op.get("path").is_some_and(Value::is_string) {
        let detail = match kind {
            "add" | "remove" | "copy" => "missing value",
            _ => "operation missing path field: missing value",
        };
        return unprocessable(format!("{kind} operation failed to decode path: {detail}"));
    }
    let mut op = op.clone();
    if let Some(map) = op.as_object_mut() {
        map.entry("value").or_insert(Value::Null);
    }
    serde_json::from_value(op).map_err(|e| PatchError::Unprocessable(e.to_string()))
}

/// The 422 for an operation that does not apply, worded as evanphx/json-patch words it. The
/// document as the failed operation saw it tells a missing parent from a missing key.
fn does_not_apply(
    original: &Value,
    error: &json_patch::PatchError,
    operations: &[PatchOperation],
) -> PatchError {
    let mut before = original.clone();
    // The operations before the failed one applied once; redoing them cannot fail.
    let _ = json_patch::patch(&mut before, &operations[..error.operation]);
    let path = error.path.to_string();
    let message = match (&error.kind, operations.get(error.operation)) {
        (PatchErrorKind::TestFailed, _) => format!("testing value {path} failed: test failed"),
        (_, Some(PatchOperation::Move(op))) => {
            moved_or_copied("move", &before, &op.from.to_string(), &path)
        }
        (_, Some(PatchOperation::Copy(op))) => {
            moved_or_copied("copy", &before, &op.from.to_string(), &path)
        }
        (_, Some(PatchOperation::Add(_))) => match parent(&before, &path) {
            Some(Value::Array(_)) => format!(
                "error in add for path: '{path}': Unable to access invalid index: {}: invalid index referenced",
                last_token(&path)
            ),
            _ => format!("add operation does not apply: doc is missing path: \"{path}\""),
        },
        (_, Some(PatchOperation::Remove(_))) => match parent(&before, &path) {
            Some(Value::Array(_)) => format!(
                "error in remove for path: '{path}': Unable to access invalid index: {}: invalid index referenced",
                last_token(&path)
            ),
            Some(_) => format!(
                "error in remove for path: '{path}': Unable to remove nonexistent key: {}: missing value",
                last_token(&path)
            ),
            None => format!("remove operation does not apply: doc is missing path: \"{path}\""),
        },
        (_, Some(PatchOperation::Replace(_))) => match parent(&before, &path) {
            Some(_) => format!("replace operation does not apply: doc is missing key: {path}"),
            None => format!("replace operation does not apply: doc is missing path: {path}"),
        },
        (_, _) => format!("test operation does not apply: is missing path: {path}"),
    };
    PatchError::Unprocessable(message)
}

/// evanphx's message for a move or copy: its source missing, or else its destination.
fn moved_or_copied(kind: &str, doc: &Value, from: &str, path: &str) -> String {
    if doc.pointer(from).is_none() {
        format!("{kind} operation does not apply: doc is missing from path: {from}")
    } else {
        format!("{kind} operation does not apply: doc is missing destination path: {path}")
    }
}

/// The container `path` points into, if it exists.
fn parent<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let cut = path.rfind('/')?;
    doc.pointer(&path[..cut])
        .filter(|v| v.is_object() || v.is_array())
}

/// The unescaped last token of `path`.
fn last_token(path: &str) -> String {
    path.rsplit('/')
        .next()
        .unwrap_or("")
        .replace("~1", "/")
        .replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn applies_each_operation_in_order() {
        let doc = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"taints": [{"key": "x"}]}});
        let patch = json!([
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "9"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "y"}},
            {"op": "remove", "path": "/spec/taints/0"},
            {"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/d"},
            {"op": "move", "from": "/metadata/labels/d", "path": "/metadata/labels/e"},
            {"op": "test", "path": "/metadata/labels/e", "value": "9"}
        ]);
        let out = apply(&doc, &patch).expect("patch applies");
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"a": "9", "b/c": "2", "e": "9"}}, "spec": {"taints": [{"key": "y"}]}})
        );
    }

    /// Each failure as kube-apiserver's evanphx/json-patch v4 words it (all 422).
    #[test]
    fn operations_that_do_not_apply_are_unprocessable_in_evanphx_words() {
        let doc = json!({"a": 1, "m": {"k": 1}, "list": [1]});
        for (patch, message) in [
            (
                json!([{"op": "test", "path": "/a", "value": 2}]),
                "testing value /a failed: test failed",
            ),
            (
                json!([{"op": "add", "path": "/x/y", "value": 2}]),
                "add operation does not apply: doc is missing path: \"/x/y\"",
            ),
            (
                json!([{"op": "add", "path": "/list/5", "value": 2}]),
                "error in add for path: '/list/5': Unable to access invalid index: 5: invalid index referenced",
            ),
            (
                json!([{"op": "remove", "path": "/m/nope"}]),
                "error in remove for path: '/m/nope': Unable to remove nonexistent key: nope: missing value",
            ),
            (
                json!([{"op": "remove", "path": "/list/3"}]),
                "error in remove for path: '/list/3': Unable to access invalid index: 3: invalid index referenced",
            ),
            (
                json!([{"op": "remove", "path": "/x/y"}]),
                "remove operation does not apply: doc is missing path: \"/x/y\"",
            ),
            (
                json!([{"op": "replace", "path": "/x/y", "value": 2}]),
                "replace operation does not apply: doc is missing path: /x/y",
            ),
            (
                json!([{"op": "copy", "from": "/nope", "path": "/c"}]),
                "copy operation does not apply: doc is missing from path: /nope",
            ),
            (
                json!([{"op": "move", "from": "/a", "path": "/x/y"}]),
                "move operation does not apply: doc is missing destination path: /x/y",
            ),
            (json!([{"path": "/a"}]), "Unexpected kind: unknown"),
            (
                json!([{"op": "frobnicate", "path": "/a"}]),
                "Unexpected kind: frobnicate",
            ),
            (
                json!([{"op": "add", "value": 1}]),
                "add operation failed to decode path: missing value",
            ),
            (
                json!([{"op": "replace", "value": 1}]),
                "replace operation failed to decode path: operation missing path field: missing value",
            ),
            (
                json!([{"op": "move", "path": "/b"}]),
                "move operation failed to decode from: operation, missing from field: missing value",
            ),
        ] {
            assert_eq!(
                apply(&doc, &patch),
                Err(PatchError::Unprocessable(message.into())),
                "{patch}"
            );
        }
    }

    #[test]
    fn only_a_body_that_is_not_a_list_is_a_bad_request() {
        assert_eq!(
            apply(&json!({}), &json!({"op": "add"})),
            Err(PatchError::BadRequest(
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into()
            ))
        );
    }

    #[test]
    fn a_missing_value_adds_null_as_evanphx_does() {
        let out = apply(&json!({}), &json!([{"op": "add", "path": "/a"}]));
        assert_eq!(out, Ok(json!({"a": null})));
    }

    #[test]
    fn a_later_failure_is_judged_on_the_document_the_earlier_operations_made() {
        let patch =
            json!([{"op": "add", "path": "/m", "value": {}}, {"op": "remove", "path": "/m/k"}]);
        assert_eq!(
            apply(&json!({}), &patch),
            Err(PatchError::Unprocessable(
                "error in remove for path: '/m/k': Unable to remove nonexistent key: k: missing value".into()
            ))
        );
    }

    #[test]
    fn a_failing_operation_leaves_the_document_as_it_was() {
        let doc = json!({"a": 1});
        let patch = json!([{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 3}]);
        assert!(apply(&doc, &patch).is_err());
        assert_eq!(doc, json!({"a": 1}));
    }
}
