//! kube-apiserver's `RuntimeClass` admission plugin on pod create
//! (`plugin/pkg/admission/runtimeclass/admission.go`): a pod naming a RuntimeClass that does
//! not exist is refused; the class's `overhead.podFixed` becomes the pod's `overhead` (a
//! different one of the pod's own is refused); its `scheduling.nodeSelector` is merged into the
//! pod's (a conflicting value is refused) and its tolerations added. Pure, over JSON.

use serde_json::{Map, Value};

/// Applies RuntimeClass admission to `pod`; `class` is what the store holds under the name the
/// pod gives (`None`: no such class). `Err` is the plugin's Forbidden cause.
pub fn admit(pod: &mut Value, class: impl Fn(&str) -> Option<Value>) -> Result<(), String> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let Some(name) = spec.get("runtimeClassName").and_then(Value::as_str) else {
        return validate_overhead(spec, None);
    };
    let Some(class) = class(name) else {
        return Err(format!("pod rejected: RuntimeClass {name:?} not found"));
    };
    set_overhead(spec, &class)?;
    set_scheduling(spec, &class)?;
    validate_overhead(spec, Some(&class))
}

const OVERHEAD_MISMATCH: &str =
    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead";

fn class_overhead(class: &Value) -> Option<&Value> {
    class.pointer("/overhead/podFixed").filter(|v| !v.is_null())
}

fn set_overhead(spec: &mut Map<String, Value>, class: &Value) -> Result<(), String> {
    let Some(fixed) = class_overhead(class) else {
        return Ok(());
    };
    let own = spec
        .get("overhead")
        .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()));
    if own.is_some_and(|own| own != fixed) {
        return Err(OVERHEAD_MISMATCH.to_owned());
    }
    spec.insert("overhead".to_owned(), fixed.clone());
    Ok(())
}

fn set_scheduling(spec: &mut Map<String, Value>, class: &Value) -> Result<(), String> {
    let Some(scheduling) = class.get("scheduling").and_then(Value::as_object) else {
        return Ok(());
    };
    if let Some(wanted) = scheduling.get("nodeSelector").and_then(Value::as_object) {
        let selector = spec
            .entry("nodeSelector")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(selector) = selector.as_object_mut() {
            for (key, value) in wanted {
                if let Some(own) = selector.get(key).filter(|own| *own != value) {
                    let show = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                    return Err(format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {}; pod.spec.nodeSelector[{key}] = {}",
                        show(value),
                        show(own)
                    ));
                }
                selector.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(extra) = scheduling.get("tolerations").and_then(Value::as_array) {
        let tolerations = spec
            .entry("tolerations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(tolerations) = tolerations.as_array_mut() {
            // `MergeTolerations`, for equal tolerations: each once.
            for toleration in extra {
                if !tolerations.contains(toleration) {
                    tolerations.push(toleration.clone());
                }
            }
        }
    }
    Ok(())
}

fn validate_overhead(spec: &Map<String, Value>, class: Option<&Value>) -> Result<(), String> {
    let own = spec.get("overhead").filter(|v| !v.is_null());
    match class.and_then(class_overhead) {
        Some(fixed) if own != Some(fixed) => Err(OVERHEAD_MISMATCH.to_owned()),
        Some(_) => Ok(()),
        None if own.is_some() => Err(
            "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                .to_owned(),
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class() -> Value {
        json!({"metadata": {"name": "kata"}, "handler": "kata",
            "overhead": {"podFixed": {"cpu": "10m", "memory": "1Mi"}},
            "scheduling": {"nodeSelector": {"sandbox": "kata"},
                "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}})
    }

    fn lookup(name: &str) -> Option<Value> {
        (name == "kata").then(class)
    }

    #[test]
    fn a_missing_class_is_refused_with_the_plugins_words() {
        let mut pod = json!({"spec": {"runtimeClassName": "gone", "containers": []}});
        assert_eq!(
            admit(&mut pod, lookup),
            Err("pod rejected: RuntimeClass \"gone\" not found".to_owned())
        );
    }

    #[test]
    fn the_classs_overhead_and_scheduling_are_merged_into_the_pod() {
        let mut pod = json!({"spec": {"runtimeClassName": "kata", "containers": [],
            "nodeSelector": {"zone": "a"}}});
        admit(&mut pod, lookup).expect("admitted");
        assert_eq!(
            pod["spec"]["overhead"],
            json!({"cpu": "10m", "memory": "1Mi"})
        );
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"zone": "a", "sandbox": "kata"})
        );
        assert_eq!(pod["spec"]["tolerations"][0]["key"], "sandbox");
    }

    #[test]
    fn conflicts_and_foreign_overheads_are_refused() {
        let mut conflict = json!({"spec": {"runtimeClassName": "kata", "containers": [],
            "nodeSelector": {"sandbox": "gvisor"}}});
        assert_eq!(
            admit(&mut conflict, lookup),
            Err("conflict: runtimeClass.scheduling.nodeSelector[sandbox] = kata; pod.spec.nodeSelector[sandbox] = gvisor".to_owned())
        );
        let mut other = json!({"spec": {"runtimeClassName": "kata", "containers": [],
            "overhead": {"cpu": "1"}}});
        assert_eq!(admit(&mut other, lookup), Err(OVERHEAD_MISMATCH.to_owned()));
        let mut classless = json!({"spec": {"containers": [], "overhead": {"cpu": "1"}}});
        assert!(admit(&mut classless, lookup).is_err());
    }
}
