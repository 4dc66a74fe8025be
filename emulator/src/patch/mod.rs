//! The three patch types kube-apiserver accepts for built-in resources, selected by the request's
//! `Content-Type`, and the mapping of patch failures onto API errors.

pub mod json_patch;
pub mod merge;
pub mod schema;
pub mod strategic;

use serde_json::{Value, json};

use crate::api::ApiError;
pub use schema::Schema;

/// The `Content-Type` of a PATCH request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Strategic,
    Merge,
    Json,
}

impl PatchType {
    /// Parses the media type, ignoring parameters such as `; charset=utf-8`.
    pub fn from_content_type(content_type: &str) -> Result<PatchType, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            _ => Err(ApiError::unsupported_media_type(content_type)),
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// A malformed patch document (400).
    #[error("{0}")]
    BadRequest(String),
    /// A well-formed patch that does not apply to the object (422).
    #[error("{0}")]
    Unprocessable(String),
    /// A patch apimachinery fails on without classifying the failure (500).
    #[error("{0}")]
    Internal(String),
}

impl From<PatchError> for ApiError {
    fn from(err: PatchError) -> Self {
        match err {
            PatchError::BadRequest(message) => ApiError::bad_request(message),
            // `NewGenericServerResponse(422, ..., isUnexpectedResponse=false)`: the library's
            // words stay on the server (logged here); the body has empty details.
            PatchError::Unprocessable(message) => {
                tracing::debug!(%message, "patch does not apply");
                ApiError {
                    code: 422,
                    reason: "Invalid",
                    message: "the server rejected our request due to an error in our request"
                        .into(),
                    details: Some(json!({})),
                }
            }
            PatchError::Internal(message) => ApiError::internal(message),
        }
    }
}

/// Applies a patch body of `patch_type` to `current`.
pub fn apply(
    patch_type: PatchType,
    current: &Value,
    body: &[u8],
    schema: Schema,
) -> Result<Value, ApiError> {
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let patched = match patch_type {
        PatchType::Strategic => strategic::apply(current, &patch, schema)?,
        PatchType::Merge => merge::apply(current, &patch),
        PatchType::Json => json_patch::apply(current, &patch)?,
    };
    Ok(patched)
}
