//! The kubelet's certificate store in the certificate directory (`--cert-dir`), one per
//! [`Purpose`]: `<prefix>-<YYYY-MM-DD-HH-MM-SS>.pem` holds the chain then the key (mode 0600,
//! synced), and the `<prefix>-current.pem` symlink names the latest, replaced through
//! `<prefix>-updated.pem` and a rename so a crash never leaves it missing (`kubelet-client`
//! for the client certificate, `kubelet-server` for the serving one).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

use super::template::Purpose;

/// Why the store could not be read or written. Retrying helps only once the disk does.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write the {noun} in {path}: {source}")]
    Write {
        noun: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("expected {0:?} to be a symlink but it is a file")]
    NotALink(PathBuf),
    #[error("cannot read the {noun} {path}: {reason}")]
    Read {
        noun: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("cannot read the {noun} {path}: {source}")]
    Pair {
        noun: &'static str,
        path: PathBuf,
        #[source]
        source: PairError,
    },
}

/// Why a store file's text is not a certificate chain and its key (the file must change).
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("{0}")]
    Certificates(#[source] rustls::pki_types::pem::Error),
    #[error("no certificate in it")]
    NoCertificate,
    #[error("its key: {0}")]
    Key(#[source] rustls::pki_types::pem::Error),
    #[error("no private key in it")]
    NoKey,
}

/// One certificate chain and its key, as read from or written to the store.
#[derive(Clone, Debug)]
pub struct StoredPair {
    pub chain: Vec<CertificateDer<'static>>,
    pub key_pem: String,
    /// The whole file (chain then key), as a kubeconfig's `client-certificate` reads it.
    pub pem: String,
}

impl StoredPair {
    /// Parses a store file's text: `CERTIFICATE` blocks and one private key.
    pub fn parse(pem: &str) -> Result<Self, PairError> {
        let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(PairError::Certificates)?;
        if chain.is_empty() {
            return Err(PairError::NoCertificate);
        }
        PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(PairError::Key)?;
        let key_start = pem
            .find("-----BEGIN EC PRIVATE KEY-----")
            .or_else(|| pem.find("-----BEGIN PRIVATE KEY-----"))
            .or_else(|| pem.find("-----BEGIN RSA PRIVATE KEY-----"))
            .ok_or(PairError::NoKey)?;
        Ok(StoredPair {
            chain,
            key_pem: pem[key_start..].to_string(),
            pem: pem.to_string(),
        })
    }

    /// The key as rustls signs with it.
    pub fn private_key(&self) -> Result<PrivateKeyDer<'static>, rustls::pki_types::pem::Error> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
    }
}

/// One purpose's files in the certificate directory.
#[derive(Clone, Debug)]
pub struct CertificateStore {
    directory: PathBuf,
    purpose: Purpose,
}

impl CertificateStore {
    /// The client certificate's store.
    pub fn new(directory: impl Into<PathBuf>) -> Self {
        Self::for_purpose(directory, Purpose::Client)
    }

    pub fn for_purpose(directory: impl Into<PathBuf>, purpose: Purpose) -> Self {
        CertificateStore {
            directory: directory.into(),
            purpose,
        }
    }

