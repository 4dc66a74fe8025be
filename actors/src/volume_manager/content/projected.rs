//! The projected plugin (§1.11): secret, configMap, downwardAPI and serviceAccountToken sources
//! collected into one payload, later sources overwriting the same paths, errors aggregated.
//! Token files are 0600 (owned by `runAsUser`) when the pod has `runAsUser` or `fsGroup`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ProjectedVolumeSource};

use super::{
    ContentError, DEFAULT_MODE, FileProjection, NodeAllocatable, Payload,
    downward::project_items,
    key_to_path::{KeyedKind, project_keys},
    mode_bits,
    sources::{Fetched, SourceObject, object_or_error, sources_of},
};

/// Mode of token files of pods with an fsUser or fsGroup.
const TOKEN_MODE_WITH_OWNER: u32 = 0o600;

pub fn project(
    pod: &Pod,
    source: &ProjectedVolumeSource,
    fetched: &BTreeMap<SourceObject, Fetched>,
    allocatable: &NodeAllocatable,
    payload: &mut Payload,
) -> Result<(), ContentError> {
    let default_mode = mode_bits(source.default_mode, DEFAULT_MODE);
    let security = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let fs_user = security
        .and_then(|s| s.run_as_user)
        .and_then(|u| u32::try_from(u).ok());
    let has_owner = fs_user.is_some() || security.and_then(|s| s.fs_group).is_some();
    let mut errors = Vec::new();
    for projection in source.sources.iter().flatten() {
        if let Some(cm) = &projection.config_map {
            let result = object_or_error(pod, fetched, "configmap", &cm.name, cm.optional)
                .and_then(|object| {
                    project_keys(
                        KeyedKind::ConfigMap,
                        &object,
                        cm.items.as_deref(),
                        default_mode,
                        cm.optional.unwrap_or(false),
                        payload,
                    )
                });
            errors.extend(result.err());
        } else if let Some(secret) = &projection.secret {
            let result = object_or_error(pod, fetched, "secret", &secret.name, secret.optional)
                .and_then(|object| {
                    project_keys(
                        KeyedKind::Secret,
                        &object,
                        secret.items.as_deref(),
                        default_mode,
                        secret.optional.unwrap_or(false),
                        payload,
                    )
                });
            errors.extend(result.err());
        } else if let Some(downward) = &projection.downward_api {
            let items = downward.items.as_deref().unwrap_or_default();
            errors.extend(project_items(
                pod,
                items,
                default_mode,
                allocatable,
                payload,
            ));
        } else if let Some(token) = &projection.service_account_token {
            let wanted = single_token_source(pod, projection);
            match wanted.and_then(|key| fetched.get(&key)) {
                Some(Fetched::Token(text)) => {
                    payload.insert(
                        token.path.clone(),
                        FileProjection {
                            data: text.clone().into_bytes(),
                            mode: if has_owner {
                                TOKEN_MODE_WITH_OWNER
                            } else {
                                default_mode
                            },
                            fs_user: fs_user.filter(|_| has_owner),
                        },
                    );
                }
                Some(Fetched::Failed(text)) => {
                    errors.push(ContentError::Api(format!("failed to fetch token: {text}")));
                }
                _ => errors.push(ContentError::Api(
                    "failed to fetch token: no token was requested".to_owned(),
                )),
            }
        }
    }
    match errors.len() {
        0 => Ok(()),
        _ => Err(ContentError::Aggregate(errors)),
    }
}

/// The token source one projection stands for.
fn single_token_source(
    pod: &Pod,
    projection: &k8s_openapi::api::core::v1::VolumeProjection,
) -> Option<SourceObject> {
    let volume = k8s_openapi::api::core::v1::Volume {
        name: String::new(),
        projected: Some(ProjectedVolumeSource {
            default_mode: None,
            sources: Some(vec![projection.clone()]),
        }),
        ..Default::default()
    };
    sources_of(pod, &volume).into_iter().next()
}
