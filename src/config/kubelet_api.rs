//! The kubelet API's settings with the `KubeletConfiguration` names and defaults of the config
//! file (not the kubelet's legacy command-line defaults): webhook authentication and
//! authorization on, anonymous access off, the read-only port off.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

fn seconds(value: u64) -> GoDuration {
    GoDuration(std::time::Duration::from_secs(value))
}

/// `authentication`: who a request to the kubelet API comes from.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubeletAuthentication {
    pub x509: X509Authentication,
    pub webhook: WebhookAuthentication,
    pub anonymous: AnonymousAuthentication,
}

/// `authentication.x509`: client certificates verified against this CA bundle.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct X509Authentication {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<PathBuf>,
}

/// `authentication.webhook`: bearer tokens checked with a TokenReview.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookAuthentication {
    pub enabled: bool,
    /// How long a review's answer (either way) is reused.
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: GoDuration,
}

impl Default for WebhookAuthentication {
    fn default() -> Self {
        Self {
            enabled: true,
            cache_ttl: seconds(120),
        }
    }
}

/// `authentication.anonymous`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AnonymousAuthentication {
    pub enabled: bool,
}

/// `authorization`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubeletAuthorization {
    pub mode: AuthorizationMode,
    pub webhook: WebhookAuthorization,
}

/// `authorization.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum AuthorizationMode {
    /// A SubjectAccessReview for every request.
    #[default]
    Webhook,
    AlwaysAllow,
}

/// `authorization.webhook`: how long SubjectAccessReview answers are reused.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookAuthorization {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: GoDuration,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: GoDuration,
}

impl Default for WebhookAuthorization {
    fn default() -> Self {
        Self {
            cache_authorized_ttl: seconds(300),
            cache_unauthorized_ttl: seconds(30),
        }
    }
}

/// The kubelet API's default `address`: every address of the host.
pub const DEFAULT_KUBELET_ADDRESS: &str = "0.0.0.0";

pub(super) fn default_address() -> String {
    DEFAULT_KUBELET_ADDRESS.to_owned()
}

pub(super) fn default_healthz_bind_address() -> String {
    "127.0.0.1".to_owned()
}

pub(super) fn default_enable_server() -> bool {
    true
}

pub(super) fn default_healthz_port() -> u16 {
    10248
}
