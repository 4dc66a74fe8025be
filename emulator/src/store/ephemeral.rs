//! The `pods/ephemeralcontainers` subresource as kube-apiserver's `podEphemeralContainersStrategy`
//! has it: an update there changes `spec.ephemeralContainers` and nothing else (the rest of the
//! object is the stored one), new ephemeral containers get a container's defaults, and those
//! already there may be neither changed nor removed; names are unique among all containers.
//! Pure functions over JSON objects, called by the store's strategy.

use serde_json::{Map, Value};

use crate::api::FieldError;

pub const SUBRESOURCE: &str = "ephemeralcontainers";

/// The stored pod `old` with `new`'s ephemeral containers (`dropNonEphemeralContainerUpdates`),
/// the new ones defaulted.
pub fn prepare_update(old: &Value, new: &mut Value) {
    let mut pod = old.clone();
    for field in ["name", "namespace", "resourceVersion", "uid"] {
        let value = new.pointer(&format!("/metadata/{field}")).cloned();
        if let (Some(meta), Some(value)) = (
            pod.get_mut("metadata").and_then(Value::as_object_mut),
            value,
        ) {
            meta.insert(field.into(), value);
        }
    }
    let mut ephemeral = new
        .pointer("/spec/ephemeralContainers")
        .cloned()
        .unwrap_or(Value::Null);
    if let Value::Array(containers) = &mut ephemeral {
        containers
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .for_each(super::pod_defaults::default_ephemeral_container);
    }
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        if ephemeral.is_null() {
            spec.remove("ephemeralContainers");
        } else {
            spec.insert("ephemeralContainers".into(), ephemeral);
        }
    }
    *new = pod;
}

fn by_name(pod: &Value) -> Map<String, Value> {
    pod.pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c.get("name")?.as_str()?.to_owned(), c.clone())))
        .collect()
}

/// `ValidatePodEphemeralContainersUpdate`'s rules on what an update may do to them.
pub fn validate_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let (before, after) = (by_name(old), by_name(new));
    for (name, container) in &before {
        let problem = match after.get(name) {
            None => "removed",
            Some(now) if now != container => "changed",
            Some(_) => continue,
        };
        errors.push(FieldError::forbidden(
            "spec.ephemeralContainers",
            // The newline is kube-apiserver's; its "changed" text goes on with a diff of the two.
            &format!("existing ephemeral containers {name:?} may not be {problem}\n"),
        ));
    }
    let spec = new.get("spec");
    let mut seen = std::collections::BTreeSet::new();
    for list in ["initContainers", "containers"] {
        for container in spec
            .and_then(|s| s.get(list))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = container.get("name").and_then(Value::as_str) {
                seen.insert(name.to_owned());
            }
        }
    }
    let ephemeral = spec
        .and_then(|s| s.get("ephemeralContainers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (index, container) in ephemeral.iter().enumerate() {
        let name = container.get("name").and_then(Value::as_str).unwrap_or("");
        let field = format!("spec.ephemeralContainers[{index}]");
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{field}.name"), ""));
        } else if !seen.insert(name.to_owned()) {
            errors.push(FieldError::duplicate(&format!("{field}.name"), name));
        }
        if container
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errors.push(FieldError::required(&format!("{field}.image"), ""));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(ephemeral: Value) -> Value {
        json!({
            "metadata": {"name": "p", "namespace": "default", "resourceVersion": "5", "uid": "u"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}], "ephemeralContainers": ephemeral},
            "status": {"phase": "Running"},
        })
    }

    #[test]
    fn only_the_ephemeral_containers_change_and_new_ones_are_defaulted() {
        let old = pod(json!([]));
        let mut new = pod(json!([{"name": "debugger", "image": "busybox:1"}]));
        new["spec"]["containers"] = json!([]);
        new["status"] = json!({});
        prepare_update(&old, &mut new);
        assert_eq!(new["spec"]["containers"], old["spec"]["containers"]);
        assert_eq!(new["status"], old["status"]);
        let debugger = &new["spec"]["ephemeralContainers"][0];
        assert_eq!(debugger["terminationMessagePolicy"], "File");
        assert_eq!(debugger["imagePullPolicy"], "IfNotPresent");
    }

    #[test]
    fn existing_ones_may_not_change_or_go_and_names_are_unique() {
        let old = pod(json!([{"name": "debugger", "image": "busybox"}]));
        let messages = |new: &Value| {
            let mut errors = Vec::new();
            validate_update(&old, new, &mut errors);
            errors
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            messages(&pod(json!([]))),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
            ]
        );
        assert_eq!(
            messages(&pod(json!([{"name": "debugger", "image": "other"}]))),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"
            ]
        );
        assert_eq!(
            messages(&pod(
                json!([{"name": "debugger", "image": "busybox"}, {"name": "app", "image": "x"}])
            )),
            ["spec.ephemeralContainers[1].name: Duplicate value: \"app\""]
        );
    }
}
