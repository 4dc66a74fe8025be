//! The cluster CA, made afresh when the emulator starts: it signs the API server's serving
//! certificate, verifies client certificates (kube-apiserver's `--client-ca-file`) and
//! issues the certificates of approved CSRs under kube-controller-manager's signing policy.

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509CertificationRequest};

use super::RequestedSubject;

/// `PermissiveSigningPolicy` as csrsigning configures it: every certificate starts 5 minutes
/// in the past; one shorter-lived than 8 hours ends its full TTL from now, a longer one 5
/// minutes early.
const BACKDATE: Duration = Duration::from_secs(5 * 60);
const SHORT: Duration = Duration::from_secs(8 * 3600);
/// The CA's own lifetime (kubeadm's is 10 years).
const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Why a CA could not be made or a certificate issued.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error("cannot make the cluster CA: {0}")]
    Generate(#[source] rcgen::Error),
    #[error("cannot issue the certificate: {0}")]
    Issue(#[source] rcgen::Error),
}

/// The CA: its certificate and key.
pub struct ClusterCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa").finish_non_exhaustive()
    }
}

/// A certificate and its key, as PEM.
pub struct IssuedPair {
    pub certificate_pem: String,
    pub key_pem: String,
}

impl ClusterCa {
    /// A new self-signed ECDSA P-256 CA named `kubernetes`, as kubeadm names its CA.
    pub fn generate(now: SystemTime) -> Result<Self, AuthorityError> {
        let key = KeyPair::generate().map_err(AuthorityError::Generate)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "kubernetes");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
        ];
        params.not_before = (now - BACKDATE).into();
        params.not_after = (now + CA_LIFETIME).into();
        let certificate = params.self_signed(&key).map_err(AuthorityError::Generate)?;
        Ok(ClusterCa {
            pem: certificate.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A serving certificate for the API server at `127.0.0.1` and `localhost`.
    pub fn serving_pair(&self, now: SystemTime) -> Result<IssuedPair, AuthorityError> {
        let key = KeyPair::generate().map_err(AuthorityError::Generate)?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()])
            .map_err(AuthorityError::Generate)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = (now - BACKDATE).into();
        params.not_after = (now + CA_LIFETIME).into();
        let certificate = params
            .signed_by(&key, &self.issuer)
            .map_err(AuthorityError::Issue)?;
        Ok(IssuedPair {
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A client certificate for `common_name` in `organizations`, as kubeadm issues the API
    /// server's own (`kube-apiserver-kubelet-client` in `system:masters`).
    pub fn client_pair(
        &self,
        common_name: &str,
        organizations: &[&str],
        now: SystemTime,
    ) -> Result<(rcgen::Certificate, KeyPair), AuthorityError> {
        let key = KeyPair::generate().map_err(AuthorityError::Generate)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for organization in organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *organization);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = (now - BACKDATE).into();
        params.not_after = (now + CA_LIFETIME).into();
        let certificate = params
            .signed_by(&key, &self.issuer)
            .map_err(AuthorityError::Issue)?;
        Ok((certificate, key))
    }

    /// Signs `request` (a verified CSR) for `ttl` with `usages` as the CSR's `spec.usages`
    /// names them, as csrsigning's CA does: the subject and SANs from the request, the
    /// validity and usages from the policy.
    pub fn sign(
        &self,
        request: &CertificateSigningRequestParams,
        usages: &[String],
        ttl: Duration,
        now: SystemTime,
    ) -> Result<String, AuthorityError> {
        let mut request = request.clone();
        let params = &mut request.params;
        params.is_ca = IsCa::ExplicitNoCa;
        params.not_before = (now - BACKDATE).into();
        params.not_after = if ttl < SHORT {
            now + ttl
        } else {
            now + ttl - BACKDATE
        }
        .into();
        params.serial_number = Some(SerialNumber::from_slice(&rand::random::<[u8; 16]>()));
        params.key_usages = usages.iter().filter_map(|u| key_usage(u)).collect();
        params.extended_key_usages = usages.iter().filter_map(|u| extended_usage(u)).collect();
        params.use_authority_key_identifier_extension = true;
        request
            .signed_by(&self.issuer)
            .map(|certificate| certificate.pem())
            .map_err(AuthorityError::Issue)
    }
}

fn key_usage(usage: &str) -> Option<KeyUsagePurpose> {
    Some(match usage {
        "signing" | "digital signature" => KeyUsagePurpose::DigitalSignature,
        "content commitment" => KeyUsagePurpose::ContentCommitment,
        "key encipherment" => KeyUsagePurpose::KeyEncipherment,
        "key agreement" => KeyUsagePurpose::KeyAgreement,
        "data encipherment" => KeyUsagePurpose::DataEncipherment,
        "cert sign" => KeyUsagePurpose::KeyCertSign,
        "crl sign" => KeyUsagePurpose::CrlSign,
        "encipher only" => KeyUsagePurpose::EncipherOnly,
        "decipher only" => KeyUsagePurpose::DecipherOnly,
        _ => return None,
    })
}

fn extended_usage(usage: &str) -> Option<ExtendedKeyUsagePurpose> {
    Some(match usage {
        "any" => ExtendedKeyUsagePurpose::Any,
        "server auth" => ExtendedKeyUsagePurpose::ServerAuth,
        "client auth" => ExtendedKeyUsagePurpose::ClientAuth,
        "code signing" => ExtendedKeyUsagePurpose::CodeSigning,
        "email protection" | "s/mime" => ExtendedKeyUsagePurpose::EmailProtection,
        "timestamping" => ExtendedKeyUsagePurpose::TimeStamping,
        "ocsp signing" => ExtendedKeyUsagePurpose::OcspSigning,
        _ => return None,
    })
}

/// Why `spec.request` is not a usable CSR, in the words of Go's `ParseCSR` and
/// `CheckSignature`.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotPem,
    #[error("x509: malformed certificate request")]
    Malformed,
    #[error("x509: signature verification failure")]
    Signature,
}

