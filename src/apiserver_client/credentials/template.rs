//! What a node certificate is for and what it must say, as the kubelet's certificate managers
//! ask for it: the client certificate (`kube-apiserver-client-kubelet`, no SANs) and the
//! serving certificate (`kubelet-serving`, the node's addresses as SANs, none asked for before
//! the Node has an IP), the usages each asks for with an ECDSA key, and whether a certificate
//! in hand still satisfies a template (`certSatisfiesTemplate`). Pure functions.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::NodeAddress;

/// The two certificates a node holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// The client certificate every API connection presents (`rotateCertificates`).
    Client,
    /// The kubelet API's serving certificate (`serverTLSBootstrap`).
    Serving,
}

impl Purpose {
    /// `spec.signerName`.
    pub fn signer(self) -> &'static str {
        match self {
            Self::Client => "kubernetes.io/kube-apiserver-client-kubelet",
            Self::Serving => "kubernetes.io/kubelet-serving",
        }
    }

    /// `spec.usages` for an ECDSA key: `key encipherment` only goes with RSA keys
    /// (`DefaultKubelet{Client,Serving}GetUsages`), and the keys here are ECDSA P-256.
    pub fn usages(self) -> [&'static str; 2] {
        match self {
            Self::Client => ["digital signature", "client auth"],
            Self::Serving => ["digital signature", "server auth"],
        }
    }

    /// The certificate store's file prefix (`kubelet-client-…`, `kubelet-server-…`).
    pub fn store_prefix(self) -> &'static str {
        match self {
            Self::Client => "kubelet-client",
            Self::Serving => "kubelet-server",
        }
    }

    /// What the certificate is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Client => "client certificate",
            Self::Serving => "serving certificate",
        }
    }
}

/// The subject and SANs a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub common_name: String,
    pub organization: String,
    /// Sorted, without duplicates.
    pub dns_names: Vec<String>,
    /// Sorted by their text, as the kubelet sorts them, without duplicates.
    pub ips: Vec<IpAddr>,
}

impl Template {
    /// `CN=system:node:<name>, O=system:nodes`, no SANs.
    pub fn client(node_name: &str) -> Self {
        Template {
            common_name: format!("system:node:{node_name}"),
            organization: "system:nodes".into(),
            dns_names: Vec::new(),
            ips: Vec::new(),
        }
    }

    /// `newGetTemplateFn`: the client subject with the Node's addresses as SANs (a `Hostname`
    /// as a DNS name or an IP, `InternalIP`/`ExternalIP` as IPs, `InternalDNS`/`ExternalDNS`
    /// as DNS names); none until at least one IP is there (`AllowDNSOnlyNodeCSR` is off).
    pub fn serving(node_name: &str, addresses: &[NodeAddress]) -> Option<Self> {
        let mut dns_names = BTreeSet::new();
        let mut ips = BTreeSet::new();
        for address in addresses.iter().filter(|a| !a.address.is_empty()) {
            let ip = address.address.parse::<IpAddr>().ok();
            match (address.type_.as_str(), ip) {
                ("Hostname" | "InternalIP" | "ExternalIP", Some(ip)) => {
                    ips.insert((ip.to_string(), ip));
                }
                ("Hostname" | "InternalDNS" | "ExternalDNS", None) => {
                    dns_names.insert(address.address.clone());
                }
                _ => {}
            }
        }
        if ips.is_empty() {
            return None;
        }
        Some(Template {
            dns_names: dns_names.into_iter().collect(),
            ips: ips.into_iter().map(|(_, ip)| ip).collect(),
            ..Self::client(node_name)
        })
    }

