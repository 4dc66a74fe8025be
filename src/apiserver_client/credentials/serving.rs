//! The kubelet API's serving certificate under `serverTLSBootstrap`, as its TLS listener
//! presents it: a rustls server-certificate resolver over the swappable certificate, so a
//! rotated certificate serves every new handshake without a restart (connections already
//! open keep theirs, as with the kubelet's `GetCertificate`). Until a certificate is issued,
//! and once one has expired, every handshake fails, as the kubelet's does, with its words.

use std::sync::Arc;
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::certified::{InstallError, SwappableCertificate};
use super::store::StoredPair;

/// What the kubelet's `GetCertificate` answers while it has no certificate.
pub const NO_SERVING_CERTIFICATE: &str = "no serving certificate available for the kubelet";

/// The serving certificate in use, if one has been issued.
#[derive(Default)]
pub struct ServingIdentity {
    certificate: SwappableCertificate,
}

impl std::fmt::Debug for ServingIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingIdentity")
            .field("validity", &self.certificate.validity())
            .finish_non_exhaustive()
    }
}

impl ServingIdentity {
    /// Serves `pair` from the next handshake on.
    pub fn install(&self, pair: &StoredPair) -> Result<(), InstallError> {
        self.certificate.install(pair)
    }

    pub fn certificate(&self) -> &SwappableCertificate {
        &self.certificate
    }
}

impl ResolvesServerCert for ServingIdentity {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self.certificate.unexpired(SystemTime::now());
        if key.is_none() {
            // Go's server logs the handshake error; rustls only ends the handshake.
            tracing::warn!("http: TLS handshake error: {NO_SERVING_CERTIFICATE}");
        }
        key
    }
}
