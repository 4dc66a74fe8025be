//! A manifest turned into the pods the kubelet would run (`kl/config/common.go`
//! `tryDecodeSinglePod`, `tryDecodePodList` and `applyDefaults`): a file's exactly one v1 Pod,
//! a URL's one Pod or v1 PodList (YAML or JSON, at most 10 MiB), the API server's defaults it
//! never went through, then the kubelet's: a UID hashed from the content and the source (the
//! node and the file, or the URL), the name `<name>-<node>`, the `config.*` annotations, the
//! node name, and for a file the NoExecute toleration. Pure; a manifest that may not run says
//! why in the kubelet's words.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::config_source::{
    FILE_SOURCE, HASH_ANNOTATION, HTTP_SOURCE, SOURCE_ANNOTATION,
};
use serde_json::{Map, Value, json};

use crate::config::{ExcessiveAliasing, check_aliasing};

/// `maxConfigLength`: a larger manifest is refused.
pub const MAX_MANIFEST_BYTES: usize = 10 << 20;
/// How much of an unparsable body an error quotes (the kubelet quotes all of it).
const QUOTED_BODY: usize = 512;

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
    /// A URL's body that is neither a Pod nor a PodList.
    #[error(
        "{url}: received '{body}', but couldn't parse as single ({single}) or multiple pods ({multiple})"
    )]
    NeitherPodNorList {
        url: String,
        body: String,
        single: String,
        multiple: String,
    },
}

/// Where a manifest came from: its pods' source, UID and toleration follow from it.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    File(&'a Path),
    Url(&'a str),
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
    let object = document(data).map_err(|error| parse(error.to_string()))?;
    match kind(&object) {
        Ok("Pod") => {}
        Ok(other) => return Err(parse(format!("not a v1 Pod: {other} of v1"))),
        Err(error) => return Err(parse(error.to_string())),
    }
    one_pod(object, Origin::File(path), node).map_err(|error| match error {
        PodError::Decode(reason) => parse(reason),
        PodError::Refused(error) => error,
    })
}

/// The pods a `staticPodURL` body describes (a Pod, or a PodList whose every item must be
/// valid, as `tryDecodeSinglePod` then `tryDecodePodList`), as they run on `node`.
pub fn url_pods(data: &[u8], url: &str, node: &str) -> Result<Vec<Pod>, ManifestError> {
    let neither = |single: String, multiple: String| {
        let text = String::from_utf8_lossy(data);
        let mut body: String = text.chars().take(QUOTED_BODY).collect();
        if body.len() < text.len() {
            body.push('…');
        }
        ManifestError::NeitherPodNorList {
            url: url.to_owned(),
            body,
            single,
            multiple,
        }
    };
    if data.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            path: url.to_owned(),
        });
    }
    let object = document(data).map_err(|error| neither(error.to_string(), error.to_string()))?;
    let origin = Origin::Url(url);
    match kind(&object) {
        Ok("Pod") => match one_pod(object, origin, node) {
            Ok(pod) => Ok(vec![pod]),
            Err(PodError::Refused(error)) => Err(error),
            Err(PodError::Decode(reason)) => {
                Err(neither(reason, "not a PodList: kind Pod".to_owned()))
            }
        },
        Ok("PodList") => {
            let items = match object.get("items") {
                Some(Value::Array(items)) => items.clone(),
                None | Some(Value::Null) => Vec::new(),
                Some(_) => {
                    return Err(neither(
                        "not a Pod: kind PodList".to_owned(),
                        "items: not a list".to_owned(),
                    ));
                }
            };
            let mut pods = Vec::with_capacity(items.len());
            for item in items {
                let Value::Object(mut item) = item else {
                    return Err(neither(
                        "not a Pod: kind PodList".to_owned(),
                        "an item is not an object".to_owned(),
                    ));
                };
                // A list's items need not say what they are.
                item.entry("apiVersion").or_insert(json!("v1"));
                item.entry("kind").or_insert(json!("Pod"));
                match one_pod(item, origin, node) {
                    Ok(pod) => pods.push(pod),
                    Err(PodError::Refused(error)) => return Err(error),
                    Err(PodError::Decode(reason)) => {
                        return Err(neither("not a Pod: kind PodList".to_owned(), reason));
                    }
                }
            }
            Ok(pods)
        }
        Ok(other) => Err(neither(
            format!("not a v1 Pod: {other}"),
            format!("not a v1 PodList: {other}"),
        )),
        Err(error) => Err(neither(error.to_string(), error.to_string())),
    }
}

