//! One manifest file turned into the pod the kubelet would run (`kl/config/common.go`
//! `tryDecodeSinglePod` and `applyDefaults`): exactly one v1 Pod (YAML or JSON, at most
//! 10 MiB), the API server's defaults it never went through, then the kubelet's: a UID hashed
//! from the content, the node and the file, the name `<name>-<node>`, the `config.*`
//! annotations, the node name, the NoExecute toleration. Pure but for the clock the caller
//! passes; a manifest that may not run says why in the kubelet's words.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::config_source::{FILE_SOURCE, HASH_ANNOTATION, SOURCE_ANNOTATION};
use serde_json::{Map, Value, json};

/// `maxConfigLength`: a larger manifest is refused.
pub const MAX_MANIFEST_BYTES: usize = 10 << 20;

/// Why a manifest gives no pod. Retrying does not help until the file changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: couldn't parse as pod({reason}), please check config file")]
    Parse { path: String, reason: String },
    #[error("{path}: the manifest is larger than {MAX_MANIFEST_BYTES} bytes")]
    TooLarge { path: String },
    #[error("invalid pod: name is needed for the pod")]
    NoName,
    #[error("invalid pod: {0}")]
    Invalid(String),
    #[error("static pods may not reference {0}")]
    ApiReference(&'static str),
}

/// The pod `data` (the file at `path`) describes, as it runs on `node`.
pub fn static_pod(data: &[u8], path: &Path, node: &str) -> Result<Pod, ManifestError> {
    let path_text = path.display().to_string();
    let parse = |reason: String| ManifestError::Parse {
        path: path_text.clone(),
        reason,
    };
    if data.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge { path: path_text });
    }
    // JSON is YAML; more than one document is refused, as one pod per file is all there is.
    let value: Value = serde_yaml_ng::from_slice(data).map_err(|error| parse(error.to_string()))?;
    let Value::Object(mut object) = value else {
        return Err(parse("not an object".to_owned()));
    };
    match (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    ) {
        (Some("v1"), Some("Pod")) => {}
        (_, None) => return Err(parse("Object 'Kind' is missing".to_owned())),
        (version, Some(kind)) => {
            return Err(parse(format!(
                "not a v1 Pod: {kind} of {}",
                version.unwrap_or("no apiVersion")
            )));
        }
    }
    object.remove("status");
    api_server_defaults(&mut object);
    let mut pod: Pod =
        serde_json::from_value(Value::Object(object)).map_err(|error| parse(error.to_string()))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(ManifestError::NoName);
    }
    validate(&pod)?;
    if let Some(resource) = api_reference(&pod) {
        return Err(ManifestError::ApiReference(resource));
    }
    apply_kubelet_defaults(&mut pod, &path_text, node);
    Ok(pod)
}

/// `applyDefaults`: the identity and placement the kubelet gives a file's pod.
fn apply_kubelet_defaults(pod: &mut Pod, path: &str, node: &str) {
    let uid = match pod.metadata.uid.clone().filter(|uid| !uid.is_empty()) {
        Some(uid) => uid,
        None => content_uid(pod, path, node),
    };
    let meta = &mut pod.metadata;
    meta.uid = Some(uid.clone());
    meta.name = Some(format!(
        "{}-{}",
        meta.name.as_deref().unwrap_or_default(),
        node.to_lowercase()
    ));
    if meta.namespace.as_deref().is_none_or(str::is_empty) {
        meta.namespace = Some("default".to_owned());
    }
    let annotations = meta.annotations.get_or_insert_default();
    annotations.insert(HASH_ANNOTATION.to_owned(), uid);
    annotations.insert(SOURCE_ANNOTATION.to_owned(), FILE_SOURCE.to_owned());
    let spec = pod.spec.get_or_insert_default();
    spec.node_name = Some(node.to_owned());
    // So no node problem's NoExecute taint evicts it (`AddOrUpdateTolerationInPod`).
    let tolerations = spec.tolerations.get_or_insert_default();
    let everything = |t: &k8s_openapi::api::core::v1::Toleration| {
        t.key.as_deref().unwrap_or_default().is_empty() && t.effect.as_deref() == Some("NoExecute")
    };
    tolerations.retain(|t| !everything(t));
    tolerations.push(k8s_openapi::api::core::v1::Toleration {
        operator: Some("Exists".to_owned()),
        effect: Some("NoExecute".to_owned()),
        ..Default::default()
    });
    pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Pending".to_owned()),
        ..Default::default()
    });
}

/// The UID of a manifest without one: FNV-128a over the decoded pod, then `host:<node>` and
/// `file:<path>`, in lowercase hex, as the kubelet. The kubelet hashes a Go dump of its
/// internal struct, which nothing outside Go reproduces; this hashes the pod's JSON, which
/// changes exactly when the manifest's content does (all kubeadm relies on).
fn content_uid(pod: &Pod, path: &str, node: &str) -> String {
    let mut hash = Fnv128a::default();
    hash.write(&serde_json::to_vec(pod).unwrap_or_default());
    hash.write(format!("host:{node}").as_bytes());
    hash.write(format!("file:{path}").as_bytes());
    format!("{:032x}", hash.0)
}

