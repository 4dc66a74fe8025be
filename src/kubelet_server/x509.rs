//! The x509 authenticator: a client certificate that chains to `clientCAFile` (with the
//! client-auth usage when it names usages) is the user of its Subject CN, in the groups of its
//! Subject O values, as kube-apiserver's and the kubelet's x509 authenticator read them.

use std::path::Path;

use rustls::{
    DistinguishedName,
    pki_types::{CertificateDer, TrustAnchor, UnixTime},
};

use super::tls::TlsError;

/// The CAs of `authentication.x509.clientCAFile`.
pub struct ClientCa {
    anchors: Vec<TrustAnchor<'static>>,
}

/// Who a verified certificate names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateUser {
    pub name: String,
    pub groups: Vec<String>,
}

/// Why a presented certificate does not authenticate (the request then gets a 401).
#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    #[error("the client certificate does not verify: {0}")]
    Unverified(String),
    #[error("the client certificate's subject has no common name")]
    NoCommonName,
}

impl ClientCa {
    pub fn read(path: &Path) -> Result<Self, TlsError> {
        let refuse = |reason: String| TlsError::ClientCa {
            path: path.to_owned(),
            reason,
        };
        let certificates =
            super::tls::read_chain(path).map_err(|error| refuse(strip_label(&error)))?;
        let anchors = certificates
            .iter()
            .map(|der| {
                webpki::anchor_from_trusted_cert(der)
                    .map(|anchor| anchor.to_owned())
                    .map_err(|error| refuse(format!("not a usable CA certificate: {error}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { anchors })
    }

    /// The CAs' names, sent to clients as the acceptable issuers.
    pub fn subjects(&self) -> Vec<DistinguishedName> {
        self.anchors
            .iter()
            .map(|anchor| DistinguishedName::in_sequence(anchor.subject.as_ref()))
            .collect()
    }

    /// The user `chain` (leaf first) names, when it verifies against these CAs at `now`.
    pub fn authenticate(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<CertificateUser, X509Error> {
        let unverified = |error: webpki::Error| X509Error::Unverified(error.to_string());
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(X509Error::Unverified("no certificate".to_owned()));
        };
        let leaf = webpki::EndEntityCert::try_from(leaf).map_err(unverified)?;
        leaf.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &self.anchors,
            intermediates,
            now,
            webpki::KeyUsage::client_auth(),
            None,
            None,
        )
        .map_err(unverified)?;
        let subject = subject_attributes(leaf.subject())
            .ok_or_else(|| X509Error::Unverified("the subject does not parse".to_owned()))?;
        let name = subject
            .iter()
            .find(|(oid, _)| *oid == COMMON_NAME)
            .map(|(_, value)| value.clone())
            .filter(|name| !name.is_empty())
            .ok_or(X509Error::NoCommonName)?;
        let groups = subject
            .into_iter()
            .filter(|(oid, _)| *oid == ORGANIZATION)
            .map(|(_, value)| value)
            .collect();
        Ok(CertificateUser { name, groups })
    }
}

/// The error's text without the `tlsCertFile PATH:` it carries from the shared reader.
fn strip_label(error: &TlsError) -> String {
    match error {
        TlsError::Certificate { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// 2.5.4.3 and 2.5.4.10, DER-encoded.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// The (attribute OID, string value) pairs of a Name's RDNSequence contents (the SETs of
/// `SEQUENCE { OID, value }`), in order; `None` when the DER is malformed.
fn subject_attributes(name: &[u8]) -> Option<Vec<(&[u8], String)>> {
    let mut attributes = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let (tag, set, after) = tlv(rest)?;
        rest = after;
        if tag != 0x31 {
            return None;
        }
        let mut members = set;
        while !members.is_empty() {
            let (tag, sequence, after) = tlv(members)?;
            members = after;
            if tag != 0x30 {
                return None;
            }
            let (oid_tag, oid, value) = tlv(sequence)?;
            let (_, value, _) = tlv(value)?;
            if oid_tag != 0x06 {
                return None;
            }
            attributes.push((oid, String::from_utf8_lossy(value).into_owned()));
        }
    }
    Some(attributes)
}

/// One DER tag-length-value: the tag, the value and what follows it.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |length, &byte| (length << 8) | usize::from(byte));
        (length, &rest[count..])
    };
    (rest.len() >= length).then(|| (tag, &rest[..length], &rest[length..]))
}

#[cfg(test)]
mod tests {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    use super::*;

    struct Pki {
        ca_pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn pki(name: &str) -> Pki {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = params.self_signed(&key).expect("ca").pem();
        Pki {
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    fn client(pki: &Pki, cn: &str, orgs: &[&str], usage: ExtendedKeyUsagePurpose) -> Vec<u8> {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![usage];
        params
            .signed_by(&key, &pki.issuer)
            .expect("sign")
            .der()
            .to_vec()
    }

    fn ca_file(pki: &Pki) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &pki.ca_pem).expect("write");
        (dir, path)
    }

    #[test]
    fn a_certificate_of_the_client_ca_is_its_common_name_in_its_organizations() {
        let cluster = pki("cluster-ca");
        let (_dir, path) = ca_file(&cluster);
        let ca = ClientCa::read(&path).expect("ca");
        let der = client(
            &cluster,
            "kube-apiserver-kubelet-client",
            &["system:masters"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let user = ca
            .authenticate(&[CertificateDer::from(der)], UnixTime::now())
            .expect("authenticated");
        assert_eq!(
            user,
            CertificateUser {
                name: "kube-apiserver-kubelet-client".into(),
                groups: vec!["system:masters".into()],
            }
        );
    }

    #[test]
    fn every_organization_of_the_subject_is_a_group() {
        // CN=a, O=g1, O=g2 as three RDNs (rcgen writes one value per attribute type).
        let rdn = |oid: u8, value: &str| {
            let mut attribute = vec![0x06, 0x03, 0x55, 0x04, oid, 0x0c, value.len() as u8];
            attribute.extend_from_slice(value.as_bytes());
            let mut sequence = vec![0x30, attribute.len() as u8];
            sequence.extend(attribute);
            let mut set = vec![0x31, sequence.len() as u8];
            set.extend(sequence);
            set
        };
        let name: Vec<u8> = [rdn(0x03, "a"), rdn(0x0a, "g1"), rdn(0x0a, "g2")].concat();
        let attributes = subject_attributes(&name).expect("parses");
        let values: Vec<(&[u8], &str)> = attributes
            .iter()
            .map(|(oid, value)| (*oid, value.as_str()))
            .collect();
        assert_eq!(
            values,
            [
                (COMMON_NAME, "a"),
                (ORGANIZATION, "g1"),
                (ORGANIZATION, "g2")
            ]
        );
        assert_eq!(
            subject_attributes(&name[..name.len() - 1]),
            None,
            "truncated"
        );
    }

    #[test]
    fn a_stranger_or_a_server_only_certificate_does_not_authenticate() {
        let cluster = pki("cluster-ca");
        let (_dir, path) = ca_file(&cluster);
        let ca = ClientCa::read(&path).expect("ca");
        let stranger = client(
            &pki("other-ca"),
            "mallory",
            &["system:masters"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let server_only = client(&cluster, "web", &[], ExtendedKeyUsagePurpose::ServerAuth);
        for der in [stranger, server_only] {
            assert!(matches!(
                ca.authenticate(&[CertificateDer::from(der)], UnixTime::now()),
                Err(X509Error::Unverified(_))
            ));
        }
    }

    #[test]
    fn a_client_ca_file_without_certificates_is_refused_naming_the_field() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, "not pem").expect("write");
        let error = ClientCa::read(&path).err().expect("refused").to_string();
        assert!(
            error.starts_with("authentication.x509.clientCAFile ") && error.contains("no PEM"),
            "{error}"
        );
    }
}
