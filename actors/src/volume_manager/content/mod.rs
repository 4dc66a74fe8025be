//! What the API-backed volumes (configMap, secret, downwardAPI, projected) hold: the API objects
//! each needs, and the files the kubelet's plugins project from them (§1.11), as the payload the
//! atomic writer writes. Pure: the actor fetches the objects, this decides the bytes and modes.

mod downward;
mod key_to_path;
mod projected;
mod sources;
pub mod token;

use std::collections::BTreeMap;

pub use downward::{DownwardApiError, NodeAllocatable, go_quote};
pub use sources::{Fetched, FetchedObject, SourceObject, TokenSpec, payload_of, sources_of};

/// The `defaultMode` every atomic-writer volume gets when the pod leaves it out (API defaulting).
pub const DEFAULT_MODE: u32 = 0o644;

/// One file of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    /// Exact permission bits (the umask does not apply).
    pub mode: u32,
    /// Owner to set, for projected token files of pods with `runAsUser`.
    pub fs_user: Option<u32>,
}

/// Relative path → file.
pub type Payload = BTreeMap<String, FileProjection>;

/// Why a volume's content cannot be built. The `Display` text is the kubelet's, the part after
/// `MountVolume.SetUp failed for volume "<name>" : `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    /// A non-optional ConfigMap or Secret that does not exist (`configmap "x" not found`).
    #[error("{kind} {name:?} not found")]
    NotFound { kind: &'static str, name: String },
    #[error("configmap references non-existent config key: {0}")]
    MissingConfigMapKey(String),
    #[error("references non-existent secret key: {0}")]
    MissingSecretKey(String),
    /// The API call failed; its text.
    #[error("{0}")]
    Api(String),
    #[error(transparent)]
    DownwardApi(#[from] DownwardApiError),
    /// A projected volume's errors, aggregated as Go's `utilerrors.NewAggregate` prints them.
    #[error("{}", aggregate(.0))]
    Aggregate(Vec<ContentError>),
    /// The pod spec lacks what the plugin needs (a caller's bug; retrying does not help).
    #[error("volume {0:?} has no source for its plugin")]
    MissingSource(String),
}

/// Go's aggregate error text: one error alone, several as `[a, b]`.
fn aggregate(errors: &[ContentError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A mode from the API (`int32`), as permission bits.
pub(crate) fn mode_bits(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok())
        .map_or(default, |m| m & 0o7777)
}
