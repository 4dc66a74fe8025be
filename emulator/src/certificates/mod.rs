//! certificates.k8s.io/v1 as kube-apiserver and kube-controller-manager serve it for joining
//! nodes: CertificateSigningRequests with their create, `approval` and `status` rules
//! (`requests`), the cluster CA that signs them and serves the API's TLS (`authority`), and
//! the csrapproving controller for `kubernetes.io/kube-apiserver-client-kubelet` and the
//! csrsigning controllers for it and for `kubernetes.io/kubelet-serving` (`controller`); as
//! upstream, nothing approves serving requests: an administrator does. The CA lives only in
//! memory, for as long as the emulator runs.

pub mod authority;
pub mod controller;
pub mod requests;

/// The signer of node client certificates (`capi.KubeAPIServerClientKubeletSignerName`).
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The signer of kubelet serving certificates (`capi.KubeletServingSignerName`).
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// The usages a kubelet client CSR may ask for: with an RSA key, or (the ECDSA keys
/// kubelets make) without `key encipherment` (`kubeletClientRequiredUsages[NoRSA]`).
const CLIENT_USAGES: &[&str] = &["client auth", "digital signature", "key encipherment"];
const CLIENT_USAGES_NO_RSA: &[&str] = &["client auth", "digital signature"];
/// The same for a kubelet serving CSR (`kubeletServingRequiredUsages[NoRSA]`), sorted.
const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];
const SERVING_USAGES_NO_RSA: &[&str] = &["digital signature", "server auth"];

/// `usages` as a sorted set, as the helpers compare them.
fn usage_set(usages: &[String]) -> Vec<&str> {
    let mut set: Vec<&str> = usages.iter().map(String::as_str).collect();
    set.sort_unstable();
    set.dedup();
    set
}

/// What a CSR's PKCS#10 request says, as the approver and the signer check it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RequestedSubject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: usize,
    pub emails: usize,
    pub ips: usize,
    pub uris: usize,
}

/// `ValidateKubeletClientCSR`: why `subject` and `usages` are not a node client certificate
/// request, in the helper's words, if they are not.
pub fn kubelet_client_refusal(subject: &RequestedSubject, usages: &[String]) -> Option<String> {
    if subject.organizations != ["system:nodes"] {
        return Some("subject organization is not system:nodes".into());
    }
    let refusal = if subject.dns_names > 0 {
        "DNS subjectAltNames are not allowed"
    } else if subject.emails > 0 {
        "Email subjectAltNames are not allowed"
    } else if subject.ips > 0 {
        "IP subjectAltNames are not allowed"
    } else if subject.uris > 0 {
        "URI subjectAltNames are not allowed"
    } else if !subject.common_name.starts_with("system:node:") {
        "subject common name does not begin with system:node:"
    } else {
        let set = usage_set(usages);
        if set == CLIENT_USAGES || set == CLIENT_USAGES_NO_RSA {
            return None;
        }
        return Some(format!(
            "usages did not match [{}]",
            CLIENT_USAGES.join(" ")
        ));
    };
    Some(refusal.into())
}

/// `ValidateKubeletServingCSR`: why `subject` and `usages` are not a kubelet serving
/// certificate request, in the helper's words (and its order of checks), if they are not.
pub fn kubelet_serving_refusal(subject: &RequestedSubject, usages: &[String]) -> Option<String> {
    if subject.organizations != ["system:nodes"] {
        return Some("subject organization is not system:nodes".into());
    }
    let refusal = if subject.dns_names == 0 && subject.ips == 0 {
        "DNS or IP subjectAltName is required"
    } else if subject.emails > 0 {
        "Email subjectAltNames are not allowed"
    } else if subject.uris > 0 {
        "URI subjectAltNames are not allowed"
    } else {
        let set = usage_set(usages);
        if set != SERVING_USAGES && set != SERVING_USAGES_NO_RSA {
            return Some(format!(
                "usages did not match [{}]",
                SERVING_USAGES.join(" ")
            ));
        }
        if subject.common_name.starts_with("system:node:") {
            return None;
        }
        "subject common name does not begin with system:node:"
    };
    Some(refusal.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_subject() -> RequestedSubject {
        RequestedSubject {
            common_name: "system:node:n1".into(),
            organizations: vec!["system:nodes".into()],
            ..RequestedSubject::default()
        }
    }

    fn usages(list: &[&str]) -> Vec<String> {
        list.iter().map(|u| (*u).to_string()).collect()
    }

    #[test]
    fn node_client_requests_need_the_node_subject_and_client_usages() {
        let ecdsa = usages(&["digital signature", "client auth"]);
        assert_eq!(kubelet_client_refusal(&node_subject(), &ecdsa), None);
        let rsa = usages(&["key encipherment", "digital signature", "client auth"]);
        assert_eq!(kubelet_client_refusal(&node_subject(), &rsa), None);
        assert_eq!(
            kubelet_client_refusal(&node_subject(), &usages(&["client auth", "server auth"])),
            Some("usages did not match [client auth digital signature key encipherment]".into())
        );
        let mut admin = node_subject();
        admin.organizations = vec!["system:masters".into()];
        assert_eq!(
            kubelet_client_refusal(&admin, &ecdsa),
            Some("subject organization is not system:nodes".into())
        );
        let mut user = node_subject();
        user.common_name = "alice".into();
        assert_eq!(
            kubelet_client_refusal(&user, &ecdsa),
            Some("subject common name does not begin with system:node:".into())
        );
        let mut named = node_subject();
        named.dns_names = 1;
        assert_eq!(
            kubelet_client_refusal(&named, &ecdsa),
            Some("DNS subjectAltNames are not allowed".into())
        );
    }

    #[test]
    fn serving_requests_need_a_san_the_node_subject_and_server_usages() {
        let ecdsa = usages(&["digital signature", "server auth"]);
        assert_eq!(
            kubelet_serving_refusal(&node_subject(), &ecdsa),
            Some("DNS or IP subjectAltName is required".into())
        );
        let mut named = node_subject();
        named.ips = 1;
        assert_eq!(kubelet_serving_refusal(&named, &ecdsa), None);
        let rsa = usages(&["key encipherment", "digital signature", "server auth"]);
        assert_eq!(kubelet_serving_refusal(&named, &rsa), None);
        assert_eq!(
            kubelet_serving_refusal(&named, &usages(&["digital signature", "client auth"])),
            Some("usages did not match [digital signature key encipherment server auth]".into())
        );
        named.emails = 1;
        assert_eq!(
            kubelet_serving_refusal(&named, &ecdsa),
            Some("Email subjectAltNames are not allowed".into())
        );
        let mut user = node_subject();
        user.dns_names = 1;
        user.common_name = "alice".into();
        assert_eq!(
            kubelet_serving_refusal(&user, &ecdsa),
            Some("subject common name does not begin with system:node:".into())
        );
    }
}
