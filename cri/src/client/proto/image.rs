//! CRI `runtime.v1` image messages: ImageStatus, PullImage (with registry auth), ListImages
//! and RemoveImage.
//! Field numbers are those of cri-api's `api.proto`.

use std::collections::HashMap;

use super::{Int64Value, PodSandboxConfig};

/// `ImageSpec`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageSpec {
    #[prost(string, tag = "1")]
    pub image: String,
    #[prost(map = "string, string", tag = "2")]
    pub annotations: HashMap<String, String>,
    #[prost(string, tag = "18")]
    pub user_specified_image: String,
}

/// `Image`
#[derive(Clone, PartialEq, prost::Message)]
pub struct Image {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, repeated, tag = "2")]
    pub repo_tags: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub repo_digests: Vec<String>,
    #[prost(uint64, tag = "4")]
    pub size: u64,
    #[prost(message, optional, tag = "5")]
    pub uid: Option<Int64Value>,
    #[prost(string, tag = "6")]
    pub username: String,
    #[prost(bool, tag = "8")]
    pub pinned: bool,
}

/// `ImageStatusRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageStatusRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
    #[prost(bool, tag = "2")]
    pub verbose: bool,
}

/// `ImageStatusResponse`: no `image` when the runtime does not have it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub image: Option<Image>,
}

/// `AuthConfig`. Its `Debug` names the registry and user only: the secrets never reach a log.
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub struct AuthConfig {
    #[prost(string, tag = "1")]
    pub username: String,
    #[prost(string, tag = "2")]
    pub password: String,
    #[prost(string, tag = "3")]
    pub auth: String,
    #[prost(string, tag = "4")]
    pub server_address: String,
    #[prost(string, tag = "5")]
    pub identity_token: String,
    #[prost(string, tag = "6")]
    pub registry_token: String,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("username", &self.username)
            .field("server_address", &self.server_address)
            .finish_non_exhaustive()
    }
}

/// `PullImageRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PullImageRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
    #[prost(message, optional, tag = "2")]
    pub auth: Option<AuthConfig>,
    #[prost(message, optional, tag = "3")]
    pub sandbox_config: Option<PodSandboxConfig>,
}

/// `PullImageResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PullImageResponse {
    #[prost(string, tag = "1")]
    pub image_ref: String,
}

/// `ImageFilter`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageFilter {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
}

/// `ListImagesRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListImagesRequest {
    #[prost(message, optional, tag = "1")]
    pub filter: Option<ImageFilter>,
}

/// `ListImagesResponse`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListImagesResponse {
    #[prost(message, repeated, tag = "1")]
    pub images: Vec<Image>,
}

/// `RemoveImageRequest { ImageSpec image = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RemoveImageRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
}
