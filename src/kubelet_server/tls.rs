//! The kubelet API's TLS: the serving certificate (the configured files, the self-signed
//! pair under the cert dir, or under `serverTLSBootstrap` the one the API server issues, which
//! rotation swaps under the listener) and a rustls configuration that, like the kubelet's
//! `RequestClientCert`, asks for a client certificate without judging it: the x509
//! authenticator decides who it is (`authn.rs`), so a stranger's certificate gets a 401, not a
//! failed handshake.

use std::{path::Path, sync::Arc};

use rustls::{
    DistinguishedName, ServerConfig, SignatureScheme,
    client::danger::HandshakeSignatureValid,
    crypto::WebPkiSupportedAlgorithms,
    pki_types::{CertificateDer, PrivateKeyDer, UnixTime, pem::PemObject},
    server::danger::{ClientCertVerified, ClientCertVerifier},
};

use super::{self_signed, x509::ClientCa};
use crate::apiserver_client::credentials::{
    CertificateStore, Purpose, ServingIdentity, store::StoredPair,
};
use crate::config::{Config, Settings};

/// Why the kubelet API has no usable TLS configuration. Retrying helps only once the files
/// change.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tlsCertFile {}: {reason}", .path.display())]
    Certificate {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("tlsPrivateKeyFile {}: {reason}", .path.display())]
    PrivateKey {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("tlsCertFile {} and tlsPrivateKeyFile {}: {reason}", .certificate.display(), .key.display())]
    Mismatch {
        certificate: std::path::PathBuf,
        key: std::path::PathBuf,
        reason: String,
    },
    #[error("authentication.x509.clientCAFile {}: {reason}", .path.display())]
    ClientCa {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error(transparent)]
    SelfSigned(#[from] self_signed::SelfSignedError),
    #[error("serverTLSBootstrap: {0}")]
    ServingStore(String),
}

/// A serving certificate chain (leaf first) and its key.
pub struct ServingCertificate {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// What the listener serves: one certificate for its whole life, or the one rotation keeps.
pub enum Serving {
    Fixed(ServingCertificate),
    Rotated(Arc<ServingIdentity>),
}

/// Reads the PEM certificate chain at `path` (the label in errors is `tlsCertFile`).
pub fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let refuse = |reason: String| TlsError::Certificate {
        path: path.to_owned(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|error| refuse(pem_reason(&error)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| refuse(pem_reason(&error)))?;
    if chain.is_empty() {
        return Err(refuse("holds no PEM CERTIFICATE block".to_owned()));
    }
    Ok(chain)
}

/// Reads the PEM private key at `path`.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| TlsError::PrivateKey {
        path: path.to_owned(),
        reason: pem_reason(&error),
    })
}

fn pem_reason(error: &rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::Io(io) => io.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => {
            "holds no PEM block of the expected kind".to_owned()
        }
        other => format!("not valid PEM: {other:?}"),
    }
}

/// What `settings` serve: under `serverTLSBootstrap` the rotated certificate, starting from
/// the stored `kubelet-server-current.pem` or else the configured files (`NewFileStore`'s
/// order), and from nothing (every handshake refused until one is issued) when neither is
/// there or valid; otherwise the configured files, or the self-signed pair for `host` under
/// the cert dir (made on first use, as the kubelet does).
pub fn serving_certificate(settings: &Settings, host: &str) -> Result<Serving, TlsError> {
    let config = &settings.config;
    let files = match (&config.tls_cert_file, &config.tls_private_key_file) {
        (Some(certificate), Some(key)) => Some((certificate, key)),
        _ => None,
    };
    if config.server_tls_bootstrap {
        let identity = Arc::new(ServingIdentity::default());
        let store = CertificateStore::for_purpose(settings.cert_dir(), Purpose::Serving);
        let stored = store
            .current()
            .map_err(|error| TlsError::ServingStore(error.to_string()))?;
        let initial = match (stored, files) {
            (Some(pair), _) => Some(pair),
            (None, Some((certificate, key))) => Some(pair_from_files(certificate, key)?),
            (None, None) => None,
        };
        let now = std::time::SystemTime::now();
        if let Some(pair) = initial.filter(|pair| unexpired(pair, now)) {
            (identity.install(&pair)).map_err(|error| TlsError::ServingStore(error.to_string()))?;
        }
        return Ok(Serving::Rotated(identity));
    }
    match files {
        Some((certificate, key)) => Ok(Serving::Fixed(ServingCertificate {
            chain: read_chain(certificate)?,
            key: read_key(key)?,
        })),
        None => Ok(Serving::Fixed(self_signed::load_or_create(
            &config.cert_dir_on_host(),
            host,
        )?)),
    }
}

