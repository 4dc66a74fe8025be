//! One certificate request as the kubelet makes it: a CSR for the [`Template`]'s subject and
//! SANs to its [`Purpose`]'s signer with its usages, then a watch until it is issued, denied,
//! failed or deleted, with the kubelet's error texts. The certificate manager's requests have
//! a fresh ECDSA P-256 key each and `generateName: csr-`; the bootstrap without rotation keeps
//! its key and names the CSR from it (`node-csr-<digest>`), so one sent again finds the CSR
//! already made (`AlreadyExists`), checks that it is the same request (`ensureCompatible`)
//! and waits on it (`csr.RequestCertificate`).

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::wait::await_condition;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};

use super::compatible;
use super::csr_name::digested_name;
use super::template::{Purpose, Template};

/// `certificateWaitTimeout`: how long a rotation waits for its CSR.
pub const ROTATION_WAIT: Duration = Duration::from_secs(15 * 60);
/// How long the bootstrap waits for its CSR (`LoadClientCert`'s 3600 s).
pub const BOOTSTRAP_WAIT: Duration = Duration::from_secs(3600);

/// Why no certificate came of a request. `Denied` and `Failed` need someone to act; the
/// others may pass with a retry.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("cannot make a key and certificate request: {0}")]
    Key(#[source] rcgen::Error),
    #[error("unable to create a csr, no template available")]
    NoTemplate,
    #[error("cannot create the certificate signing request: {0}")]
    Create(#[source] kube::Error),
    #[error("cannot retrieve certificate signing request: {0}")]
    Retrieve(#[source] kube::Error),
    #[error("retrieved csr is not compatible: {0}")]
    Incompatible(#[source] compatible::IncompatibleCsr),
    #[error("csr {0:?} changed UIDs")]
    ChangedUid(String),
    #[error("certificate signing request is denied, reason: {reason}, message: {message}")]
    Denied { reason: String, message: String },
    #[error("certificate signing request failed, reason: {reason}, message: {message}")]
    Failed { reason: String, message: String },
    #[error("csr {0:?} was deleted")]
    Deleted(String),
    #[error("timed out after {seconds} s waiting for csr {name:?} to be approved and issued")]
    Timeout { name: String, seconds: u64 },
    #[error("cannot watch csr {name:?}: {source}")]
    Watch {
        name: String,
        #[source]
        source: kube::runtime::wait::Error,
    },
}

impl RequestError {
    /// The certificate manager's `updateServerError`: whether this failure says the API server
    /// itself answers (401, which a TLS-terminating proxy may send, 403 and 404 do; 5xx,
    /// transport errors and everything else do not).
    pub fn server_responsive(&self) -> bool {
        matches!(self, Self::Create(kube::Error::Api(status)) | Self::Retrieve(kube::Error::Api(status)) if matches!(status.code, 401 | 403 | 404))
    }

    /// Whether the API server refused the credentials the request was sent with (401).
    pub fn unauthorized(&self) -> bool {
        matches!(self, Self::Create(kube::Error::Api(status)) | Self::Retrieve(kube::Error::Api(status)) if status.code == 401)
    }
}

/// Which key a request is made with, and so what its CSR is called.
pub enum RequestKey {
    /// A new key for this request; the API server names the CSR (`generateName: csr-`).
    Fresh,
    /// A key kept across restarts; the CSR is named from it and the template
    /// ([`digested_name`]), so the same request sent again is the same CSR.
    Kept(Box<KeyPair>),
}

/// A certificate just issued, with the key it was requested for.
#[derive(Debug)]
pub struct Issued {
    pub certificate_pem: String,
    pub key_pem: String,
}

/// The request's PKCS#10 text for `key` (`MakeCSRFromTemplate`).
pub(super) fn signing_request(template: &Template, key: &KeyPair) -> Result<String, RequestError> {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, template.common_name.as_str());
    params
        .distinguished_name
        .push(DnType::OrganizationName, template.organization.as_str());
    for dns in &template.dns_names {
        let name = dns.as_str().try_into().map_err(RequestError::Key)?;
        params.subject_alt_names.push(SanType::DnsName(name));
    }
    for ip in &template.ips {
        params.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    params
        .serialize_request(key)
        .and_then(|r| r.pem())
        .map_err(RequestError::Key)
}

/// Requests a `purpose` certificate for `template` with `key` through `client` (bootstrap
/// or node credentials) and waits up to `wait` for it.
pub async fn request_certificate(
    client: kube::Client,
    purpose: Purpose,
    template: &Template,
    key: RequestKey,
    wait: Duration,
) -> Result<Issued, RequestError> {
    let (key, name) = match key {
        RequestKey::Fresh => (
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(RequestError::Key)?,
            None,
        ),
        RequestKey::Kept(key) => {
            let name = digested_name(
                &rcgen::PublicKeyData::subject_public_key_info(key.as_ref()),
                template,
                &purpose.usages(),
            );
            (*key, Some(name))
        }
    };
    let request = signing_request(template, &key)?;
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: name.is_none().then(|| "csr-".into()),
            name: name.clone(),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.clone().into_bytes()),
            signer_name: purpose.signer().into(),
            usages: Some(purpose.usages().map(String::from).to_vec()),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    let api = kube::Api::<CertificateSigningRequest>::all(client);
    let (name, uid) = match (api.create(&PostParams::default(), &csr).await, name) {
        (Ok(created), _) => {
            let name = created.metadata.name.unwrap_or_default();
            tracing::info!(csr = %name, "certificate signing request sent; waiting for it to be approved and issued");
            (name, created.metadata.uid)
        }
        (Err(kube::Error::Api(status)), Some(name)) if status.is_already_exists() => {
            tracing::info!(csr = %name, "csr for this node already exists, reusing");
            let existing = api.get(&name).await.map_err(RequestError::Retrieve)?;
            compatible::ensure_compatible(&existing, &request, purpose.signer(), &key)
                .map_err(RequestError::Incompatible)?;
            tracing::info!(csr = %name, "csr for this node is still valid");
            (name, existing.metadata.uid)
        }
        (Err(error), _) => return Err(RequestError::Create(error)),
    };
    let other_uid = |csr: &CertificateSigningRequest| csr.metadata.uid != uid;
    let decided = |csr: Option<&CertificateSigningRequest>| match csr {
        None => true,
        Some(csr) => other_uid(csr) || outcome(csr).is_some(),
    };
    let waited = tokio::time::timeout(wait, await_condition(api, &name, decided)).await;
    let csr = match waited {
        Err(_) => {
            return Err(RequestError::Timeout {
                name,
                seconds: wait.as_secs(),
            });
        }
        Ok(Err(source)) => return Err(RequestError::Watch { name, source }),
        Ok(Ok(None)) => return Err(RequestError::Deleted(name)),
        Ok(Ok(Some(csr))) if other_uid(&csr) => return Err(RequestError::ChangedUid(name)),
        Ok(Ok(Some(csr))) => csr,
    };
    match outcome(&csr) {
        Some(Ok(certificate)) => Ok(Issued {
            certificate_pem: certificate,
            key_pem: key.serialize_pem(),
        }),
        Some(Err(error)) => Err(error),
        None => Err(RequestError::Deleted(name)),
    }
}

/// `waitForCertificate`'s verdict on one state of the CSR: the certificate once approved and
/// issued, the error once denied or failed, nothing yet otherwise.
fn outcome(csr: &CertificateSigningRequest) -> Option<Result<String, RequestError>> {
    let status = csr.status.as_ref()?;
    for condition in status.conditions.iter().flatten() {
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        match condition.type_.as_str() {
            "Denied" => {
                return Some(Err(RequestError::Denied {
                    reason: text(&condition.reason),
                    message: text(&condition.message),
                }));
            }
            "Failed" => {
                return Some(Err(RequestError::Failed {
                    reason: text(&condition.reason),
                    message: text(&condition.message),
                }));
            }
            _ => {}
        }
    }
    let approved = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Approved");
    let certificate = status.certificate.as_ref().filter(|c| !c.0.is_empty())?;
    approved.then(|| Ok(String::from_utf8_lossy(&certificate.0).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };
    use rustls::pki_types::pem::PemObject as _;

    fn with(conditions: &[(&str, &str)], certificate: &str) -> CertificateSigningRequest {
        CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                certificate: Some(ByteString(certificate.as_bytes().to_vec())),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(kind, reason)| CertificateSigningRequestCondition {
                            type_: (*kind).into(),
                            status: "True".into(),
                            reason: Some((*reason).into()),
                            message: Some("m".into()),
                            ..CertificateSigningRequestCondition::default()
                        })
                        .collect(),
                ),
            }),
            ..CertificateSigningRequest::default()
        }
    }

    #[test]
    fn issued_denied_and_failed_requests_end_the_wait() {
        assert!(outcome(&with(&[("Approved", "AutoApproved")], "")).is_none());
        assert!(matches!(
            outcome(&with(&[("Approved", "AutoApproved")], "PEM")),
            Some(Ok(pem)) if pem == "PEM"
        ));
        let denied = outcome(&with(&[("Denied", "Nope")], "")).and_then(Result::err);
        assert_eq!(
            denied.map(|e| e.to_string()).as_deref(),
            Some("certificate signing request is denied, reason: Nope, message: m")
        );
        let failed = outcome(&with(
            &[("Approved", "A"), ("Failed", "SignerValidationFailure")],
            "",
        ))
        .and_then(Result::err);
        assert_eq!(
            failed.map(|e| e.to_string()).as_deref(),
            Some("certificate signing request failed, reason: SignerValidationFailure, message: m")
        );
    }

    #[test]
    fn the_request_names_the_node_in_the_nodes_group() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
        let pem = signing_request(&Template::client("n1"), &key).expect("a request");
        let der = rustls::pki_types::CertificateSigningRequestDer::from_pem_slice(pem.as_bytes());
        let parsed = rcgen::CertificateSigningRequestParams::from_der(&der.expect("PEM"))
            .expect("a signed request");
        let subject: Vec<String> = parsed
            .params
            .distinguished_name
            .iter()
            .map(|(kind, value)| format!("{kind:?}={value:?}"))
            .collect();
        assert_eq!(subject.len(), 2);
        assert!(subject[0].contains("system:node:n1"));
        assert!(subject[1].contains("system:nodes"));
        assert_eq!(
            parsed.public_key.algorithm(),
            &rcgen::PKCS_ECDSA_P256_SHA256
        );
        assert!(parsed.params.subject_alt_names.is_empty());
    }

    #[test]
    fn a_serving_request_carries_the_templates_sans() {
        let template = Template {
            dns_names: vec!["n1".into()],
            ips: vec![[192, 0, 2, 1].into()],
            ..Template::client("n1")
        };
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
        let pem = signing_request(&template, &key).expect("a request");
        let der = rustls::pki_types::CertificateSigningRequestDer::from_pem_slice(pem.as_bytes());
        let parsed = rcgen::CertificateSigningRequestParams::from_der(&der.expect("PEM"))
            .expect("a signed request");
        let sans: Vec<String> = parsed
            .params
            .subject_alt_names
            .iter()
            .map(|san| format!("{san:?}"))
            .collect();
        assert_eq!(sans.len(), 2, "{sans:?}");
        assert!(
            sans[0].contains("n1") && sans[1].contains("192.0.2.1"),
            "{sans:?}"
        );
    }
}
