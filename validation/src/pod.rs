//! The parts of kube-apiserver's `ValidatePodCreate` whose fields become host paths or reach
//! the runtime, in its words: the namespace and the UID, container and volume names (unique
//! DNS-1123 labels), images, ports, environment names and `fileKeyRef`s, volume mounts (their
//! volume, a unique `mountPath`, a `subPath` or `subPathExpr` that stays below), `hostPath`
//! paths, the restart and DNS policies, the hostname. Over the pod as JSON, as the emulator stores it; shared with
//! nodepulse's static pods, which never go through an API server. Pure.

use serde_json::Value;

use crate::FieldError;
use crate::file_key_ref;
use crate::names::{DNS1123_LABEL_MESSAGE, dns1123_subdomain_problems};

/// The volume sources a volume names at most one of (`validateVolumeSource`).
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// The whole pod as `ValidatePodCreate` sees it after defaulting: its name and UID too.
pub fn validate_pod_create(pod: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = text(pod, "/metadata/name");
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for problem in dns1123_subdomain_problems(name) {
        if !name.is_empty() {
            errors.push(FieldError::invalid("metadata.name", &name.into(), problem));
        }
    }
    if let Some(uid) = pod.pointer("/metadata/uid").and_then(Value::as_str)
        && (uid.contains(['/', '\0']) || uid == "." || uid == "..")
    {
        // The API server makes every UID itself; a static pod's may come from its manifest,
        // and the kubelet names the pod's directory after it.
        errors.push(FieldError::invalid(
            "metadata.uid",
            &uid.into(),
            "must be usable as a single path segment",
        ));
    }
    validate_pod_fields(pod, &mut errors);
    errors
}

/// Everything but the name (the emulator checks every kind's name alike).
pub fn validate_pod_fields(pod: &Value, errors: &mut Vec<FieldError>) {
    if let Some(namespace) = pod.pointer("/metadata/namespace").and_then(Value::as_str)
        && !namespace.is_empty()
    {
        label("metadata.namespace", namespace, errors);
    }
    let volumes = volumes(pod, errors);
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        errors.push(FieldError::required("spec.containers", ""));
    }
    let mut names = Vec::new();
    for list in ["initContainers", "containers"] {
        let all = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for (index, container) in all.into_iter().flatten().enumerate() {
            let path = format!("spec.{list}[{index}]");
            container_fields(&path, container, &volumes, errors);
            let name = text(container, "/name");
            if !name.is_empty() && names.contains(&name) {
                errors.push(FieldError::duplicate(&format!("{path}.name"), name));
            }
            names.push(name);
        }
    }
    let one_of = |field: &str, supported: &[&str], errors: &mut Vec<FieldError>| {
        if let Some(value) = pod
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_str)
            && !supported.contains(&value)
        {
            errors.push(not_supported(&format!("spec.{field}"), value, supported));
        }
    };
    one_of("restartPolicy", &["Always", "OnFailure", "Never"], errors);
    one_of(
        "dnsPolicy",
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        errors,
    );
    for field in ["hostname", "subdomain"] {
        if let Some(value) = pod
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_str)
            && !value.is_empty()
        {
            label(&format!("spec.{field}"), value, errors);
        }
    }
    if let Some(deadline) = pod
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .filter(|seconds| !(1..=i64::from(i32::MAX)).contains(seconds))
    {
        errors.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            &deadline.into(),
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    file_key_ref::volumes(pod, errors);
}

/// The volumes' names (unique labels) and sources (at most one; a `hostPath` with a path).
fn volumes(pod: &Value, errors: &mut Vec<FieldError>) -> Vec<String> {
    let mut names = Vec::new();
    let all = pod.pointer("/spec/volumes").and_then(Value::as_array);
    for (index, volume) in all.into_iter().flatten().enumerate() {
        let path = format!("spec.volumes[{index}]");
        let name = text(volume, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{path}.name"), ""));
        } else {
            label(&format!("{path}.name"), name, errors);
            if names.iter().any(|known| known == name) {
                errors.push(FieldError::duplicate(&format!("{path}.name"), name));
            }
        }
        names.push(name.to_owned());
        let sources: Vec<&&str> = VOLUME_SOURCES
            .iter()
            .filter(|source| volume.get(**source).is_some_and(|v| !v.is_null()))
            .collect();
        // None is an emptyDir: the API server's defaulting (and the kubelet's decoding) makes it one.
        if let [_, second, ..] = sources.as_slice() {
            errors.push(FieldError::forbidden(
                &format!("{path}.{second}"),
                "may not specify more than 1 volume type",
            ));
        }
        if let Some(host_path) = volume.get("hostPath").filter(|v| v.is_object())
            && text(host_path, "/path").is_empty()
        {
            errors.push(FieldError::required(&format!("{path}.hostPath.path"), ""));
        }
    }
    names
}

