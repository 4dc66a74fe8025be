//! A pod's `persistentVolumeClaim` volume resolved to the CSI volume behind it, as the kubelet's
//! desired-state populator does (`createVolumeSpec`: claim → bound PV → CSI source), and whether
//! the attach/detach controller must attach it first (the CSIDriver's `attachRequired`). Pure:
//! the caller fetches the claim, the PV and the CSIDriver and passes them in.

use k8s_openapi::api::{
    core::v1::{PersistentVolume, PersistentVolumeClaim},
    storage::v1::CSIDriver,
};

use crate::ports::CsiVolume;

/// Why a claim cannot be used yet, with the kubelet's texts. All of them clear up by themselves
/// (the claim gets bound, the PV appears), so the populator retries on its next pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    #[error("error processing PVC {namespace}/{claim}: {reason}")]
    Claim {
        namespace: String,
        claim: String,
        /// Boxed: the error travels in every populator result, the reason is rarely there.
        reason: Box<ClaimReason>,
    },
}

/// The inner reason of a [`ClaimError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimReason {
    /// The GET of the claim failed (`message` is the API error).
    #[error("failed to fetch PVC from API server: {0}")]
    FetchClaim(String),
    #[error("can't start pod because PVC {namespace}/{claim} is being deleted")]
    ClaimDeleting { namespace: String, claim: String },
    #[error(
        "PVC {namespace}/{claim} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume_name:?})"
    )]
    NotBound {
        namespace: String,
        claim: String,
        phase: String,
        volume_name: String,
    },
    /// The GET of the PV failed.
    #[error("failed to fetch PV {pv} from API server: {message}")]
    FetchVolume { pv: String, message: String },
    #[error(
        "found PV object {pv} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"
    )]
    VolumeUnbound { pv: String },
    #[error(
        "found PV object {pv} but its pv.Spec.ClaimRef.UID {bound} does not point to claim.UID {claim}"
    )]
    VolumeBoundElsewhere {
        pv: String,
        bound: String,
        claim: String,
    },
    /// The PV has a source other than `csi`: nodepulse serves CSI volumes only.
    #[error("PV {pv} has no csi source: nodepulse mounts only CSI persistent volumes")]
    NotCsi { pv: String },
}

/// The claim as a pod names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef<'a> {
    pub namespace: &'a str,
    pub claim: &'a str,
    /// The pod volume's `persistentVolumeClaim.readOnly`.
    pub read_only: bool,
}

impl ClaimRef<'_> {
    /// Wraps `reason` as the populator reports it.
    pub fn error(&self, reason: ClaimReason) -> ClaimError {
        ClaimError::Claim {
            namespace: self.namespace.to_owned(),
            claim: self.claim.to_owned(),
            reason: Box::new(reason),
        }
    }
}

/// The PV name a claim is bound to (`getPVCExtractPV`), or why it cannot be used.
pub fn bound_volume_name(
    claim: &ClaimRef<'_>,
    pvc: &PersistentVolumeClaim,
) -> Result<String, ClaimError> {
    if pvc.metadata.deletion_timestamp.is_some() {
        return Err(claim.error(ClaimReason::ClaimDeleting {
            namespace: claim.namespace.to_owned(),
            claim: claim.claim.to_owned(),
        }));
    }
    let phase = pvc
        .status
        .as_ref()
        .and_then(|status| status.phase.clone())
        .unwrap_or_default();
    let volume_name = pvc
        .spec
        .as_ref()
        .and_then(|spec| spec.volume_name.clone())
        .unwrap_or_default();
    if phase != "Bound" || volume_name.is_empty() {
        return Err(claim.error(ClaimReason::NotBound {
            namespace: claim.namespace.to_owned(),
            claim: claim.claim.to_owned(),
            phase,
            volume_name,
        }));
    }
    Ok(volume_name)
}

/// The CSI volume behind a bound claim (`getPVSpec`, then the CSI mounter's reading of the PV).
pub fn csi_volume(
    claim: &ClaimRef<'_>,
    pvc: &PersistentVolumeClaim,
    pv: &PersistentVolume,
) -> Result<CsiVolume, ClaimError> {
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let spec = pv.spec.clone().unwrap_or_default();
    let Some(claim_ref) = &spec.claim_ref else {
        return Err(claim.error(ClaimReason::VolumeUnbound { pv: pv_name }));
    };
    let claim_uid = pvc.metadata.uid.clone().unwrap_or_default();
    let bound = claim_ref.uid.clone().unwrap_or_default();
    if bound != claim_uid {
        return Err(claim.error(ClaimReason::VolumeBoundElsewhere {
            pv: pv_name,
            bound,
            claim: claim_uid,
        }));
    }
    let Some(source) = spec.csi else {
        return Err(claim.error(ClaimReason::NotCsi { pv: pv_name }));
    };
    Ok(CsiVolume {
        driver: source.driver,
        volume_handle: source.volume_handle,
        pv_name,
        read_only: claim.read_only || source.read_only.unwrap_or(false),
        fs_type: source.fs_type.unwrap_or_default(),
        access_mode: spec
            .access_modes
            .and_then(|modes| modes.into_iter().next())
            .unwrap_or_else(|| "ReadWriteOnce".to_owned()),
        mount_options: spec.mount_options.unwrap_or_default(),
        volume_attributes: source.volume_attributes.unwrap_or_default(),
        publish_context: Default::default(),
    })
}

/// Whether a CSI volume of `driver` must be attached first: yes when the CSIDriver object is
/// missing or its `attachRequired` is not false (§1.15; the API server defaults it to true).
pub fn attach_required(driver: Option<&CSIDriver>) -> bool {
    driver
        .and_then(|driver| driver.spec.attach_required)
        .unwrap_or(true)
}

#[cfg(test)]
#[path = "claim_tests.rs"]
mod tests;
