//! Strategic merge patch, as apimachinery's `strategicpatch.StrategicMergeMapPatch` applies it on
//! the server (`MergeParallelList` and `IgnoreUnmatchedNulls` on).
//!
//! Lists merge by their Kubernetes merge keys ([`Schema`]); the directives `$patch`
//! (`replace`/`delete`), `$retainKeys`, `$setElementOrder/<list>` and
//! `$deleteFromPrimitiveList/<list>` are honoured, and `null` deletes a map key. Ordering follows
//! the upstream rule: `$setElementOrder` > order in the patch > order in the live list.

use serde_json::{Map, Value};

use super::PatchError;
use super::schema::{ListStrategy, Schema};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

/// Applies `patch` (a JSON object) to `original`.
pub fn apply(original: &Value, patch: &Value, schema: Schema) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::BadRequest(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    let original = match original {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    merge_map(original, patch.clone(), schema).map(Value::Object)
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => Ok(strip_map(patch)),
            Some("delete") => Ok(Map::new()),
            _ => Err(PatchError::BadRequest(format!(
                "Unknown patch type: {directive} in map: {}",
                Value::Object(patch)
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_ordered_lists(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE) {
            Some(list_key) => (list_key.to_string(), true),
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(current) = original.remove(&key) else {
            original.insert(key, strip(patch_value));
            continue;
        };
        let meta = schema.field(&key);
        let merged = match (current, patch_value) {
            (Value::Object(current), Value::Object(patch_map)) => {
                Value::Object(merge_map(current, patch_map, meta.schema)?)
            }
            (Value::Array(current), Value::Array(patch_list)) => match meta.list {
                ListStrategy::Merge { key: merge_key } => Value::Array(merge_list(
                    current,
                    patch_list,
                    merge_key,
                    meta.schema,
                    is_delete_list,
                )?),
                ListStrategy::Replace => strip(Value::Array(patch_list)),
            },
            (_, replacement) => strip(replacement),
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// `$retainKeys`: keys of the live map not listed are cleared; every patched key must be listed.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadRequest(
            "invalid patch format of retainKeys".into(),
        ));
    };
    let listed = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE)
            && !k.starts_with(SET_ORDER)
            && !listed(k)
        {
            return Err(PatchError::BadRequest(
                "invalid patch format of retainKeys".into(),
            ));
        }
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// `$setElementOrder/<list>`: merges the named list (if patched) and orders the result.
fn merge_ordered_lists(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Schema,
) -> Result<(), PatchError> {
    let order_keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER))
        .cloned()
        .collect();
    for order_key in order_keys {
        let Some(Value::Array(order)) = patch.remove(&order_key) else {
            return Err(PatchError::BadRequest(
                "invalid patch format of setElementOrder list".into(),
            ));
        };
        let list_key = &order_key[SET_ORDER.len()..];
        let meta = schema.field(list_key);
        let merge_key = match meta.list {
            ListStrategy::Merge { key } => key,
            ListStrategy::Replace => None,
        };
        let live = match original.get(list_key) {
            Some(Value::Array(items)) => Some(items.clone()),
            Some(_) => return Err(PatchError::BadRequest(format!("{list_key} is not a list"))),
            None => None,
        };
        let patched = match patch.remove(list_key) {
            Some(Value::Array(items)) => Some(items),
            Some(_) => return Err(PatchError::BadRequest(format!("{list_key} is not a list"))),
            None => None,
        };
        let merged = match (live.clone(), patched) {
            (None, None) => continue,
            (Some(live), None) => live,
            (None, Some(patched)) => strip_list(patched),
            (Some(live), Some(patched)) => match meta.list {
                ListStrategy::Merge { key } => merge_list(live, patched, key, meta.schema, false)?,
                ListStrategy::Replace => strip_list(patched),
            },
        };
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|item| index_of(&order, item, merge_key).is_some());
        let live = live.unwrap_or_default();
        original.insert(
            list_key.to_string(),
            Value::Array(normalize_order(
                in_order,
                server_only,
                &order,
                &live,
                merge_key,
            )),
        );
    }
    Ok(())
}

fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: Option<&str>,
    schema: Schema,
    is_delete_list: bool,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let of_maps = original
        .iter()
        .chain(&patch)
        .next()
        .is_some_and(Value::is_object);
    if !of_maps {
        if is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for item in original.iter().chain(&patch) {
            if !merged.contains(item) {
                merged.push(item.clone());
            }
        }
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
            merged.into_iter().partition(|v| patch.contains(v));
        return Ok(normalize_order(
            in_patch,
            server_only,
            &patch,
            &original,
            None,
        ));
    }
    let Some(key) = merge_key else {
        return Err(PatchError::Internal(
            "cannot merge lists without merge key for type map".into(),
        ));
    };
    let (original, patch) = apply_list_directives(original, patch, key)?;
    let mut merged = original.clone();
    for item in &patch {
        let Value::Object(item_map) = item else {
            return Err(PatchError::BadRequest(format!(
                "list item {item} is not a map"
            )));
        };
        let Some(key_value) = item_map.get(key) else {
            return Err(PatchError::Internal(format!(
                "map: {item} does not contain declared merge key: {key}"
            )));
        };
        match merged.iter().position(|m| m.get(key) == Some(key_value)) {
            Some(i) => {
                let current = match std::mem::take(&mut merged[i]) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(current, item_map.clone(), schema)?);
            }
            None => merged.push(strip(item.clone())),
        }
    }
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index_of(&patch, v, Some(key)).is_some());
    Ok(normalize_order(
        in_patch,
        server_only,
        &patch,
        &original,
        Some(key),
    ))
}

/// Handles list items carrying `$patch`: `delete` removes matching live items, `replace` makes the
/// rest of the patch list the whole list.
fn apply_list_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        match item.get(DIRECTIVE).map(|d| d.as_str()) {
            None => plain.push(item),
            Some(Some("delete")) => {
                let Some(key_value) = item.get(key) else {
                    return Err(PatchError::Internal(format!(
                        "map: {item} does not contain declared merge key: {key}"
                    )));
                };
                original.retain(|live| live.get(key) != Some(key_value));
            }
            Some(Some("replace")) => replace = true,
            Some(Some("merge")) => {
                return Err(PatchError::BadRequest(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            Some(other) => {
                return Err(PatchError::BadRequest(format!(
                    "Unknown patch type: {other:?} in map: {item}"
                )));
            }
        }
    }
    if replace {
        return Ok((strip_list(plain), Vec::new()));
    }
    Ok((original, plain))
}

/// Sorts patch items by `patch_order` and server-only items by `server_order`, then interleaves
/// them (apimachinery's `normalizeElementOrder` + `mergeSortedSlice`).
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    patch_items.sort_by_key(|v| index_of(patch_order, v, key).unwrap_or(usize::MAX));
    server_only.sort_by_key(|v| index_of(server_order, v, key).unwrap_or(usize::MAX));
    let mut result = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_of(server_order, l, key), index_of(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        result.extend(next);
    }
    result
}

fn index_of(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    match key {
        Some(key) => {
            let wanted = item.get(key)?;
            list.iter().position(|v| v.get(key) == Some(wanted))
        }
        None => list.iter().position(|v| v == item),
    }
}

/// Removes patch directives from a value copied verbatim into the result; kube-apiserver drops
/// them when it decodes the merged JSON into the typed object.
fn strip(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_map(map)),
        Value::Array(items) => Value::Array(strip_list(items)),
        other => other,
    }
}

fn strip_map(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(k, _)| !is_directive(k))
        .map(|(k, v)| (k, strip(v)))
        .collect()
}

fn strip_list(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().map(strip).collect()
}

fn is_directive(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE)
}

#[cfg(test)]
#[path = "strategic_tests.rs"]
mod tests;