/// The DER of the first PEM block of `request` when it is a `CERTIFICATE REQUEST`.
fn request_der(request: &[u8]) -> Result<Vec<u8>, RequestError> {
    let text = std::str::from_utf8(request).map_err(|_| RequestError::NotPem)?;
    let begin = "-----BEGIN CERTIFICATE REQUEST-----";
    let end = "-----END CERTIFICATE REQUEST-----";
    let start = text.find("-----BEGIN ").ok_or(RequestError::NotPem)?;
    let body = text[start..]
        .strip_prefix(begin)
        .ok_or(RequestError::NotPem)?;
    let body = &body[..body.find(end).ok_or(RequestError::NotPem)?];
    let base64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .map_err(|_| RequestError::NotPem)
}

/// Parses and verifies `spec.request` (PEM): its subject as the approver reads it.
pub fn parse_request(request: &[u8]) -> Result<RequestedSubject, RequestError> {
    let der = request_der(request)?;
    let (_, csr) = X509CertificationRequest::from_der(&der).map_err(|_| RequestError::Malformed)?;
    csr.verify_signature()
        .map_err(|_| RequestError::Signature)?;
    let subject = &csr.certification_request_info.subject;
    let strings = |iter: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue>| {
        iter.filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect::<Vec<_>>()
    };
    let mut parsed = RequestedSubject {
        common_name: strings(&mut subject.iter_common_name())
            .into_iter()
            .next()
            .unwrap_or_default(),
        organizations: strings(&mut subject.iter_organization()),
        ..RequestedSubject::default()
    };
    for extension in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(names) = extension {
            for name in &names.general_names {
                match name {
                    GeneralName::DNSName(_) => parsed.dns_names += 1,
                    GeneralName::RFC822Name(_) => parsed.emails += 1,
                    GeneralName::IPAddress(_) => parsed.ips += 1,
                    GeneralName::URI(_) => parsed.uris += 1,
                    _ => {}
                }
            }
        }
    }
    Ok(parsed)
}

/// `spec.request` as rcgen signs it.
pub fn signable_request(request: &[u8]) -> Result<CertificateSigningRequestParams, RequestError> {
    let der = request_der(request)?;
    CertificateSigningRequestParams::from_der(&der.into()).map_err(|_| RequestError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_request(name: &str) -> String {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("system:node:{name}"));
        params
            .distinguished_name
            .push(DnType::OrganizationName, "system:nodes");
        params
            .serialize_request(&key)
            .and_then(|r| r.pem())
            .expect("a CSR")
    }

    #[test]
    fn parses_the_subject_and_signs_with_the_policy_validity() {
        let now = SystemTime::now();
        let ca = ClusterCa::generate(now).expect("a CA");
        let pem = node_request("n1");
        let subject = parse_request(pem.as_bytes()).expect("parsed");
        assert_eq!(subject.common_name, "system:node:n1");
        assert_eq!(subject.organizations, vec!["system:nodes".to_string()]);
        let request = signable_request(pem.as_bytes()).expect("signable");
        let usages = vec!["digital signature".to_string(), "client auth".to_string()];
        let issued = ca
            .sign(&request, &usages, Duration::from_secs(600), now)
            .expect("issued");
        let der = request_der(
            issued
                .replace("CERTIFICATE-----", "CERTIFICATE REQUEST-----")
                .as_bytes(),
        )
        .expect("PEM");
        let (_, certificate) =
            x509_parser::certificate::X509Certificate::from_der(&der).expect("a certificate");
        let validity = certificate.validity();
        let lifetime = validity.not_after.timestamp() - validity.not_before.timestamp();
        // Short-lived: backdated 5 minutes, not cut at the end.
        assert_eq!(lifetime, 600 + 300);
    }

    #[test]
    fn refuses_what_is_not_a_signed_request() {
        assert_eq!(parse_request(b"garbage"), Err(RequestError::NotPem));
        let pem = node_request("n1");
        // One character of the signature changed.
        let at = pem.find("-----END").expect("PEM end") - 8;
        let mut tampered = pem.into_bytes();
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        assert_eq!(parse_request(&tampered), Err(RequestError::Signature));
    }
}
