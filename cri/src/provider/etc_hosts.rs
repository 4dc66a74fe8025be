//! The pod's host name and domain, and the `/etc/hosts` the kubelet writes for it
//! (`<rootDir>/pods/<uid>/etc-hosts`, bind-mounted into every container that does not mount
//! `/etc/hosts` itself): a managed file naming the pod's IPs, or for `hostNetwork` pods the
//! node's own file; `hostAliases` appended to either. Pure text here; the worker writes it.

use k8s_openapi::api::core::v1::{Container, HostAlias, Pod};

/// Where the file goes in a container.
pub const ETC_HOSTS: &str = "/etc/hosts";
/// Its name in the pod's directory.
pub const POD_FILE: &str = "etc-hosts";

const HOSTNAME_MAX: usize = 63;
const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
const HOST_NETWORK_HEADER: &str = "# Kubernetes-managed hosts file (host network).\n";

/// The kubelet's `GeneratePodHostNameAndDomain`: `hostnameOverride` (no domain), else
/// `spec.hostname` or the pod's name, cut to 63 characters without a trailing `-` or `.`, and
/// `<subdomain>.<namespace>.svc.<clusterDomain>` when the pod has a subdomain. The API server
/// has validated the names.
pub fn host_and_domain(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    if let Some(name) = spec.and_then(|spec| spec.hostname_override.as_deref()) {
        return (truncate(name), None);
    }
    let name = spec
        .and_then(|spec| spec.hostname.as_deref())
        .filter(|name| !name.is_empty())
        .or(pod.metadata.name.as_deref())
        .unwrap_or_default();
    let domain = spec
        .and_then(|spec| spec.subdomain.as_deref())
        .filter(|subdomain| !subdomain.is_empty())
        .map(|subdomain| {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            format!("{subdomain}.{namespace}.svc.{cluster_domain}")
        });
    (truncate(name), domain)
}

fn truncate(name: &str) -> String {
    let cut: String = name.chars().take(HOSTNAME_MAX).collect();
    cut.trim_end_matches(['-', '.']).to_owned()
}

/// The kubelet's `shouldMountHostsFile` for one container: once the pod has its IPs (or is on
/// the host's network), unless the container mounts something at `/etc/hosts` itself.
pub fn should_mount(pod: &Pod, pod_ips: &[String], container: &Container) -> bool {
    let own_mount = container
        .volume_mounts
        .iter()
        .flatten()
        .any(|mount| mount.mount_path == ETC_HOSTS);
    (super::plan::host_network(pod) || !pod_ips.is_empty()) && !own_mount
}

/// The file for a pod on the pod network (`managedHostsFileContent`).
pub fn managed(
    pod_ips: &[String],
    host: &str,
    domain: Option<&str>,
    aliases: &[HostAlias],
) -> String {
    let mut text = String::from(MANAGED_HEADER);
    text.push_str("127.0.0.1\tlocalhost\n");
    text.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    text.push_str("fe00::0\tip6-localnet\n");
    text.push_str("fe00::0\tip6-mcastprefix\n");
    text.push_str("fe00::1\tip6-allnodes\n");
    text.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        match domain {
            Some(domain) => text.push_str(&format!("{ip}\t{host}.{domain}\t{host}\n")),
            None => text.push_str(&format!("{ip}\t{host}\n")),
        }
    }
    text.push_str(&alias_entries(aliases));
    text
}

/// The file for a `hostNetwork` pod: the node's (`nodeHostsFileContent`).
pub fn host_network(node_hosts: &str, aliases: &[HostAlias]) -> String {
    format!(
        "{HOST_NETWORK_HEADER}{node_hosts}{}",
        alias_entries(aliases)
    )
}

/// `hostsEntriesFromHostAliases`: one line an IP, its names tab-separated.
fn alias_entries(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut text = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        text.push_str(&format!("{}\t{names}\n", alias.ip));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut manifest = json!({"metadata": {"name": "web-0", "namespace": "shop"},
                                  "spec": {"containers": [{"name": "app"}]}});
        for (key, value) in spec.as_object().unwrap() {
            manifest["spec"][key] = value.clone();
        }
        serde_json::from_value(manifest).unwrap()
    }

    fn aliases() -> Vec<HostAlias> {
        serde_json::from_value(json!([
            {"ip": "123.45.67.89", "hostnames": ["foo", "bar"]},
            {"ip": "198.18.0.9", "hostnames": ["baz"]},
        ]))
        .unwrap()
    }

    #[test]
    fn the_name_is_the_override_else_the_hostname_else_the_pods_with_the_subdomains_domain() {
        let local = "cluster.local";
        assert_eq!(
            host_and_domain(&pod(json!({})), local),
            ("web-0".into(), None)
        );
        let named = pod(json!({"hostname": "db", "subdomain": "backend"}));
        assert_eq!(
            host_and_domain(&named, local),
            ("db".into(), Some("backend.shop.svc.cluster.local".into()))
        );
        let overridden = pod(json!({"hostname": "db", "subdomain": "backend",
                                    "hostnameOverride": "override-host"}));
        assert_eq!(
            host_and_domain(&overridden, local),
            ("override-host".into(), None)
        );
        let long = pod(json!({"hostname": format!("{}-x", "a".repeat(62))}));
        assert_eq!(host_and_domain(&long, local).0, "a".repeat(62));
    }

    #[test]
    fn the_managed_file_is_the_kubelets_byte_for_byte() {
        let ips = ["198.18.0.7".to_owned(), "fd00::7".to_owned()];
        assert_eq!(
            managed(
                &ips,
                "db",
                Some("backend.shop.svc.cluster.local"),
                &aliases()
            ),
            "# Kubernetes-managed hosts file.\n\
             127.0.0.1\tlocalhost\n\
             ::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\n\
             fe00::0\tip6-mcastprefix\n\
             fe00::1\tip6-allnodes\n\
             fe00::2\tip6-allrouters\n\
             198.18.0.7\tdb.backend.shop.svc.cluster.local\tdb\n\
             fd00::7\tdb.backend.shop.svc.cluster.local\tdb\n\
             \n\
             # Entries added by HostAliases.\n\
             123.45.67.89\tfoo\tbar\n\
             198.18.0.9\tbaz\n"
        );
        assert!(managed(&ips[..1], "web-0", None, &[]).ends_with("198.18.0.7\tweb-0\n"));
    }

    #[test]
    fn a_host_network_pod_gets_the_nodes_file_and_its_aliases() {
        assert_eq!(
            host_network("127.0.0.1 localhost\n", &aliases()[..1]),
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\
             \n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
        );
    }

    #[test]
    fn it_is_mounted_once_the_pod_has_an_address_unless_the_container_mounts_its_own() {
        let plain = pod(json!({}));
        let app = &plain.spec.as_ref().unwrap().containers[0];
        assert!(!should_mount(&plain, &[], app), "no address yet");
        assert!(should_mount(&plain, &["198.18.0.7".to_owned()], app));
        assert!(should_mount(&pod(json!({"hostNetwork": true})), &[], app));
        let own = pod(json!({"containers": [{"name": "app",
            "volumeMounts": [{"name": "h", "mountPath": "/etc/hosts"}]}]}));
        let app = &own.spec.as_ref().unwrap().containers[0];
        assert!(!should_mount(&own, &["198.18.0.7".to_owned()], app));
    }
}
