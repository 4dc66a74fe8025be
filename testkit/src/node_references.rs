//! The Secrets and ConfigMaps a pod or a PersistentVolume names, as kube's
//! `podutil.VisitPodSecretNames`, `VisitPodConfigmapNames` and `VisitPVSecretNames` find them
//! for the Node authorizer's graph. In-tree volume plugins' secret references (cephfs, rbd,
//! iscsi…) are left out: nodepulse mounts none of them, so the model refuses their Secrets.

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVarSource, PersistentVolume, Pod, PodSpec, SecretReference,
    VolumeProjection,
};

/// Every Secret name `pod` refers to: pull secrets, secret and projected volumes, CSI
/// volumes' `nodePublishSecretRef`, and containers' environment (init and ephemeral included).
pub fn pod_secret_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let mut names: Vec<String> = spec
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|reference| reference.name.clone())
        .collect();
    for volume in spec.volumes.iter().flatten() {
        names.extend(volume.secret.as_ref().and_then(|s| s.secret_name.clone()));
        names.extend(
            volume
                .csi
                .as_ref()
                .and_then(|csi| csi.node_publish_secret_ref.as_ref())
                .map(|reference| reference.name.clone()),
        );
    }
    names.extend(projected(spec, |source| {
        Some(source.secret.as_ref()?.name.clone())
    }));
    names.extend(environment(
        spec,
        |from| Some(from.secret_key_ref.as_ref()?.name.clone()),
        |from| Some(from.secret_ref.as_ref()?.name.clone()),
    ));
    names
}

/// Every ConfigMap name `pod` refers to: configMap and projected volumes, and environment.
pub fn pod_config_map_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let volumes = spec.volumes.iter().flatten();
    let mut names: Vec<String> = volumes
        .filter_map(|volume| Some(volume.config_map.as_ref()?.name.clone()))
        .collect();
    names.extend(projected(spec, |source| {
        Some(source.config_map.as_ref()?.name.clone())
    }));
    names.extend(environment(
        spec,
        |from| Some(from.config_map_key_ref.as_ref()?.name.clone()),
        |from| Some(from.config_map_ref.as_ref()?.name.clone()),
    ));
    names
}

/// The (namespace, name) of every Secret a CSI PersistentVolume names.
pub fn volume_secret_names(volume: &PersistentVolume) -> Vec<(String, String)> {
    let Some(csi) = volume.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
        return Vec::new();
    };
    [
        &csi.controller_publish_secret_ref,
        &csi.node_stage_secret_ref,
        &csi.node_publish_secret_ref,
        &csi.controller_expand_secret_ref,
        &csi.node_expand_secret_ref,
    ]
    .into_iter()
    .flatten()
    .map(|SecretReference { name, namespace }| {
        (
            namespace.clone().unwrap_or_default(),
            name.clone().unwrap_or_default(),
        )
    })
    .collect()
}

/// What `name_of` finds in the sources of every projected volume.
fn projected(spec: &PodSpec, name_of: impl Fn(&VolumeProjection) -> Option<String>) -> Vec<String> {
    let volumes = spec.volumes.iter().flatten();
    let sources = volumes.flat_map(|volume| {
        volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
    });
    sources.filter_map(name_of).collect()
}

/// What `variable` and `from` find in every container's `env` and `envFrom`, init and
/// ephemeral containers included.
fn environment(
    spec: &PodSpec,
    variable: impl Fn(&EnvVarSource) -> Option<String>,
    from: impl Fn(&EnvFromSource) -> Option<String>,
) -> Vec<String> {
    let of = |c: &Container| (c.env.clone(), c.env_from.clone());
    let mut all: Vec<_> = spec.containers.iter().map(of).collect();
    all.extend(spec.init_containers.iter().flatten().map(of));
    all.extend(
        spec.ephemeral_containers
            .iter()
            .flatten()
            .map(|c| (c.env.clone(), c.env_from.clone())),
    );
    let mut names = Vec::new();
    for (env, env_from) in all {
        names.extend(
            env.iter()
                .flatten()
                .filter_map(|var| variable(var.value_from.as_ref()?)),
        );
        names.extend(env_from.iter().flatten().filter_map(&from));
    }
    names
}
