//! `ensureCompatible` (`client-go/util/certificate/csr`): whether the CSR found under a
//! bootstrap's deterministic name is the request this node would send — the same subject and
//! signer, signed with the key the node kept — and whether what it was issued, if anything,
//! is still valid. Only then does the node wait on it instead of giving up. Pure.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use rcgen::KeyPair;
use rustls::pki_types::pem::PemObject as _;

use super::lifetime::Validity;

fn parse<'a>(
    der: &'a [u8],
    what: &str,
) -> Result<x509_parser::certification_request::X509CertificationRequest<'a>, String> {
    use x509_parser::prelude::FromDer as _;
    x509_parser::certification_request::X509CertificationRequest::from_der(der)
        .map(|(_, csr)| csr)
        .map_err(|e| format!("unable to parse {what} csr: {e}"))
}

/// `ensureCompatible`: the CSR found under the name is the request this node would send — the
/// same subject and signer, signed with this key — and what it was issued, if anything, has
/// not expired.
pub fn ensure_compatible(
    found: &CertificateSigningRequest,
    sent_pem: &str,
    signer: &str,
    key: &KeyPair,
) -> Result<(), String> {
    let der = |pem: &[u8], what: &str| -> Result<Vec<u8>, String> {
        let (_, block) = x509_parser::pem::parse_x509_pem(pem)
            .map_err(|e| format!("unable to parse {what} csr: {e}"))?;
        if block.label != "CERTIFICATE REQUEST" {
            return Err("PEM block type must be CERTIFICATE REQUEST".into());
        }
        Ok(block.contents)
    };
    let (found_der, sent_der) = (
        der(&found.spec.request.0, "new")?,
        der(sent_pem.as_bytes(), "original")?,
    );
    let (found_csr, sent_csr) = (parse(&found_der, "new")?, parse(&sent_der, "original")?);
    let (found_subject, sent_subject) = (
        &found_csr.certification_request_info.subject,
        &sent_csr.certification_request_info.subject,
    );
    if found_subject.as_raw() != sent_subject.as_raw() {
        return Err(format!(
            "csr subjects differ: new: {found_subject}, orig: {sent_subject}"
        ));
    }
    if !found.spec.signer_name.is_empty() && found.spec.signer_name != signer {
        return Err(format!(
            "csr signerNames differ: new {:?}, orig: {signer:?}",
            found.spec.signer_name
        ));
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
        return Err("error validating signature new CSR against old key".into());
    }
    let issued = found.status.as_ref().and_then(|s| s.certificate.as_ref());
    for certificate in issued.into_iter().filter(|c| !c.0.is_empty()) {
        let now = std::time::SystemTime::now();
        for der in rustls::pki_types::CertificateDer::pem_slice_iter(&certificate.0) {
            let der = der.map_err(|e| format!("error parsing signed certificate for CSR: {e}"))?;
            let validity = Validity::of(&der).ok_or("error parsing signed certificate for CSR")?;
            if validity.expired_at(now) {
                let not_after = jiff::Timestamp::try_from(validity.not_after)
                    .map_or_else(|_| format!("{:?}", validity.not_after), |t| t.to_string());
                return Err(format!(
                    "one of the certificates for the CSR has expired: {not_after}"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_api::credentials::request::signing_request;
    use crate::kube_api::credentials::template::Template;
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
        assert_eq!(
            ensure_compatible(&found(&again, SIGNER), &sent, SIGNER, &key),
            Ok(())
        );
    }

    #[test]
    fn another_key_subject_or_signer_is_not() {
        let key = key();
        let sent = signing_request(&Template::client("n1"), &key).expect("a request");
        let other_key = signing_request(&Template::client("n1"), &self::key()).expect("a request");
        let error = ensure_compatible(&found(&other_key, SIGNER), &sent, SIGNER, &key);
        assert_eq!(
            error,
            Err("error validating signature new CSR against old key".into())
        );
        let other_node = signing_request(&Template::client("n2"), &key).expect("a request");
        let error = ensure_compatible(&found(&other_node, SIGNER), &sent, SIGNER, &key);
        assert!(error.is_err_and(|e| e.starts_with("csr subjects differ")));
        let error = ensure_compatible(&found(&sent, "example.com/other"), &sent, SIGNER, &key);
        assert!(error.is_err_and(|e| e.starts_with("csr signerNames differ")));
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
        let error = ensure_compatible(&csr, &sent, SIGNER, &key);
        assert!(
            error.is_err_and(|e| e.starts_with("one of the certificates for the CSR has expired")),
        );
    }
}