/// One container's name, image, ports, environment names and volume mounts.
fn container_fields(
    path: &str,
    container: &Value,
    volumes: &[String],
    errors: &mut Vec<FieldError>,
) {
    let name = text(container, "/name");
    if name.is_empty() {
        errors.push(FieldError::required(&format!("{path}.name"), ""));
    } else {
        label(&format!("{path}.name"), name, errors);
    }
    let image = text(container, "/image");
    if image.is_empty() {
        errors.push(FieldError::required(&format!("{path}.image"), ""));
    } else if image.trim() != image {
        errors.push(FieldError::invalid(
            &format!("{path}.image"),
            &image.into(),
            "must not have leading or trailing whitespace",
        ));
    }
    let ports = container.get("ports").and_then(Value::as_array);
    for (index, port) in ports.into_iter().flatten().enumerate() {
        let at = format!("{path}.ports[{index}]");
        let number = |field: &str| port.get(field).and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&number("containerPort")) {
            errors.push(port_range(
                &format!("{at}.containerPort"),
                number("containerPort"),
            ));
        }
        if number("hostPort") != 0 && !(1..=65535).contains(&number("hostPort")) {
            errors.push(port_range(&format!("{at}.hostPort"), number("hostPort")));
        }
        let protocol = text(port, "/protocol");
        if !protocol.is_empty() && !["SCTP", "TCP", "UDP"].contains(&protocol) {
            let supported = ["SCTP", "TCP", "UDP"];
            errors.push(not_supported(
                &format!("{at}.protocol"),
                protocol,
                &supported,
            ));
        }
    }
    let env = container.get("env").and_then(Value::as_array);
    for (index, variable) in env.into_iter().flatten().enumerate() {
        let at = format!("{path}.env[{index}].name");
        let name = text(variable, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&at, ""));
        } else if !file_key_ref::is_relaxed_env_name(name) {
            errors.push(FieldError::invalid(
                &at,
                &name.into(),
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            ));
        }
        file_key_ref::selector(&format!("{path}.env[{index}]"), variable, errors);
    }
    mounts(path, container, volumes, errors);
}

/// `ValidateVolumeMounts`: a known volume, an absolute `mountPath` used once, a `subPath`
/// (or `subPathExpr`) that is relative and never climbs out with `..`.
fn mounts(path: &str, container: &Value, volumes: &[String], errors: &mut Vec<FieldError>) {
    let mut mount_paths = Vec::new();
    let mounts = container.get("volumeMounts").and_then(Value::as_array);
    for (index, mount) in mounts.into_iter().flatten().enumerate() {
        let at = format!("{path}.volumeMounts[{index}]");
        let name = text(mount, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{at}.name"), ""));
        } else if !volumes.iter().any(|volume| volume == name) {
            errors.push(FieldError::not_found(&format!("{at}.name"), name));
        }
        let mount_path = text(mount, "/mountPath");
        if mount_path.is_empty() {
            errors.push(FieldError::required(&format!("{at}.mountPath"), ""));
        } else if mount_paths.contains(&mount_path) {
            errors.push(FieldError::invalid(
                &format!("{at}.mountPath"),
                &mount_path.into(),
                "must be unique",
            ));
        }
        mount_paths.push(mount_path);
        sub_paths(mount, &format!("{path}.volumeMounts"), index, errors);
    }
}

/// The `subPath` and `subPathExpr` rules of `ValidateVolumeMounts`: each relative and without a
/// `..` element, never both on one mount. The apiserver names these fields
/// `volumeMounts.subPath`, without the mount's index, except for the exclusion; so do we.
/// The node expands `subPathExpr` and checks the result again.
fn sub_paths(mount: &Value, field: &str, index: usize, errors: &mut Vec<FieldError>) {
    let (sub_path, expr) = (text(mount, "/subPath"), text(mount, "/subPathExpr"));
    if !sub_path.is_empty() {
        local_descending(sub_path, &format!("{field}.subPath"), errors);
    }
    if !expr.is_empty() {
        if !sub_path.is_empty() {
            errors.push(FieldError::invalid(
                &format!("{field}[{index}].subPathExpr"),
                &expr.into(),
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        local_descending(expr, &format!("{field}.subPathExpr"), errors);
    }
}

/// `validateLocalDescendingPath`: both of its errors, as it reports them.
fn local_descending(path: &str, field: &str, errors: &mut Vec<FieldError>) {
    if path.starts_with('/') {
        errors.push(FieldError::invalid(
            field,
            &path.into(),
            "must be a relative path",
        ));
    }
    if path.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(
            field,
            &path.into(),
            "must not contain '..'",
        ));
    }
}

/// `validateDNS1123Label`: length first, then form.
pub(crate) fn label(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    if value.len() > 63 {
        errors.push(FieldError::invalid(
            field,
            &value.into(),
            "must be no more than 63 characters",
        ));
    }
    let bytes = value.as_bytes();
    let form = !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if !form {
        errors.push(FieldError::invalid(
            field,
            &value.into(),
            DNS1123_LABEL_MESSAGE,
        ));
    }
}

fn port_range(field: &str, port: i64) -> FieldError {
    FieldError::invalid(
        field,
        &port.into(),
        "must be between 1 and 65535, inclusive",
    )
}

/// `field.NotSupported`: `Unsupported value: "x": supported values: "a", "b"`.
fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
    let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    FieldError {
        reason: "FieldValueNotSupported",
        field: field.to_owned(),
        message: format!(
            "Unsupported value: {value:?}: supported values: {}",
            quoted.join(", ")
        ),
    }
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
