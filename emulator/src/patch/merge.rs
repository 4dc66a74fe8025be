//! JSON merge patch (RFC 7386), the `application/merge-patch+json` patch type: maps merge
//! recursively, `null` deletes, everything else (lists included) is replaced.

use serde_json::Value;

/// Applies `patch` to `original` per RFC 7386 (the `json-patch` crate's merge).
pub fn apply(original: &Value, patch: &Value) -> Value {
    let mut merged = original.clone();
    json_patch::merge(&mut merged, patch);
    merged
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
