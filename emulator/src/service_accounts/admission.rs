//! kube-apiserver's `ServiceAccount` admission plugin on pod create
//! (`plugin/pkg/admission/serviceaccount/admission.go`, upstream's three token sources): the
//! pod runs as `default` unless it names an account, the account must exist, and unless
//! automount is off the pod gets the `kube-api-access-<suffix>` projected volume, mounted
//! read-only in every container; a mirror pod is never changed and may use no account, secret
//! or token. Pure: the store passes the lookup and the name suffix.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::DEFAULT_SERVICE_ACCOUNT;
use crate::root_ca::ROOT_CA_CONFIG_MAP;

/// Where the token, the CA and the namespace are mounted in every container.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The prefix of the volume's name; the plugin reuses any volume already named so.
pub const VOLUME_PREFIX: &str = "kube-api-access-";

/// `serviceaccount.WarnOnlyBoundTokenExpirationSeconds`: one hour and 7 s, the odd figure that
/// lets the API server recognise (and extend) tokens of this volume.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// `Admit` on a pod being created in `namespace`; `account` looks a ServiceAccount up by name,
/// `suffix` makes the volume name's random part. The error is the Forbidden cause.
pub fn admit(
    pod: &mut Value,
    namespace: &str,
    account: impl FnOnce(&str) -> Option<Arc<Value>>,
    suffix: impl FnOnce() -> String,
) -> Result<(), String> {
    // The kubelet deletes a mirror pod whose spec differs from its static pod's: checked, never
    // changed.
    if pod
        .pointer(&format!(
            "/metadata/annotations/{}",
            pointer_escape(MIRROR_POD_ANNOTATION)
        ))
        .is_some()
    {
        return pod
            .get("spec")
            .and_then(mirror_pod_refusal)
            .map_or(Ok(()), |cause| Err(cause.to_string()));
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let name = match spec.get("serviceAccountName").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => DEFAULT_SERVICE_ACCOUNT.to_string(),
    };
    // The v1 alias, as the internal-to-v1 conversion writes it.
    spec.insert("serviceAccountName".into(), json!(name));
    spec.insert("serviceAccount".into(), json!(name));
    let account = account(&name).ok_or_else(|| {
        format!(
            "error looking up service account {namespace}/{name}: serviceaccount {name:?} not found"
        )
    })?;
    if automounts(&account, spec) {
        mount_token(spec, suffix);
    }
    let pull_secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    let account_secrets = account
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty());
    if let (false, Some(secrets)) = (pull_secrets, account_secrets) {
        let names: Vec<Value> = secrets
            .iter()
            .map(|secret| json!({"name": secret.get("name").cloned().unwrap_or(json!(""))}))
            .collect();
        spec.insert("imagePullSecrets".into(), Value::Array(names));
    }
    Ok(())
}

/// What `Validate` refuses in a mirror pod: an account, a secret, a token projection.
fn mirror_pod_refusal(spec: &Value) -> Option<&'static str> {
    let named =
        |value: Option<&Value>| value.and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    if named(spec.get("serviceAccountName")) {
        return Some("a mirror pod may not reference service accounts");
    }
    if references_a_secret(spec) {
        return Some("a mirror pod may not reference secrets");
    }
    let token_projection = list(spec, "volumes")
        .filter_map(|volume| volume.pointer("/projected/sources"))
        .filter_map(Value::as_array)
        .flatten()
        .any(|source| {
            source
                .get("serviceAccountToken")
                .is_some_and(|t| !t.is_null())
        });
    token_projection.then_some("a mirror pod may not use ServiceAccountToken volume projections")
}

/// `podutil.VisitPodSecretNames` finding a name: pull secrets, every container's env and
/// envFrom, and the volume sources that name a secret.
fn references_a_secret(spec: &Value) -> bool {
    const VOLUME_SECRETS: [&str; 10] = [
        "/azureFile/secretName",
        "/cephfs/secretRef/name",
        "/cinder/secretRef/name",
        "/flexVolume/secretRef/name",
        "/rbd/secretRef/name",
        "/secret/secretName",
        "/scaleIO/secretRef/name",
        "/iscsi/secretRef/name",
        "/storageos/secretRef/name",
        "/csi/nodePublishSecretRef/name",
    ];
    let named =
        |value: Option<&Value>| value.and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    let containers = ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|field| list(spec, field));
    let in_containers = containers.into_iter().any(|container| {
        list(container, "envFrom").any(|from| named(from.pointer("/secretRef/name")))
            || list(container, "env").any(|var| named(var.pointer("/valueFrom/secretKeyRef/name")))
    });
    let in_volumes = list(spec, "volumes").any(|volume| {
        VOLUME_SECRETS
            .iter()
            .any(|pointer| named(volume.pointer(pointer)))
            || volume
                .pointer("/projected/sources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|source| named(source.pointer("/secret/name")))
    });
    list(spec, "imagePullSecrets").any(|secret| named(secret.get("name")))
        || in_containers
        || in_volumes
}

/// The items of the array `object[field]` (none when absent).
fn list<'a>(object: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    object
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `shouldAutomount`: the pod's choice, else the account's, else yes.
fn automounts(account: &Value, spec: &Map<String, Value>) -> bool {
    let choice = |value: Option<&Value>| value.and_then(Value::as_bool);
    choice(spec.get("automountServiceAccountToken"))
        .or_else(|| choice(account.get("automountServiceAccountToken")))
        .unwrap_or(true)
}

/// `mountServiceAccountToken`: a mount in each init container and container that has nothing
/// at the mount path, and the volume when one of them got the mount and none exists.
fn mount_token(spec: &mut Map<String, Value>, suffix: impl FnOnce() -> String) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|volume| volume.get("name").and_then(Value::as_str))
        .find(|name| name.starts_with(VOLUME_PREFIX))
        .map(str::to_string);
    let has_volume = existing.is_some();
    let volume_name = existing.unwrap_or_else(|| format!("{VOLUME_PREFIX}{}", suffix()));
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            let Value::Array(mounts) = mounts else {
                continue;
            };
            if !mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            {
                mounts.push(mount.clone());
                mounted = true;
            }
        }
    }
    if mounted && !has_volume {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if let Value::Array(volumes) = volumes {
            volumes.push(token_volume(&volume_name));
        }
    }
}

/// `TokenVolumeSource()`, as stored (its defaults set explicitly).
fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
            "defaultMode": 420,
        },
    })
}

/// A JSON-pointer reference token (RFC 6901): `~` and `/` escaped.
fn pointer_escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
