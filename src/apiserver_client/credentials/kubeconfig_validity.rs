//! Whether `--kubeconfig` can be used as it is, as the kubelet's `isClientConfigStillValid`
//! decides before any bootstrap: the file exists, loads, and its user's client certificate
//! (a file or inline data, whichever it names) reads with its key and has not expired. Only a
//! missing file, one that does not load, one without a client certificate (a token alone is
//! not enough: the kubelet bootstraps then) or an expired certificate calls for a bootstrap;
//! a file that cannot even be looked at is an error.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine as _;

use super::lifetime::Validity;
use super::store::{PairError, StoredPair};

/// Why the existing kubeconfig could not be judged at all (retrying helps once the file can be
/// read).
#[derive(Debug, thiserror::Error)]
#[error("error reading existing bootstrap kubeconfig {path}: {source}")]
pub struct UnreadableKubeconfig {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Why the kubeconfig's user gives no client certificate and key: the node bootstraps.
#[derive(Debug, thiserror::Error)]
enum ClientPairError {
    #[error("the {what} data: {source}")]
    Data {
        what: &'static str,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{file}: {source}")]
    File {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no {0}")]
    Missing(&'static str),
    #[error("the {what}: {source}")]
    Text {
        what: &'static str,
        #[source]
        source: std::string::FromUtf8Error,
    },
    #[error(transparent)]
    Pair(#[from] PairError),
}

/// The kubeconfig's client certificate and key when the kubeconfig is still valid; `None`
/// (with the kubelet's reason logged) when the node must bootstrap.
pub async fn still_valid(path: &Path) -> Result<Option<StoredPair>, UnreadableKubeconfig> {
    match std::fs::metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(UnreadableKubeconfig {
                path: path.to_owned(),
                source,
            });
        }
        Ok(_) => {}
    }
    let shown = path.display();
    let config = match crate::apiserver_client::client_config(Some(path)).await {
        Ok((config, _)) => config,
        Err(error) => {
            tracing::warn!(%error, "unable to read existing bootstrap client config from {shown}");
            return Ok(None);
        }
    };
    let pair = match client_pair(&config.auth_info) {
        Ok(pair) => pair,
        Err(error) => {
            tracing::warn!(%error, "unable to read TLS certificates from existing bootstrap client config read from {shown}");
            return Ok(None);
        }
    };
    let now = SystemTime::now();
    for certificate in &pair.chain {
        let validity = Validity::of(certificate);
        if validity.is_none_or(|v| v.expired_at(now)) {
            let not_after = validity
                .and_then(|v| jiff::Timestamp::try_from(v.not_after).ok())
                .map_or_else(|| "unknown".to_string(), |t| t.to_string());
            tracing::warn!(
                "part of the existing bootstrap client certificate in {shown} is expired: {not_after}"
            );
            return Ok(None);
        }
    }
    Ok(Some(pair))
}

/// The user's client certificate chain and key, each from its inline data or else its file.
fn client_pair(user: &kube::config::AuthInfo) -> Result<StoredPair, ClientPairError> {
    use secrecy::ExposeSecret as _;
    let load = |data: Option<&str>, file: Option<&String>, what: &'static str| {
        let bytes = match (data, file) {
            (Some(data), _) => base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|source| ClientPairError::Data { what, source })?,
            (None, Some(file)) => std::fs::read(file).map_err(|source| ClientPairError::File {
                file: file.clone(),
                source,
            })?,
            (None, None) => return Err(ClientPairError::Missing(what)),
        };
        String::from_utf8(bytes).map_err(|source| ClientPairError::Text { what, source })
    };
    let certificate = load(
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_ref(),
        "client certificate",
    )?;
    let key = load(
        user.client_key_data.as_ref().map(|k| k.expose_secret()),
        user.client_key.as_ref(),
        "client key",
    )?;
    // A store file is both in one (the kubeconfig then names it twice).
    let text = if certificate == key {
        certificate
    } else {
        format!("{}\n{}", certificate.trim_end(), key)
    };
    Ok(StoredPair::parse(&text)?)
}
