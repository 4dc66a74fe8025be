//! The kubelet API's TLS: the serving certificate (the configured files, or the self-signed
//! pair under the cert dir) and a rustls configuration that, like the kubelet's
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
use crate::config::Config;

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
}

/// A serving certificate chain (leaf first) and its key.
pub struct ServingCertificate {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
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

/// The serving certificate `config` names, or the self-signed one for `host` under the cert
/// dir (made on first use, as the kubelet does).
pub fn serving_certificate(config: &Config, host: &str) -> Result<ServingCertificate, TlsError> {
    match (&config.tls_cert_file, &config.tls_private_key_file) {
        (Some(certificate), Some(key)) => Ok(ServingCertificate {
            chain: read_chain(certificate)?,
            key: read_key(key)?,
        }),
        _ => Ok(self_signed::load_or_create(
            &config.cert_dir_on_host(),
            host,
        )?),
    }
}

/// The rustls server configuration: TLS 1.2+ (or 1.3 only) on ring, HTTP/1.1, and a client
/// certificate requested (with the CAs' names as hints) when a client CA is configured.
pub fn server_config(
    config: &Config,
    serving: ServingCertificate,
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
    let mut server = builder
        .with_single_cert(serving.chain, serving.key)
        .map_err(|error| mismatch(format!("the key does not fit the certificate ({error})")))?;
    // Upgrades (exec, attach, port-forward) are HTTP/1.1; kube-apiserver asks for it.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(server))
}

/// Checks that the TLS material `config` names can be used, as `check-config` reports.
pub fn check(config: &Config) -> Result<(), TlsError> {
    let client_ca = match &config.authentication.x509.client_ca_file {
        Some(path) => Some(ClientCa::read(path)?),
        None => None,
    };
    if let (Some(certificate), Some(key)) = (&config.tls_cert_file, &config.tls_private_key_file) {
        let serving = ServingCertificate {
            chain: read_chain(certificate)?,
            key: read_key(key)?,
        };
        server_config(config, serving, client_ca.as_ref())?;
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