/// FNV-1a, 128 bits (Go's `hash/fnv` `New128a`).
struct Fnv128a(u128);

impl Default for Fnv128a {
    fn default() -> Self {
        Self(0x6c62_272e_07bb_0142_62b8_2175_6295_c58d)
    }
}

impl Fnv128a {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u128::from(*byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
}

/// What the API server's `SetDefaults_Pod`/`_PodSpec`/`_Container` would have set, for the
/// fields the pod's run reads; a field the manifest sets is kept.
fn api_server_defaults(pod: &mut Map<String, Value>) {
    let Some(Value::Object(spec)) = pod.get_mut("spec") else {
        return;
    };
    for (field, default) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
    ] {
        spec.entry(field).or_insert(default);
    }
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = container.get("image").and_then(Value::as_str).unwrap_or("");
            let latest = image_is_latest(image);
            container
                .entry("imagePullPolicy")
                .or_insert_with(|| json!(if latest { "Always" } else { "IfNotPresent" }));
            container
                .entry("terminationMessagePath")
                .or_insert_with(|| json!("/dev/termination-log"));
            container
                .entry("terminationMessagePolicy")
                .or_insert_with(|| json!("File"));
            if let Some(Value::Array(ports)) = container.get_mut("ports") {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    port.entry("protocol").or_insert(json!("TCP"));
                }
            }
        }
    }
}

/// An image with no tag or the `latest` tag (and no digest) is pulled `Always`.
fn image_is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').is_none_or(|(_, tag)| tag == "latest")
}

/// The parts of `ValidatePodCreate` a run depends on: containers, each named, with an image.
fn validate(pod: &Pod) -> Result<(), ManifestError> {
    let containers = pod.spec.as_ref().map(|spec| spec.containers.as_slice());
    let Some(containers) = containers.filter(|containers| !containers.is_empty()) else {
        return Err(ManifestError::Invalid(
            "spec.containers: Required value".to_owned(),
        ));
    };
    for (index, container) in containers.iter().enumerate() {
        if container.name.is_empty() {
            return Err(ManifestError::Invalid(format!(
                "spec.containers[{index}].name: Required value"
            )));
        }
        if container.image.as_deref().is_none_or(str::is_empty) {
            return Err(ManifestError::Invalid(format!(
                "spec.containers[{index}].image: Required value"
            )));
        }
    }
    Ok(())
}

/// `HasAPIObjectReference` (the `PreventStaticPodAPIReferences` gate, on by default): the first
/// API object the pod would need, in the kubelet's order and words.
fn api_reference(pod: &Pod) -> Option<&'static str> {
    let spec = pod.spec.as_ref()?;
    if spec
        .service_account_name
        .as_deref()
        .is_some_and(|name| !name.is_empty())
    {
        return Some("serviceaccounts");
    }
    let containers = || {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
    };
    let env = || containers().flat_map(|c| c.env.iter().flatten());
    let env_from = || containers().flat_map(|c| c.env_from.iter().flatten());
    let secrets = spec
        .image_pull_secrets
        .as_ref()
        .is_some_and(|s| !s.is_empty())
        || env().any(|var| {
            var.value_from
                .as_ref()
                .is_some_and(|from| from.secret_key_ref.is_some())
        })
        || env_from().any(|from| from.secret_ref.is_some());
    if secrets {
        return Some("secrets");
    }
    let config_maps = env().any(|var| {
        var.value_from
            .as_ref()
            .is_some_and(|from| from.config_map_key_ref.is_some())
    }) || env_from().any(|from| from.config_map_ref.is_some());
    if config_maps {
        return Some("configmaps");
    }
    if spec
        .resource_claims
        .as_ref()
        .is_some_and(|claims| !claims.is_empty())
    {
        return Some("resourceclaims");
    }
    for volume in spec.volumes.iter().flatten() {
        let found = if volume.config_map.is_some() {
            Some("configmaps (via configmap volumes)")
        } else if volume.secret.is_some() {
            Some("secrets (via secret volumes)")
        } else if volume.csi.is_some() {
            Some("csidrivers (via CSI volumes)")
        } else if volume.glusterfs.is_some() {
            Some("endpoints (via glusterFS volumes)")
        } else if volume.persistent_volume_claim.is_some() {
            Some("persistentvolumeclaims")
        } else if volume.ephemeral.is_some() {
            Some("persistentvolumeclaims (via ephemeral volumes)")
        } else if volume.azure_file.is_some() {
            Some("secrets (via azureFile volumes)")
        } else {
            volume.projected.as_ref().and_then(|projected| {
                projected.sources.iter().flatten().find_map(|source| {
                    if source.config_map.is_some() {
                        Some("configmaps (via projected volumes)")
                    } else if source.secret.is_some() {
                        Some("secrets (via projected volumes)")
                    } else if source.service_account_token.is_some() {
                        Some("serviceaccounts (via projected volumes)")
                    } else if source.cluster_trust_bundle.is_some() {
                        Some("clustertrustbundles")
                    } else if source.pod_certificate.is_some() {
                        Some("podcertificates")
                    } else {
                        None
                    }
                })
            })
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
