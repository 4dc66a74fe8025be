//! The bootstrap's private key while its CSR is pending, as the kubelet keeps it
//! (`<certDir>/kubelet-client.key.tmp`, `keyutil.LoadOrGenerateKeyFile`): on disk from before
//! the CSR is sent until its certificate is stored, so a restart in between asks with the same
//! key, so names the same CSR, and waits on the one it made instead of making another. A file
//! there that is not a key is an error (as the kubelet's), never silently replaced: the CSR
//! already sent was made with it.

use std::path::{Path, PathBuf};

use rcgen::KeyPair;

use super::{private_file, store::StoreError};

/// The kubelet's `tmpPrivateKeyFile`.
pub const PENDING_KEY_FILE: &str = "kubelet-client.key.tmp";

const NOUN: &str = "pending bootstrap key";

/// Where the pending key of `cert_dir` is kept.
pub fn path(cert_dir: &Path) -> PathBuf {
    cert_dir.join(PENDING_KEY_FILE)
}

/// The pending key, made (ECDSA P-256) and written (mode 0600) when there is none.
pub fn load_or_generate(cert_dir: &Path) -> Result<KeyPair, StoreError> {
    let path = path(cert_dir);
    // Never through a link: a key someone else chose would be the node's identity.
    match private_file::read_not_through_a_link(&path) {
        Ok(text) => {
            return KeyPair::from_pem(&text).map_err(|error| StoreError::Read {
                noun: NOUN,
                path,
                reason: format!(
                    "{error}; the CSR already sent was made with it: remove the file to start the bootstrap with a new key"
                ),
            });
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            let reason = if error.raw_os_error() == Some(libc::ELOOP) {
                "it is a symbolic link, which is never read: remove it".to_owned()
            } else {
                error.to_string()
            };
            return Err(StoreError::Read {
                noun: NOUN,
                path,
                reason,
            });
        }
    }
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|error| {
        StoreError::Read {
            noun: NOUN,
            path: path.clone(),
            reason: format!("cannot make a key: {error}"),
        }
    })?;
    write(cert_dir, &path, &key.serialize_pem())?;
    Ok(key)
}

/// Removes the pending key once its certificate is stored (a key already gone is fine).
pub fn remove(cert_dir: &Path) {
    let path = path(cert_dir);
    if let Err(error) = std::fs::remove_file(&path)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::info!(path = %path.display(), %error, "Failed cleaning up private key file");
    }
}

/// Written beside and renamed over, so a crash leaves the old file or the whole new one.
fn write(cert_dir: &Path, path: &Path, pem: &str) -> Result<(), StoreError> {
    let error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StoreError::Write {
            noun: NOUN,
            path,
            source,
        }
    };
    private_file::create_dir(cert_dir).map_err(error(cert_dir))?;
    let partial = path.with_extension("tmp.partial");
    private_file::write_private(&partial, pem.as_bytes()).map_err(error(&partial))?;
    std::fs::rename(&partial, path).map_err(error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_link_at_the_key_is_refused_not_read() {
        let directory = tempfile::tempdir().expect("temp dir");
        let elsewhere = directory.path().join("chosen.key");
        let chosen = KeyPair::generate().expect("a key").serialize_pem();
        std::fs::write(&elsewhere, &chosen).expect("written");
        std::os::unix::fs::symlink(&elsewhere, path(directory.path())).expect("a link");
        let error = load_or_generate(directory.path())
            .expect_err("refused")
            .to_string();
        assert!(error.contains("symbolic link"), "{error}");
    }

    #[test]
    fn the_key_is_kept_until_removed() {
        let directory = tempfile::tempdir().expect("temp dir");
        let cert_dir = directory.path().join("pki");
        let first = load_or_generate(&cert_dir).expect("a new key");
        let mode = std::fs::metadata(path(&cert_dir))
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = load_or_generate(&cert_dir).expect("the kept key");
        assert_eq!(again.public_key_raw(), first.public_key_raw());
        remove(&cert_dir);
        assert!(!path(&cert_dir).exists());
        let fresh = load_or_generate(&cert_dir).expect("a new key");
        assert_ne!(fresh.public_key_raw(), first.public_key_raw());
    }

    #[test]
    fn a_file_that_is_no_key_is_an_error_naming_it() {
        let directory = tempfile::tempdir().expect("temp dir");
        std::fs::write(path(directory.path()), "not a key").expect("written");
        let error = load_or_generate(directory.path())
            .expect_err("refused")
            .to_string();
        assert!(error.contains(PENDING_KEY_FILE), "{error}");
        assert_eq!(
            std::fs::read_to_string(path(directory.path())).expect("kept"),
            "not a key"
        );
    }
}