/// `tlsCertFile` and `tlsPrivateKeyFile` as one stored pair.
fn pair_from_files(certificate: &Path, key: &Path) -> Result<StoredPair, TlsError> {
    let text = |path: &Path| std::fs::read_to_string(path).map_err(|error| error.to_string());
    let chain = text(certificate).map_err(|reason| TlsError::Certificate {
        path: certificate.to_owned(),
        reason,
    })?;
    let key_pem = text(key).map_err(|reason| TlsError::PrivateKey {
        path: key.to_owned(),
        reason,
    })?;
    StoredPair::parse(&format!("{}\n{}", chain.trim_end(), key_pem)).map_err(|error| {
        TlsError::Mismatch {
            certificate: certificate.to_owned(),
            key: key.to_owned(),
            reason: error.to_string(),
        }
    })
}

fn unexpired(pair: &StoredPair, now: std::time::SystemTime) -> bool {
    pair.chain
        .first()
        .and_then(|leaf| crate::apiserver_client::credentials::lifetime::Validity::of(leaf))
        .is_some_and(|validity| !validity.expired_at(now))
}

/// The rustls server configuration: TLS 1.2+ (or 1.3 only) on ring, HTTP/1.1, and a client
/// certificate requested (with the CAs' names as hints) when a client CA is configured.
pub fn server_config(
    config: &Config,
    serving: Serving,
    client_ca: Option<&ClientCa>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] =
        if config.tls_min_version.as_deref() == Some("VersionTLS13") {
            &[&rustls::version::TLS13]
        } else {
            &[&rustls::version::TLS12, &rustls::version::TLS13]
        };
    let mismatch = |reason: String| match (&config.tls_cert_file, &config.tls_private_key_file) {
        (Some(certificate), Some(key)) => TlsError::Mismatch {
            certificate: certificate.clone(),
            key: key.clone(),
            reason,
        },
        _ => TlsError::SelfSigned(self_signed::SelfSignedError::Unusable {
            dir: config.cert_dir_on_host(),
            reason,
        }),
    };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|error| mismatch(error.to_string()))?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(Arc::new(RequestClientCert {
            hints: ca.subjects(),
            algorithms: provider.signature_verification_algorithms,
        })),
        None => builder.with_no_client_auth(),
    };
    let mut server = match serving {
        Serving::Fixed(serving) => builder
            .with_single_cert(serving.chain, serving.key)
            .map_err(|error| mismatch(format!("the key does not fit the certificate ({error})")))?,
        Serving::Rotated(identity) => builder.with_cert_resolver(identity),
    };
    // Upgrades (exec, attach, port-forward) are HTTP/1.1; kube-apiserver asks for it.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(server))
}

/// Checks that the TLS material `config` names can be used, as `check-config` reports;
/// under `serverTLSBootstrap` the stored serving certificate in `<rootDir>/pki` too, when
/// there is one (a `kubelet-server-current.pem` that is not a link is refused at start).
pub fn check(config: &Config) -> Result<(), TlsError> {
    let client_ca = match &config.authentication.x509.client_ca_file {
        Some(path) => Some(ClientCa::read(path)?),
        None => None,
    };
    if config.server_tls_bootstrap {
        CertificateStore::for_purpose(config.cert_dir_on_host(), Purpose::Serving)
            .current()
            .map_err(|error| TlsError::ServingStore(error.to_string()))?;
    }
    if let (Some(certificate), Some(key)) = (&config.tls_cert_file, &config.tls_private_key_file) {
        let serving = ServingCertificate {
            chain: read_chain(certificate)?,
            key: read_key(key)?,
        };
        server_config(config, Serving::Fixed(serving), client_ca.as_ref())?;
    }
    Ok(())
}

/// Asks for a certificate and checks only that the client holds its key; whether the
/// certificate means anything is the authenticator's call.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
