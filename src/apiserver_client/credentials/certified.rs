//! One swappable certificate and key as rustls presents it, with the validity of its leaf:
//! what the client identity and the serving identity both hold. Installing replaces it for
//! every later handshake; an expired one is never handed out (the certificate manager's
//! `Current()` is nil past `NotAfter`).

use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use rustls::sign::CertifiedKey;

use super::lifetime::Validity;
use super::store::StoredPair;

/// Why a pair cannot be presented (the pair must change; retrying does not help).
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("no certificate")]
    NoCertificate,
    #[error("the certificate does not parse")]
    Unparsable,
    #[error("{0}")]
    Key(#[source] rustls::pki_types::pem::Error),
    #[error("unusable key: {0}")]
    UnusableKey(#[source] rustls::Error),
}

/// The certificate in use, if there is one.
#[derive(Default)]
pub struct SwappableCertificate {
    current: RwLock<Option<Current>>,
}

#[derive(Clone)]
struct Current {
    key: Arc<CertifiedKey>,
    validity: Validity,
}

impl SwappableCertificate {
    /// Presents `pair` from the next handshake on.
    pub fn install(&self, pair: &StoredPair) -> Result<(), InstallError> {
        let leaf = pair.chain.first().ok_or(InstallError::NoCertificate)?;
        let validity = Validity::of(leaf).ok_or(InstallError::Unparsable)?;
        let key = pair.private_key().map_err(InstallError::Key)?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(InstallError::UnusableKey)?;
        let certified = Arc::new(CertifiedKey::new(pair.chain.clone(), signing));
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Some(Current {
            key: certified,
            validity,
        });
        Ok(())
    }

    /// The validity of the certificate in use.
    pub fn validity(&self) -> Option<Validity> {
        self.read(|c| c.validity)
    }

    /// The leaf in use (DER), for checking it against a template.
    pub fn leaf(&self) -> Option<Vec<u8>> {
        self.read(|c| c.key.cert.first().map(|der| der.to_vec()))
            .flatten()
    }

    /// The certificate to present at `now`: none once it has expired.
    pub fn unexpired(&self, now: SystemTime) -> Option<Arc<CertifiedKey>> {
        self.read(|c| (!c.validity.expired_at(now)).then(|| Arc::clone(&c.key)))
            .flatten()
    }

    fn read<T>(&self, f: impl FnOnce(&Current) -> T) -> Option<T> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(f)
    }
}