    /// `certSatisfiesTemplate`: the leaf has this common name and every DNS name, IP and
    /// organization asked for (more of them do not call for a new certificate).
    pub fn satisfied_by(&self, leaf: &[u8]) -> bool {
        let Ok((_, parsed)) = x509_parser::parse_x509_certificate(leaf) else {
            return false;
        };
        let subject = parsed.subject();
        let text = |attribute: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            attribute.as_str().ok().map(str::to_owned)
        };
        let common_name = subject.iter_common_name().next().and_then(text);
        if common_name.as_deref() != Some(self.common_name.as_str()) {
            return false;
        }
        let organizations: Vec<String> = subject.iter_organization().filter_map(text).collect();
        let mut dns_names = Vec::new();
        let mut ips = Vec::new();
        if let Ok(Some(sans)) = parsed.subject_alternative_name() {
            for name in &sans.value.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => {
                        dns_names.push((*dns).to_owned());
                    }
                    x509_parser::extensions::GeneralName::IPAddress(bytes) => {
                        ips.extend(ip_of(bytes));
                    }
                    _ => {}
                }
            }
        }
        organizations.contains(&self.organization)
            && self.dns_names.iter().all(|d| dns_names.contains(d))
            && self.ips.iter().all(|ip| ips.contains(ip))
    }
}

fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(kind: &str, value: &str) -> NodeAddress {
        NodeAddress {
            type_: kind.into(),
            address: value.into(),
        }
    }

    fn leaf(template: &Template, extra_dns: &[&str]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, template.common_name.as_str());
        params.distinguished_name.push(
            rcgen::DnType::OrganizationName,
            template.organization.as_str(),
        );
        for dns in template
            .dns_names
            .iter()
            .map(String::as_str)
            .chain(extra_dns.iter().copied())
        {
            params
                .subject_alt_names
                .push(rcgen::SanType::DnsName(dns.try_into().expect("a DNS name")));
        }
        for ip in &template.ips {
            params
                .subject_alt_names
                .push(rcgen::SanType::IpAddress(*ip));
        }
        params
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec()
    }

    #[test]
    fn the_serving_template_takes_the_nodes_addresses_as_the_kubelet_does() {
        let addresses = [
            address("InternalIP", "192.0.2.10"),
            address("Hostname", "worker-1"),
            address("ExternalIP", "198.51.100.2"),
            address("InternalIP", "192.0.2.10"),
            address("InternalDNS", "worker-1.internal"),
            address("ExternalDNS", "worker-1"),
            address("Hostname", "10.0.0.3"),
            address("InternalIP", "not-an-ip"),
            address("InternalIP", ""),
        ];
        let template = Template::serving("worker-1", &addresses).expect("a template");
        assert_eq!(template.common_name, "system:node:worker-1");
        assert_eq!(template.organization, "system:nodes");
        assert_eq!(template.dns_names, ["worker-1", "worker-1.internal"]);
        let ips: Vec<String> = template.ips.iter().map(ToString::to_string).collect();
        // Sorted as text, as the kubelet sorts them.
        assert_eq!(ips, ["10.0.0.3", "192.0.2.10", "198.51.100.2"]);
    }

    #[test]
    fn no_serving_template_before_the_node_has_an_ip() {
        assert_eq!(Template::serving("n", &[]), None);
        assert_eq!(
            Template::serving(
                "n",
                &[address("Hostname", "n"), address("InternalDNS", "n.x")]
            ),
            None
        );
    }

    #[test]
    fn a_certificate_missing_an_address_no_longer_satisfies_the_template() {
        let before = Template::serving(
            "n",
            &[
                address("InternalIP", "192.0.2.10"),
                address("Hostname", "n"),
            ],
        )
        .expect("a template");
        let certificate = leaf(&before, &["extra.example"]);
        assert!(before.satisfied_by(&certificate), "extra SANs are fine");
        let moved = Template::serving(
            "n",
            &[
                address("InternalIP", "192.0.2.11"),
                address("Hostname", "n"),
            ],
        )
        .expect("a template");
        assert!(
            !moved.satisfied_by(&certificate),
            "a new IP needs a new certificate"
        );
        let renamed =
            Template::serving("m", &[address("InternalIP", "192.0.2.10")]).expect("a template");
        assert!(!renamed.satisfied_by(&certificate), "another common name");
        assert!(!before.satisfied_by(b"not a certificate"));
    }

    #[test]
    fn usages_and_signers_are_the_kubelets_for_an_ecdsa_key() {
        assert_eq!(Purpose::Serving.signer(), "kubernetes.io/kubelet-serving");
        assert_eq!(
            Purpose::Serving.usages(),
            ["digital signature", "server auth"]
        );
        assert_eq!(
            Purpose::Client.usages(),
            ["digital signature", "client auth"]
        );
        assert_eq!(Purpose::Serving.store_prefix(), "kubelet-server");
    }
}
