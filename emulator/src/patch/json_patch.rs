//! JSON patch (RFC 6902), the `application/json-patch+json` patch type: an ordered list of
//! `add`/`remove`/`replace`/`move`/`copy`/`test` operations addressed by JSON pointers.

use serde_json::Value;

use super::PatchError;

/// Applies the operations in `patch` (a JSON array) to a copy of `original`.
pub fn apply(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::BadRequest(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        ));
    };
    let mut doc = original.clone();
    for op in ops {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| PatchError::BadRequest("Unexpected kind: unknown".into()))?;
        let path = pointer_field(op, "path")?;
        match name {
            "add" => add(&mut doc, &path, value_field(op)?)?,
            "remove" => {
                remove(&mut doc, &path)?;
            }
            "replace" => {
                let target = doc
                    .pointer_mut(&path)
                    .ok_or_else(|| missing("replace", &path))?;
                *target = value_field(op)?;
            }
            "move" => {
                let from = pointer_field(op, "from")?;
                let value = remove(&mut doc, &from)?;
                add(&mut doc, &path, value)?;
            }
            "copy" => {
                let from = pointer_field(op, "from")?;
                let value = doc
                    .pointer(&from)
                    .cloned()
                    .ok_or_else(|| missing("copy", &from))?;
                add(&mut doc, &path, value)?;
            }
            "test" => {
                let expected = value_field(op)?;
                if doc.pointer(&path) != Some(&expected) {
                    return Err(PatchError::Unprocessable(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            other => return Err(PatchError::BadRequest(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(doc)
}

fn pointer_field(op: &Value, field: &str) -> Result<String, PatchError> {
    op.get(field)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| PatchError::BadRequest(format!("operation missing {field} field")))
}

fn value_field(op: &Value) -> Result<Value, PatchError> {
    op.get("value")
        .cloned()
        .ok_or_else(|| PatchError::BadRequest("operation missing value field".into()))
}

fn missing(op: &str, path: &str) -> PatchError {
    PatchError::Unprocessable(format!(
        "{op} operation does not apply: doc is missing path: {path:?}"
    ))
}

/// Splits `/a/b~1c` into the parent pointer `/a` and the unescaped last token `b/c`.
fn split_last(path: &str) -> Result<(&str, String), PatchError> {
    let slash = path.rfind('/').ok_or_else(|| {
        PatchError::BadRequest(format!(
            "JSON pointer must be empty or start with a \"/\": {path:?}"
        ))
    })?;
    let token = path[slash + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..slash], token))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, token) = split_last(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(token, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if token == "-" {
                items.len()
            } else {
                token.parse::<usize>().map_err(|_| missing("add", path))?
            };
            if index > items.len() {
                return Err(PatchError::Unprocessable(format!(
                    "add operation does not apply: index out of bounds: {path:?}"
                )));
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(missing("add", path)),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (parent, token) = split_last(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&token).ok_or_else(|| missing("remove", path)),
        Some(Value::Array(items)) => {
            let index = token
                .parse::<usize>()
                .map_err(|_| missing("remove", path))?;
            if index >= items.len() {
                return Err(missing("remove", path));
            }
            Ok(items.remove(index))
        }
        _ => Err(missing("remove", path)),
    }
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

    #[test]
    fn failed_test_and_missing_paths_are_unprocessable() {
        let doc = json!({"a": 1});
        assert!(matches!(
            apply(&doc, &json!([{"op": "test", "path": "/a", "value": 2}])),
            Err(PatchError::Unprocessable(_))
        ));
        assert!(matches!(
            apply(&doc, &json!([{"op": "replace", "path": "/b", "value": 2}])),
            Err(PatchError::Unprocessable(_))
        ));
        assert!(matches!(
            apply(&doc, &json!({"op": "add"})),
            Err(PatchError::BadRequest(_))
        ));
    }
}