/// Why a manifest's text is no `v1` object; the reason a [`ManifestError`] quotes.
#[derive(Debug, thiserror::Error)]
enum DocumentError {
    #[error(transparent)]
    Aliasing(#[from] ExcessiveAliasing),
    #[error(transparent)]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error("not an object")]
    NotAnObject,
    #[error("Object 'Kind' is missing")]
    NoKind,
    #[error("not a v1 Pod: {kind} of {}", .version.as_deref().unwrap_or("no apiVersion"))]
    NotV1 {
        kind: String,
        version: Option<String>,
    },
}

/// One YAML (or JSON) document as an object. More than one document is refused, as the
/// kubelet reads only one, and so is one whose aliases expand it past what its length allows.
fn document(data: &[u8]) -> Result<Map<String, Value>, DocumentError> {
    check_aliasing(data)?;
    match serde_yaml_ng::from_slice(data)? {
        Value::Object(object) => Ok(object),
        _ => Err(DocumentError::NotAnObject),
    }
}

/// The object's kind, when it is of `v1`.
fn kind(object: &Map<String, Value>) -> Result<&str, DocumentError> {
    match (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    ) {
        (Some("v1"), Some(kind)) => Ok(kind),
        (_, None) => Err(DocumentError::NoKind),
        (version, Some(kind)) => Err(DocumentError::NotV1 {
            kind: kind.to_owned(),
            version: version.map(str::to_owned),
        }),
    }
}

/// Why one pod object gives no pod: it does not decode, or the kubelet refuses it.
enum PodError {
    Decode(String),
    Refused(ManifestError),
}

/// One v1 Pod object, defaulted, checked and given its identity.
fn one_pod(
    mut object: Map<String, Value>,
    origin: Origin<'_>,
    node: &str,
) -> Result<Pod, PodError> {
    object.remove("status");
    api_server_defaults(&mut object);
    let mut pod: Pod = serde_json::from_value(Value::Object(object))
        .map_err(|error| PodError::Decode(error.to_string()))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(PodError::Refused(ManifestError::NoName));
    }
    apply_kubelet_defaults(&mut pod, origin, node);
    validate(&pod).map_err(PodError::Refused)?;
    if let Some(resource) = api_reference(&pod) {
        return Err(PodError::Refused(ManifestError::ApiReference(resource)));
    }
    Ok(pod)
}

/// `applyDefaults`: the identity and placement the kubelet gives a static pod.
fn apply_kubelet_defaults(pod: &mut Pod, origin: Origin<'_>, node: &str) {
    let uid = match pod.metadata.uid.clone().filter(|uid| !uid.is_empty()) {
        Some(uid) => uid,
        None => content_uid(pod, origin, node),
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
    let source = match origin {
        Origin::File(_) => FILE_SOURCE,
        Origin::Url(_) => HTTP_SOURCE,
    };
    annotations.insert(SOURCE_ANNOTATION.to_owned(), source.to_owned());
    let spec = pod.spec.get_or_insert_default();
    spec.node_name = Some(node.to_owned());
    if matches!(origin, Origin::File(_)) {
        tolerate_no_execute(spec);
    }
    pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Pending".to_owned()),
        ..Default::default()
    });
}

/// So no node problem's NoExecute taint evicts a file's pod (`AddOrUpdateTolerationInPod`;
/// the kubelet adds it for the file source only).
fn tolerate_no_execute(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
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
}

/// The UID of a manifest without one: FNV-128a over the decoded pod, then `host:<node>` and
/// `file:<path>` (a URL's: `url:<url>`, no node), in lowercase hex, as the kubelet. The
/// kubelet hashes a Go dump of its internal struct, which nothing outside Go reproduces; this
/// hashes the pod's JSON, which changes exactly when the manifest's content does (all kubeadm
/// relies on).
fn content_uid(pod: &Pod, origin: Origin<'_>, node: &str) -> String {
    let mut hash = Fnv128a::default();
    hash.write(&serde_json::to_vec(pod).unwrap_or_default());
    match origin {
        Origin::File(path) => {
            hash.write(format!("host:{node}").as_bytes());
            hash.write(format!("file:{}", path.display()).as_bytes());
        }
        Origin::Url(url) => hash.write(format!("url:{url}").as_bytes()),
    }
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

/// `ValidatePodCreate` on the defaulted pod, as the kubelet's `tryDecodeSinglePod` runs it
/// (the emulator's rules for what reaches the host and the runtime), listed as Go prints a
/// `field.ErrorList`.
fn validate(pod: &Pod) -> Result<(), ManifestError> {
    let object =
        serde_json::to_value(pod).map_err(|error| ManifestError::Invalid(error.to_string()))?;
    let errors = nodepulse_validation::pod::validate_pod_create(&object);
    if errors.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = errors
        .iter()
        .map(nodepulse_validation::FieldError::render)
        .collect();
    Err(ManifestError::Invalid(format!("[{}]", listed.join(", "))))
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