    fn prefix(&self) -> &'static str {
        self.purpose.store_prefix()
    }

    /// `<certDir>/<prefix>-current.pem` (the client's is what the written kubeconfig names).
    pub fn current_path(&self) -> PathBuf {
        self.directory
            .join(format!("{}-current.pem", self.prefix()))
    }

    fn updated_path(&self) -> PathBuf {
        self.directory
            .join(format!("{}-updated.pem", self.prefix()))
    }

    /// The current pair, if the link exists and names a readable pair. A lone
    /// `…-updated.pem` link (a crash between the two renames) becomes the current one first.
    pub fn current(&self) -> Result<Option<StoredPair>, StoreError> {
        let current = self.current_path();
        let updated = self.updated_path();
        if std::fs::symlink_metadata(&current).is_err()
            && std::fs::symlink_metadata(&updated).is_ok_and(|m| m.file_type().is_symlink())
        {
            std::fs::rename(&updated, &current).map_err(|source| StoreError::Write {
                noun: self.purpose.noun(),
                path: current.clone(),
                source,
            })?;
        }
        match std::fs::symlink_metadata(&current) {
            Err(_) => return Ok(None),
            Ok(meta) if !meta.file_type().is_symlink() => {
                return Err(StoreError::NotALink(current));
            }
            Ok(_) => {}
        }
        let noun = self.purpose.noun();
        let text = std::fs::read_to_string(&current).map_err(|e| StoreError::Read {
            noun,
            path: current.clone(),
            reason: e.to_string(),
        })?;
        StoredPair::parse(&text)
            .map(Some)
            .map_err(|source| StoreError::Pair {
                noun,
                path: current,
                source,
            })
    }

    /// Writes `certificate_pem` (the chain) and `key_pem` as a new dated file and points the
    /// current link at it.
    pub fn update(
        &self,
        certificate_pem: &str,
        key_pem: &str,
        now: SystemTime,
    ) -> Result<StoredPair, StoreError> {
        let noun = self.purpose.noun();
        let error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Write { noun, path, source }
        };
        super::private_file::create_dir(&self.directory).map_err(error(&self.directory))?;
        let stamp = jiff::Timestamp::try_from(now)
            .map(|t| t.strftime("%Y-%m-%d-%H-%M-%S").to_string())
            .unwrap_or_else(|_| "0000-00-00-00-00-00".into());
        let dated = self
            .directory
            .join(format!("{}-{stamp}.pem", self.prefix()));
        let mut text = certificate_pem.trim_end().to_string();
        text.push('\n');
        text.push_str(key_pem.trim_end());
        text.push('\n');
        let pair = StoredPair::parse(&text).map_err(|source| StoreError::Pair {
            noun,
            path: dated.clone(),
            source,
        })?;
        super::private_file::write_private(&dated, text.as_bytes()).map_err(error(&dated))?;
        let updated = self.updated_path();
        let _ = std::fs::remove_file(&updated);
        let target = std::path::absolute(&dated).map_err(error(&dated))?;
        std::os::unix::fs::symlink(&target, &updated).map_err(error(&updated))?;
        let current = self.current_path();
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if !meta.file_type().is_symlink() => {
                return Err(StoreError::NotALink(current));
            }
            Ok(_) => std::fs::remove_file(&current).map_err(error(&current))?,
            Err(_) => {}
        }
        std::fs::rename(&updated, &current).map_err(error(&current))?;
        Ok(pair)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = rcgen::CertificateParams::new(vec![name.to_string()])
            .and_then(|p| p.self_signed(&key))
            .expect("certificate");
        (certificate.pem(), key.serialize_pem())
    }

    #[test]
    fn update_writes_a_dated_file_and_moves_the_current_link() {
        let directory = tempfile::tempdir().expect("temp dir");
        let store = CertificateStore::new(directory.path().join("pki"));
        assert!(store.current().expect("readable").is_none());
        let (certificate, key) = pair("a");
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        store.update(&certificate, &key, now).expect("stored");
        let dated = directory
            .path()
            .join("pki/kubelet-client-2023-11-14-22-13-20.pem");
        let mode = std::fs::metadata(&dated)
            .expect("dated file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_link(store.current_path()).expect("a link"),
            dated
        );
        let (second, second_key) = pair("b");
        let later = now + std::time::Duration::from_secs(60);
        store
            .update(&second, &second_key, later)
            .expect("stored again");
        let current = store.current().expect("readable").expect("a pair");
        assert_eq!(current.key_pem.trim(), second_key.trim());
        assert!(dated.exists(), "the older file stays");

        // The serving certificate's store beside it keeps files of its own.
        let serving = CertificateStore::for_purpose(directory.path().join("pki"), Purpose::Serving);
        assert!(serving.current().expect("readable").is_none());
        serving.update(&certificate, &key, now).expect("stored");
        assert_eq!(
            std::fs::read_link(serving.current_path()).expect("a link"),
            directory
                .path()
                .join("pki/kubelet-server-2023-11-14-22-13-20.pem")
        );
        let client = store.current().expect("readable").expect("a pair");
        assert_eq!(client.key_pem.trim(), second_key.trim());
    }

    #[test]
    fn a_regular_file_as_current_is_refused_and_a_lone_updated_link_recovered() {
        let directory = tempfile::tempdir().expect("temp dir");
        let store = CertificateStore::new(directory.path());
        let (certificate, key) = pair("a");
        std::fs::write(store.current_path(), format!("{certificate}{key}")).expect("written");
        assert!(matches!(store.current(), Err(StoreError::NotALink(_))));
        std::fs::remove_file(store.current_path()).expect("removed");
        let dated = directory.path().join("kubelet-client-x.pem");
        std::fs::write(&dated, format!("{certificate}{key}")).expect("written");
        std::os::unix::fs::symlink(&dated, store.updated_path()).expect("link");
        assert!(store.current().expect("recovered").is_some());
        assert!(store.current_path().exists());
    }
}
