//! `env[].valueFrom.fileKeyRef` (the EnvFiles feature) as kube-apiserver validates it:
//! `validateFileKeySelector` (a key that is an environment variable name, a volume name that is
//! a DNS-1123 label, a path without `..`) and `validateFileKeyRefVolumes` (the volume exists in
//! the pod and is an emptyDir), over every container, ephemeral ones included.

use serde_json::Value;

use crate::FieldError;

const ENV_NAME_MESSAGE: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";

/// The selector's own fields; `at` is the variable's path (`spec.containers[0].env[1]`).
pub(crate) fn selector(at: &str, variable: &Value, errors: &mut Vec<FieldError>) {
    let Some(selector) = variable.pointer("/valueFrom/fileKeyRef") else {
        return;
    };
    let at = format!("{at}.valueFrom.fileKeyRef");
    let text = |field: &str| selector.get(field).and_then(Value::as_str).unwrap_or("");
    let key = text("key");
    if key.is_empty() {
        errors.push(FieldError::required(&format!("{at}.key"), ""));
    } else if !is_relaxed_env_name(key) {
        errors.push(FieldError::invalid(
            &format!("{at}.key"),
            &key.into(),
            ENV_NAME_MESSAGE,
        ));
    }
    let volume = text("volumeName");
    if volume.is_empty() {
        errors.push(FieldError::required(&format!("{at}.volumeName"), ""));
    } else {
        crate::pod::label(&format!("{at}.volumeName"), volume, errors);
    }
    let path = text("path");
    if path.is_empty() {
        errors.push(FieldError::required(&format!("{at}.path"), ""));
    } else if path.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(
            &format!("{at}.path"),
            &path.into(),
            "must not contain '..'",
        ));
    }
}

/// `validateFileKeyRefVolumes`: each referenced volume is one of the pod's, and an emptyDir
/// (a volume naming no source is one, as the API server defaults it).
pub(crate) fn volumes(pod: &Value, errors: &mut Vec<FieldError>) {
    let volumes: Vec<&Value> = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .map(|all| all.iter().collect())
        .unwrap_or_default();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let containers = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for (index, container) in containers.into_iter().flatten().enumerate() {
            let env = container.get("env").and_then(Value::as_array);
            for (number, variable) in env.into_iter().flatten().enumerate() {
                let Some(name) = variable
                    .pointer("/valueFrom/fileKeyRef/volumeName")
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let at =
                    format!("spec.{list}[{index}].env[{number}].valueFrom.fileKeyRef.volumeName");
                match volumes.iter().find(|volume| volume["name"] == name) {
                    None => errors.push(FieldError::not_found(&at, name)),
                    Some(volume) if !is_empty_dir(volume) => errors.push(FieldError::invalid(
                        &at,
                        &name.into(),
                        "referenced volume must be of type emptyDir",
                    )),
                    Some(_) => {}
                }
            }
        }
    }
}

fn is_empty_dir(volume: &Value) -> bool {
    let sources = volume
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, value)| *field != "name" && !value.is_null())
        .count();
    volume.get("emptyDir").is_some_and(|v| !v.is_null()) || sources == 0
}

/// `validation.IsRelaxedEnvVarName`: printable ASCII but `=`.
pub(crate) fn is_relaxed_env_name(name: &str) -> bool {
    name.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
}
