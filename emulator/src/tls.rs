//! HTTPS as kube-apiserver serves it: a serving certificate from the cluster CA, and client
//! certificates optional but verified against that CA (`--client-ca-file`), so a connection
//! presents a node's certificate, a bootstrap token, or nothing. A verified certificate's
//! subject is kept with its connection for authentication (x509: CN the user, O the groups).

use std::any::Any;
use std::sync::Arc;
use std::time::SystemTime;

use actix_web::dev::Extensions;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::certificates::authority::{AuthorityError, ClusterCa};
use crate::config::User;
use crate::http::CertificateUser;

/// Why HTTPS could not be set up (a bug or a broken crypto provider; not retryable).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Authority(#[from] AuthorityError),
    #[error("cannot read the generated certificates: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("cannot configure TLS: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("cannot configure client verification: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// The server's TLS configuration: serving certificate for 127.0.0.1 and localhost from `ca`,
/// optional client certificates verified against it.
pub fn server_config(ca: &ClusterCa, now: SystemTime) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.pem().as_bytes())?)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()?;
    let serving = ca.serving_pair(now)?;
    let chain = vec![CertificateDer::from_pem_slice(
        serving.certificate_pem.as_bytes(),
    )?];
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// actix-web's `on_connect`: the verified client certificate's user, kept in the
/// connection's data.
pub fn remember_client_certificate(connection: &dyn Any, data: &mut Extensions) {
    type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
    let Some(stream) = connection.downcast_ref::<Tls>() else {
        return;
    };
    let (_, session) = stream.get_ref();
    let user = session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| certificate_user(leaf));
    // Only verified chains get here (the verifier refuses the others at the handshake).
    if let Some(user) = user {
        data.insert(user);
    }
}

/// x509 authentication's user of a (verified) certificate: CN the name, each O a group.
pub fn certificate_user(certificate: &[u8]) -> Option<CertificateUser> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate).ok()?;
    let subject = parsed.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    groups.push("system:authenticated".into());
    let not_after = u64::try_from(parsed.validity().not_after.timestamp()).ok()?;
    Some(CertificateUser {
        user: User { name, groups },
        not_after: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(not_after),
    })
}
