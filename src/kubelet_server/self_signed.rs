//! The self-signed serving certificate the kubelet makes when no `tlsCertFile` is given:
//! `<certDir>/kubelet.crt` (the leaf, then the CA that signed it) and `kubelet.key`, made once
//! and reused while readable. A CA `CN=<host>-ca@<unix>` signs a leaf `CN=<host>@<unix>` with
//! one SAN (the host: an IP SAN when it parses as one), server auth, valid from an hour ago
//! for a year. The keys are ECDSA P-256, not the kubelet's RSA-2048: ring, which rustls uses
//! here, cannot generate RSA keys, and kube-apiserver does not verify this certificate.

use std::{
    fs::{self, DirBuilder, OpenOptions},
    io::Write,
    net::IpAddr,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::tls::{ServingCertificate, read_chain, read_key};

pub const CERTIFICATE_FILE: &str = "kubelet.crt";
pub const KEY_FILE: &str = "kubelet.key";
const LOCK_FILE: &str = ".lock";

const LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// Backdated, so a peer whose clock is a little behind accepts it at once.
const BACKDATE: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum SelfSignedError {
    #[error("cannot write the self-signed serving certificate under {}: {source}", .dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make a self-signed serving certificate for {host:?}: {reason}")]
    Generate { host: String, reason: String },
    #[error("the serving certificate under {} cannot be used: {reason}", .dir.display())]
    Unusable { dir: PathBuf, reason: String },
}

/// The pair under `dir` when both files read, else a new one written there for `host`.
/// Two daemons sharing a `rootDir` make the pair under an exclusive lock on `dir/.lock`, so
/// neither renames the other's half-written file away nor pairs its certificate with the
/// other's key: the second finds the first's pair and uses it.
pub fn load_or_create(dir: &Path, host: &str) -> Result<ServingCertificate, SelfSignedError> {
    let (certificate, key) = (dir.join(CERTIFICATE_FILE), dir.join(KEY_FILE));
    if let (Ok(chain), Ok(key)) = (read_chain(&certificate), read_key(&key)) {
        return Ok(ServingCertificate { chain, key });
    }
    let write = |source| SelfSignedError::Write {
        dir: dir.to_owned(),
        source,
    };
    DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(write)?;
    let lock = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(LOCK_FILE))
        .map_err(write)?;
    lock.lock().map_err(write)?;
    if let (Ok(chain), Ok(key)) = (read_chain(&certificate), read_key(&key)) {
        return Ok(ServingCertificate { chain, key });
    }
    let generated = generate(host, SystemTime::now())?;
    write_file(&certificate, generated.certificate_pem.as_bytes(), 0o644).map_err(write)?;
    write_file(&key, generated.key_pem.as_bytes(), 0o600).map_err(write)?;
    tracing::info!(certificate = %certificate.display(), %host, "wrote a self-signed serving certificate for the kubelet API");
    let unusable = |reason: String| SelfSignedError::Unusable {
        dir: dir.to_owned(),
        reason,
    };
    Ok(ServingCertificate {
        chain: read_chain(&certificate).map_err(|error| unusable(error.to_string()))?,
        key: read_key(&key).map_err(|error| unusable(error.to_string()))?,
    })
}

/// Replaces `path` with `contents` through a temporary file, so a reader never sees half.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    let _ = fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temporary)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

/// A generated pair in PEM: the leaf then the CA, and the leaf's key.
pub struct Generated {
    pub certificate_pem: String,
    pub key_pem: String,
}

pub fn generate(host: &str, now: SystemTime) -> Result<Generated, SelfSignedError> {
    let fail = |error: rcgen::Error| SelfSignedError::Generate {
        host: host.to_owned(),
        reason: error.to_string(),
    };
    let unix = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let not_before = time::OffsetDateTime::from(now - BACKDATE);
    let not_after = time::OffsetDateTime::from(now + LIFETIME);

    let ca_key = KeyPair::generate().map_err(fail)?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, format!("{host}-ca@{unix}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_certificate = ca.self_signed(&ca_key).map_err(fail)?;

    let leaf_key = KeyPair::generate().map_err(fail)?;
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name
        .push(DnType::CommonName, format!("{host}@{unix}"));
    leaf.subject_alt_names = vec![match host.parse::<IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(host.try_into().map_err(fail)?),
    }];
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let issuer = Issuer::new(ca, ca_key);
    let leaf_certificate = leaf.signed_by(&leaf_key, &issuer).map_err(fail)?;
    Ok(Generated {
        certificate_pem: format!("{}{}", leaf_certificate.pem(), ca_certificate.pem()),
        key_pem: leaf_key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makers_racing_on_one_directory_all_get_the_one_pair_written() {
        let root = tempfile::tempdir().expect("dir");
        let dir = root.path().join("pki");
        let made: Vec<_> = std::thread::scope(|scope| {
            let makers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| load_or_create(&dir, "racing-node")))
                .collect();
            makers
                .into_iter()
                .map(|maker| maker.join().expect("no panic").expect("made or read"))
                .collect()
        });
        let on_disk = read_chain(&dir.join(CERTIFICATE_FILE)).expect("certificate");
        for pair in &made {
            assert_eq!(pair.chain, on_disk, "every maker serves the pair on disk");
        }
        let key = read_key(&dir.join(KEY_FILE)).expect("key");
        assert!(
            made.iter()
                .all(|pair| pair.key.secret_der() == key.secret_der()),
            "every maker has the key on disk"
        );
    }
}
