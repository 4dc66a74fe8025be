//! TLS bootstrap (`--bootstrap-kubeconfig`), as the kubelet's: when the kubeconfig is missing
//! or holds no valid client certificate (`kubeconfig_validity`), the bootstrap credentials
//! ask for one (a CSR, then the wait for approval and issuance), it is stored, and a kubeconfig
//! naming it is written; the node then runs with that kubeconfig. Without rotation the
//! bootstrap is the kubelet's `LoadClientCert`: the key is the stored pair's, else the one kept
//! in `kubelet-client.key.tmp` (made on the first try), and the CSR is `node-csr-<digest>` of
//! it, so a restart while the CSR is pending waits on that CSR instead of sending another.
//! With rotation it is the certificate manager's first request: a fresh key, `csr-<random>`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use kube::config::Kubeconfig;
use serde_json::json;

use super::certified::InstallError;
use super::identity::ClientIdentity;
use super::kubeconfig_validity;
use super::lifetime::Validity;
use super::pending_key;
use super::request::{BOOTSTRAP_WAIT, RequestError, RequestKey, request_certificate};
use super::store::{CertificateStore, StoreError, StoredPair};
use super::template::{Purpose, Template};
use crate::config::Bootstrap as BootstrapPaths;

/// Why the node could not get its client certificate. None is fixed by retrying at once: the
/// token, the CSR's approver or the files must change.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("cannot read the bootstrap kubeconfig {path}: {reason}")]
    BootstrapKubeconfig { path: PathBuf, reason: String },
    #[error(
        "the API server refused the bootstrap credentials of {path} (401 Unauthorized): the bootstrap token is unknown, expired or not usable for authentication"
    )]
    Refused { path: PathBuf },
    #[error("TLS bootstrap failed: {0}")]
    Request(#[source] RequestError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Kubeconfig(#[from] kubeconfig_validity::UnreadableKubeconfig),
    #[error("the issued client certificate is unusable: {0}")]
    Unusable(#[source] InstallError),
    #[error("cannot write the kubeconfig {path}: {source}")]
    WriteKubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The node's client identity: the stored certificate when it and the kubeconfig are there
/// and valid, else a new one through the bootstrap credentials (`rotate`: as the certificate
/// manager asks, else as `LoadClientCert` does).
pub async fn ensure_client_certificate(
    paths: &BootstrapPaths,
    node_name: &str,
    rotate: bool,
) -> Result<Arc<ClientIdentity>, BootstrapError> {
    let store = CertificateStore::new(&paths.cert_dir);
    if let Some(pair) = kubeconfig_validity::still_valid(&paths.kubeconfig).await? {
        tracing::info!(kubeconfig = %paths.kubeconfig.display(), "Kubeconfig exists and is valid, skipping bootstrap");
        // The kubeconfig is used as it is; with rotation the store's certificate, once there
        // is a valid one, is the manager's current one (`fileStore.Current` reads it first).
        let current = match rotate {
            true => store.current().ok().flatten().filter(still_valid),
            false => None,
        };
        return ClientIdentity::new(current.as_ref().unwrap_or(&pair))
            .map_err(BootstrapError::Unusable);
    }
    tracing::info!(bootstrap_kubeconfig = %paths.bootstrap_kubeconfig.display(), "no valid client certificate; requesting one with the bootstrap credentials");
    let client = bootstrap_client(&paths.bootstrap_kubeconfig).await?;
    let key = if rotate {
        RequestKey::Fresh
    } else {
        RequestKey::Kept(Box::new(kept_key(&store, &paths.cert_dir)?))
    };
    let pair = request_and_store(client, &store, node_name, key)
        .await
        .map_err(|error| match error {
            BootstrapError::Request(request) if request.unauthorized() => BootstrapError::Refused {
                path: paths.bootstrap_kubeconfig.clone(),
            },
            other => other,
        })?;
    pending_key::remove(&paths.cert_dir);
    write_kubeconfig(paths, &store)?;
    tracing::info!(kubeconfig = %paths.kubeconfig.display(), certificate = %store.current_path().display(), "client certificate issued; kubeconfig written");
    ClientIdentity::new(&pair).map_err(BootstrapError::Unusable)
}

/// A client with the bootstrap kubeconfig's credentials.
pub async fn bootstrap_client(path: &Path) -> Result<kube::Client, BootstrapError> {
    let error = |reason: String| BootstrapError::BootstrapKubeconfig {
        path: path.to_owned(),
        reason,
    };
    let (config, _) = crate::apiserver_client::client_config(Some(path))
        .await
        .map_err(|e| error(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| error(e.to_string()))
}

/// `LoadClientCert`'s key: the stored pair's when it reads as a key, else the pending one
/// (kept, or made and kept, in the certificate directory until the certificate is stored).
fn kept_key(store: &CertificateStore, cert_dir: &Path) -> Result<rcgen::KeyPair, BootstrapError> {
    let stored = store
        .current()
        .ok()
        .flatten()
        .and_then(|pair| rcgen::KeyPair::from_pem(&pair.key_pem).ok());
    if let Some(key) = stored {
        return Ok(key);
    }
    tracing::info!(
        "No valid private key and/or certificate found, reusing existing private key or creating a new one"
    );
    Ok(pending_key::load_or_generate(cert_dir)?)
}

/// Asks for a certificate with `key` through `client` and stores it with its key.
pub async fn request_and_store(
    client: kube::Client,
    store: &CertificateStore,
    node_name: &str,
    key: RequestKey,
) -> Result<StoredPair, BootstrapError> {
    let template = Template::client(node_name);
    let issued = request_certificate(client, Purpose::Client, &template, key, BOOTSTRAP_WAIT)
        .await
        .map_err(BootstrapError::Request)?;
    Ok(store.update(&issued.certificate_pem, &issued.key_pem, SystemTime::now())?)
}

fn still_valid(pair: &StoredPair) -> bool {
    pair.chain
        .first()
        .and_then(|leaf| Validity::of(leaf))
        .is_some_and(|v| !v.expired_at(SystemTime::now()))
}

/// `writeKubeconfigFromBootstrapping`: the bootstrap kubeconfig's server and CA, the stored
/// certificate and key as the user.
fn write_kubeconfig(
    paths: &BootstrapPaths,
    store: &CertificateStore,
) -> Result<(), BootstrapError> {
    let error = |reason: String| BootstrapError::BootstrapKubeconfig {
        path: paths.bootstrap_kubeconfig.clone(),
        reason,
    };
    let bootstrap =
        Kubeconfig::read_from(&paths.bootstrap_kubeconfig).map_err(|e| error(e.to_string()))?;
    let context_name = bootstrap.current_context.clone().unwrap_or_default();
    let cluster_name = bootstrap
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .ok_or_else(|| error(format!("no context {context_name:?}")))?;
    let cluster = bootstrap
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| error(format!("no cluster {cluster_name:?}")))?;
    let mut written = json!({"server": cluster.server.clone().unwrap_or_default()});
    if cluster.insecure_skip_tls_verify == Some(true) {
        written["insecure-skip-tls-verify"] = json!(true);
    }
    match (
        &cluster.certificate_authority,
        &cluster.certificate_authority_data,
    ) {
        (Some(path), _) => written["certificate-authority"] = json!(path),
        (None, Some(data)) => written["certificate-authority-data"] = json!(data),
        (None, None) => {}
    }
    let certificate = store.current_path().display().to_string();
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": written}],
        "users": [{"name": "default-auth", "user": {"client-certificate": certificate, "client-key": certificate}}],
        "contexts": [{"name": "default-context", "context": {"cluster": "default-cluster", "user": "default-auth", "namespace": "default"}}],
        "current-context": "default-context",
    });
    let text = serde_yaml_ng::to_string(&kubeconfig).map_err(|e| error(e.to_string()))?;
    let write_error = |source| BootstrapError::WriteKubeconfig {
        path: paths.kubeconfig.clone(),
        source,
    };
    if let Some(parent) = paths
        .kubeconfig
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(write_error)?;
    }
    // Written beside and renamed over, so a reader never sees half a file.
    let partial = paths.kubeconfig.with_extension("partial");
    super::private_file::write_private(&partial, text.as_bytes()).map_err(write_error)?;
    std::fs::rename(&partial, &paths.kubeconfig).map_err(write_error)
}
