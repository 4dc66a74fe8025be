//! `ensureCompatible` (`client-go/util/certificate/csr`): whether the CSR found under a
//! bootstrap's deterministic name is the request this node would send — the same subject and
//! signer, signed with the key the node kept — and whether what it was issued, if anything,
//! is still valid. Only then does the node wait on it instead of giving up. Pure.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use rcgen::KeyPair;
use rustls::pki_types::pem::PemObject as _;

use super::lifetime::Validity;

/// Why the CSR found under the name is not this node's request, in client-go's words. The
/// node gives up on it (retrying does not help until that CSR is gone).
#[derive(Debug, thiserror::Error)]
pub enum IncompatibleCsr {
    #[error("unable to parse {what} csr: {source}")]
    Pem {
        what: &'static str,
        #[source]
        source: x509_parser::nom::Err<x509_parser::error::PEMError>,
    },
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotARequest,
    #[error("unable to parse {what} csr: {source}")]
    Der {
        what: &'static str,
        #[source]
        source: x509_parser::nom::Err<x509_parser::error::X509Error>,
    },
    #[error("csr subjects differ: new: {found}, orig: {sent}")]
    Subjects { found: String, sent: String },
    #[error("csr signerNames differ: new {found:?}, orig: {sent:?}")]
    Signers { found: String, sent: String },
    #[error("error validating signature new CSR against old key")]
    Signature,
    #[error("error parsing signed certificate for CSR: {0}")]
    IssuedPem(#[source] rustls::pki_types::pem::Error),
    #[error("error parsing signed certificate for CSR")]
    IssuedUnparsable,
    #[error("one of the certificates for the CSR has expired: {not_after}")]
    Expired { not_after: String },
}

fn parse<'a>(
    der: &'a [u8],
    what: &'static str,
) -> Result<x509_parser::certification_request::X509CertificationRequest<'a>, IncompatibleCsr> {
    use x509_parser::prelude::FromDer as _;
    x509_parser::certification_request::X509CertificationRequest::from_der(der)
        .map(|(_, csr)| csr)
        .map_err(|source| IncompatibleCsr::Der { what, source })
}

/// The DER of a `CERTIFICATE REQUEST` PEM block.
fn request_der(pem: &[u8], what: &'static str) -> Result<Vec<u8>, IncompatibleCsr> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|source| IncompatibleCsr::Pem { what, source })?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(IncompatibleCsr::NotARequest);
    }
    Ok(block.contents)
}

/// `ensureCompatible`: the CSR found under the name is the request this node would send — the
/// same subject and signer, signed with this key — and what it was issued, if anything, has
/// not expired.
pub fn ensure_compatible(
    found: &CertificateSigningRequest,
    sent_pem: &str,
    signer: &str,
    key: &KeyPair,
) -> Result<(), IncompatibleCsr> {
    let (found_der, sent_der) = (
        request_der(&found.spec.request.0, "new")?,
        request_der(sent_pem.as_bytes(), "original")?,
    );
    let (found_csr, sent_csr) = (parse(&found_der, "new")?, parse(&sent_der, "original")?);
    let (found_subject, sent_subject) = (
        &found_csr.certification_request_info.subject,
        &sent_csr.certification_request_info.subject,
    );
    if found_subject.as_raw() != sent_subject.as_raw() {
        return Err(IncompatibleCsr::Subjects {
            found: found_subject.to_string(),
            sent: sent_subject.to_string(),
        });
    }
    if !found.spec.signer_name.is_empty() && found.spec.signer_name != signer {
        return Err(IncompatibleCsr::Signers {
            found: found.spec.signer_name.clone(),
            sent: signer.to_owned(),
        });
    }
    let signed_with_this_key = found_csr.verify_signature().is_ok()
        && found_csr
            .certification_request_info
            .subject_pki
            .subject_public_key
            .data
            .as_ref()
            == key.public_key_raw();
    if !signed_with_this_key {
        return Err(IncompatibleCsr::Signature);
    }
    let issued = found.status.as_ref().and_then(|s| s.certificate.as_ref());
    for certificate in issued.into_iter().filter(|c| !c.0.is_empty()) {
        let now = std::time::SystemTime::now();
        for der in rustls::pki_types::CertificateDer::pem_slice_iter(&certificate.0) {
            let der = der.map_err(IncompatibleCsr::IssuedPem)?;
            let validity = Validity::of(&der).ok_or(IncompatibleCsr::IssuedUnparsable)?;
            if validity.expired_at(now) {
                let not_after = jiff::Timestamp::try_from(validity.not_after)
                    .map_or_else(|_| format!("{:?}", validity.not_after), |t| t.to_string());
                return Err(IncompatibleCsr::Expired { not_after });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver_client::credentials::request::signing_request;
    use crate::apiserver_client::credentials::template::Template;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestSpec, CertificateSigningRequestStatus,
    };

    const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

    fn key() -> KeyPair {
        KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key")
    }

    fn found(request: &str, signer: &str) -> CertificateSigningRequest {
        CertificateSigningRequest {
            spec: CertificateSigningRequestSpec {
                request: ByteString(request.as_bytes().to_vec()),
                signer_name: signer.into(),
                ..CertificateSigningRequestSpec::default()
            },
            ..CertificateSigningRequest::default()
        }
    }

    #[test]
    fn the_same_request_with_the_same_key_is_compatible() {
        let key = key();
        let sent = signing_request(&Template::client("n1"), &key).expect("a request");
        // Made again (a restart): another signature, the same request.
        let again = signing_request(&Template::client("n1"), &key).expect("a request");
        assert!(ensure_compatible(&found(&again, SIGNER), &sent, SIGNER, &key).is_ok());
    }

    #[test]
    fn another_key_subject_or_signer_is_not() {
        let key = key();
        let sent = signing_request(&Template::client("n1"), &key).expect("a request");
        let other_key = signing_request(&Template::client("n1"), &self::key()).expect("a request");
        let refusal = |found: &CertificateSigningRequest| {
            ensure_compatible(found, &sent, SIGNER, &key)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refusal(&found(&other_key, SIGNER)),
            "error validating signature new CSR against old key"
        );
        let other_node = signing_request(&Template::client("n2"), &key).expect("a request");
        assert!(refusal(&found(&other_node, SIGNER)).starts_with("csr subjects differ"));
        assert!(refusal(&found(&sent, "example.com/other")).starts_with("csr signerNames differ"));
    }

    #[test]
    fn an_expired_issued_certificate_is_not() {
        let key = key();
        let sent = signing_request(&Template::client("n1"), &key).expect("a request");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 2);
        let expired = params.self_signed(&key).expect("a certificate").pem();
        let mut csr = found(&sent, SIGNER);
        csr.status = Some(CertificateSigningRequestStatus {
            certificate: Some(ByteString(expired.into_bytes())),
            ..CertificateSigningRequestStatus::default()
        });
        let error = ensure_compatible(&csr, &sent, SIGNER, &key).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("one of the certificates for the CSR has expired"),
        );
    }
}
