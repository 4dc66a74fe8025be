//! The storage objects the volume manager reads to turn a pod's claim into a CSI volume: the
//! claim, its PV, the driver's CSIDriver (whether it needs attaching) and the VolumeAttachment's
//! publish context. [`resolve_claim`] composes them with the pure rules of
//! `volume_manager::claim`, so the actor makes one call per claim volume.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::CSIDriver,
};

use crate::ports::{ApiError, ApiResult, CsiVolume};
use crate::volume_manager::{
    ClaimError, ClaimReason, ClaimRef, UniqueVolumeName, attach_required, bound_volume_name,
    csi_unique_name, csi_volume,
};

pub trait StorageApi: Send + Sync + 'static {
    fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, ApiResult<PersistentVolumeClaim>>;
    fn get_volume(&self, name: &str) -> BoxFuture<'static, ApiResult<PersistentVolume>>;
    /// The CSIDriver object, `None` when the driver has none.
    fn get_csi_driver(&self, name: &str) -> BoxFuture<'static, ApiResult<Option<CSIDriver>>>;
    /// `status.attachmentMetadata` of the volume's VolumeAttachment on `node` (empty when it
    /// has none or there is no attachment).
    fn attachment_metadata(
        &self,
        driver: &str,
        volume_handle: &str,
        node: &str,
    ) -> BoxFuture<'static, ApiResult<BTreeMap<String, String>>>;
}

/// A pod's claim volume, ready for the desired state and the CSI mounter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedClaim {
    /// Shared with every desired `PodVolume` built from it and their mounts.
    pub volume: Arc<CsiVolume>,
    pub unique_name: UniqueVolumeName,
    /// Whether the attach/detach controller must list it in `volumesAttached` first.
    pub attachable: bool,
}

/// The API server's own words for a refusal (`persistentvolumeclaims "x" not found`), as the
/// kubelet quotes client-go's error.
fn api_message(error: &ApiError) -> String {
    match error {
        ApiError::NotFound(message)
        | ApiError::AlreadyExists(message)
        | ApiError::Conflict(message) => message.clone(),
        ApiError::Refused { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Claim → bound PV → CSI volume, with the attach requirement and, for an attachable volume, the
/// publish context of its attachment on `node` (the kubelet reads it when it mounts).
pub async fn resolve_claim(
    api: Arc<dyn StorageApi>,
    claim: ClaimRef<'_>,
    node: &str,
) -> Result<ResolvedClaim, ClaimError> {
    let pvc = api
        .get_claim(claim.namespace, claim.claim)
        .await
        .map_err(|error| claim.error(ClaimReason::FetchClaim(api_message(&error))))?;
    let pv_name = bound_volume_name(&claim, &pvc)?;
    let pv = api.get_volume(&pv_name).await.map_err(|error| {
        claim.error(ClaimReason::FetchVolume {
            pv: pv_name.clone(),
            message: error.to_string(),
        })
    })?;
    let mut volume = csi_volume(&claim, &pvc, &pv)?;
    let fetch = |error: ApiError| {
        claim.error(ClaimReason::FetchVolume {
            pv: pv_name.clone(),
            message: api_message(&error),
        })
    };
    let driver = api.get_csi_driver(&volume.driver).await.map_err(fetch)?;
    let attachable = attach_required(driver.as_ref());
    if attachable {
        volume.publish_context = api
            .attachment_metadata(&volume.driver, &volume.volume_handle, node)
            .await
            .map_err(fetch)?;
    }
    Ok(ResolvedClaim {
        unique_name: csi_unique_name(&volume),
        volume: Arc::new(volume),
        attachable,
    })
}
