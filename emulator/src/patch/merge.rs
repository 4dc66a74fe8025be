//! JSON merge patch (RFC 7386), the `application/merge-patch+json` patch type: maps merge
//! recursively, `null` deletes, everything else (lists included) is replaced.

use serde_json::{Map, Value};

/// Applies `patch` to `original` per RFC 7386.
pub fn apply(original: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    let mut result = match original {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch_map {
        if value.is_null() {
            result.remove(key);
        } else {
            let merged = apply(result.get(key).unwrap_or(&Value::Null), value);
            result.insert(key.clone(), merged);
        }
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let original = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        let patch = json!({"a": "z", "c": {"f": null}, "l": [3]});
        assert_eq!(
            apply(&original, &patch),
            json!({"a": "z", "c": {"d": "e"}, "l": [3]})
        );
        assert_eq!(apply(&json!({"a": "b"}), &json!(["c"])), json!(["c"]));
        assert_eq!(
            apply(&json!({"e": null}), &json!({"a": 1})),
            json!({"e": null, "a": 1})
        );
    }
}
