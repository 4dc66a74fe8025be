//! RunPodSandbox's config as the kubelet's `generatePodSandboxConfig` makes it: metadata,
//! hostname (`setHostnameAsFQDN`), log directory, the kubelet's labels over the pod's,
//! annotations, port mappings, host network, sysctls, the security context, and the DNS config
//! of `network/dns/dns.go` (§2.5). Pure: the host's resolv.conf is read by the caller.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Pod, PodSpec};

use super::{
    etc_hosts::host_and_domain,
    isolation::pod_selinux,
    plan::{app_containers, host_network},
    view::{POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL},
};
use nodepulse_actors::ports::{
    DnsConfig, Labels, PortMapping, ProfileKind, Protocol, SandboxConfig, SandboxMetadata,
    SecurityContext, SecurityProfile,
};

/// The cluster's DNS as the kubelet is configured with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterDns {
    /// `clusterDNS`: the resolvers' IPs.
    pub servers: Vec<String>,
    /// `clusterDomain` (`cluster.local`).
    pub domain: String,
}

const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;

/// `<podLogsDir>/<namespace>_<name>_<uid>`.
pub fn log_directory(root: &Path, pod: &Pod) -> PathBuf {
    let meta = &pod.metadata;
    root.join(format!(
        "{}_{}_{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    ))
}

/// The nameservers, search paths and options of a resolv.conf.
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut config = DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => config.servers.extend(fields.next().map(str::to_owned)),
            Some("search") => config.searches = fields.map(str::to_owned).collect(),
            Some("options") => config.options.extend(fields.map(str::to_owned)),
            _ => {}
        }
    }
    config
}

fn push_unique(into: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    for item in items {
        if !into.contains(&item) {
            into.push(item);
        }
    }
}

/// The DNS config for `pod` (§2.5); `None` for `dnsPolicy: None` without a `dnsConfig`.
pub fn dns_config(pod: &Pod, cluster: &ClusterDns, host: &DnsConfig) -> Option<DnsConfig> {
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let use_cluster = match policy {
        "None" => None,
        "Default" => Some(false),
        "ClusterFirst" => Some(!host_network(pod)),
        // ClusterFirstWithHostNet, and anything invalid, as the kubelet does.
        _ => Some(true),
    };
    let mut config = match use_cluster {
        None => DnsConfig::default(),
        Some(true) if !cluster.servers.is_empty() => {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let domain = &cluster.domain;
            let mut searches = vec![
                format!("{namespace}.svc.{domain}"),
                format!("svc.{domain}"),
                domain.clone(),
            ];
            push_unique(&mut searches, host.searches.iter().cloned());
            DnsConfig {
                servers: cluster.servers.clone(),
                searches,
                options: vec!["ndots:5".to_owned()],
            }
        }
        // No clusterDNS: the kubelet falls back to the host's config.
        Some(_) => host.clone(),
    };
    let pod_config = spec.and_then(|s| s.dns_config.as_ref());
    if let Some(extra) = pod_config {
        push_unique(
            &mut config.servers,
            extra.nameservers.iter().flatten().cloned(),
        );
        push_unique(
            &mut config.searches,
            extra.searches.iter().flatten().cloned(),
        );
        for option in extra.options.iter().flatten() {
            let Some(name) = option.name.as_deref() else {
                continue;
            };
            config.options.retain(|o| o.split(':').next() != Some(name));
            config.options.push(match &option.value {
                Some(value) => format!("{name}:{value}"),
                None => name.to_owned(),
            });
        }
    }
    config.servers.truncate(MAX_NAMESERVERS);
    config.searches.truncate(MAX_SEARCHES);
    (policy != "None" || pod_config.is_some()).then_some(config)
}

fn protocol(name: Option<&str>) -> Protocol {
    match name {
        Some("UDP") => Protocol::Udp,
        Some("SCTP") => Protocol::Sctp,
        _ => Protocol::Tcp,
    }
}

/// Every port of the app containers, duplicates (same protocol, ports and host IP) dropped.
fn port_mappings(pod: &Pod) -> Vec<PortMapping> {
    let mut mappings: Vec<PortMapping> = Vec::new();
    for port in app_containers(pod)
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
    {
        let mapping = PortMapping {
            protocol: protocol(port.protocol.as_deref()),
            container_port: port.container_port,
            host_port: port.host_port.unwrap_or(0),
            host_ip: port.host_ip.clone().unwrap_or_default(),
        };
        if !mappings.contains(&mapping) {
            mappings.push(mapping);
        }
    }
    mappings
}

/// The kubelet's three labels over the pod's own.
pub fn pod_labels(pod: &Pod) -> Labels {
    let meta = &pod.metadata;
    let mut labels: Labels = meta
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (key, value) in [
        (POD_NAME_LABEL, &meta.name),
        (POD_NAMESPACE_LABEL, &meta.namespace),
        (POD_UID_LABEL, &meta.uid),
    ] {
        labels.insert(key.to_owned(), value.clone().unwrap_or_default());
    }
    labels
}

fn spec_flag(pod: &Pod, flag: impl Fn(&PodSpec) -> Option<bool>) -> bool {
    pod.spec.as_ref().and_then(flag).unwrap_or(false)
}

/// The sandbox's security context (`generatePodSandboxLinuxConfig`): the pod's user and
/// groups (the fsGroup first), its SELinux options, and always the runtime's default seccomp
/// profile, so a pod's own profile may be stricter than the pause process needs.
fn sandbox_security(pod: &Pod) -> SecurityContext {
    let context = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    SecurityContext {
        run_as_user: context.run_as_user,
        run_as_group: context.run_as_group,
        supplemental_groups: context
            .fs_group
            .into_iter()
            .chain(context.supplemental_groups.unwrap_or_default())
            .collect(),
        // The runtime refuses a privileged container in a sandbox that is not ("no privileged
        // container allowed in sandbox"): the kubelet's HasPrivilegedContainer.
        privileged: has_privileged_container(pod),
        seccomp: Some(SecurityProfile::of(ProfileKind::RuntimeDefault)),
        selinux: pod_selinux(pod),
        ..SecurityContext::default()
    }
}

/// Whether any container of the pod (init, app or ephemeral) asks to be privileged.
fn has_privileged_container(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let privileged = |context: Option<&k8s_openapi::api::core::v1::SecurityContext>| {
        context.and_then(|c| c.privileged).unwrap_or(false)
    };
    let ephemeral = spec.ephemeral_containers.iter().flatten();
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| privileged(c.security_context.as_ref()))
        || ephemeral
            .into_iter()
            .any(|c| privileged(c.security_context.as_ref()))
}

/// The longest FQDN the kubelet makes a hostname: what the kernel's `nodename` field holds.
const FQDN_MAX: usize = 64;

/// Why a sandbox's config cannot be made, in the kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxConfigError {
    #[error(
        "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX} characters is the max, {} characters requested)",
        fqdn.len()
    )]
    FqdnTooLong { fqdn: String },
}

/// The sandbox's hostname (the kubelet's `GetNodenameForKernel`): the pod's hostname, or with
/// `setHostnameAsFQDN` and a domain, `<hostname>.<domain>` if the kernel can hold it.
fn kernel_hostname(pod: &Pod, cluster_domain: &str) -> Result<String, SandboxConfigError> {
    let (hostname, domain) = host_and_domain(pod, cluster_domain);
    match domain {
        Some(domain) if spec_flag(pod, |spec| spec.set_hostname_as_fqdn) => {
            let fqdn = format!("{hostname}.{domain}");
            if fqdn.len() > FQDN_MAX {
                return Err(SandboxConfigError::FqdnTooLong { fqdn });
            }
            Ok(fqdn)
        }
        _ => Ok(hostname),
    }
}

/// RunPodSandbox's config for attempt `attempt` of `pod`.
pub fn sandbox_config(
    pod: &Pod,
    attempt: u32,
    logs_root: &Path,
    cluster: &ClusterDns,
    host_dns: &DnsConfig,
) -> Result<SandboxConfig, SandboxConfigError> {
    let meta = &pod.metadata;
    let sysctls = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|c| c.sysctls.as_ref())
        .map(|all| {
            all.iter()
                .map(|s| (s.name.replace('/', "."), s.value.clone()))
                .collect()
        })
        .unwrap_or_default();
    Ok(SandboxConfig {
        metadata: SandboxMetadata {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            attempt,
        },
        hostname: if host_network(pod) {
            String::new()
        } else {
            kernel_hostname(pod, &cluster.domain)?
        },
        log_directory: log_directory(logs_root, pod),
        dns: dns_config(pod, cluster, host_dns),
        port_mappings: port_mappings(pod),
        labels: pod_labels(pod),
        annotations: meta
            .annotations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        cgroup_parent: String::new(),
        host_network: host_network(pod),
        host_pid: spec_flag(pod, |spec| spec.host_pid),
        host_ipc: spec_flag(pod, |spec| spec.host_ipc),
        share_process_namespace: spec_flag(pod, |spec| spec.share_process_namespace),
        security: sandbox_security(pod),
        sysctls,
        // The user namespace needs the allocator and the runtime's word: the sync fills it in.
        user_namespace: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn cluster() -> ClusterDns {
        ClusterDns {
            servers: vec!["10.96.0.10".to_owned()],
            domain: "cluster.local".to_owned(),
        }
    }

    fn host() -> DnsConfig {
        parse_resolv_conf("nameserver 1.1.1.1\nsearch corp.example # office\noptions edns0\n")
    }

    #[test]
    fn cluster_first_gets_the_cluster_resolvers_and_search_paths_then_the_hosts() {
        let dns = dns_config(&pod(json!({"containers": []})), &cluster(), &host()).unwrap();
        assert_eq!(dns.servers, ["10.96.0.10"]);
        assert_eq!(
            dns.searches,
            [
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example"
            ]
        );
        assert_eq!(dns.options, ["ndots:5"]);
    }

    #[test]
    fn host_network_and_default_policies_get_the_hosts_dns() {
        let host_network = pod(json!({"containers": [], "hostNetwork": true}));
        assert_eq!(dns_config(&host_network, &cluster(), &host()), Some(host()));
        let with_host_net = pod(
            json!({"containers": [], "hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"}),
        );
        assert_eq!(
            dns_config(&with_host_net, &cluster(), &host())
                .unwrap()
                .servers,
            ["10.96.0.10"]
        );
        let default = pod(json!({"containers": [], "dnsPolicy": "Default"}));
        assert_eq!(dns_config(&default, &cluster(), &host()), Some(host()));
    }

    #[test]
    fn without_cluster_dns_cluster_first_falls_back_to_the_host() {
        let dns = dns_config(
            &pod(json!({"containers": []})),
            &ClusterDns::default(),
            &host(),
        );
        assert_eq!(dns, Some(host()));
    }

    #[test]
    fn policy_none_takes_only_the_pods_dns_config_and_nothing_without_one() {
        let bare = pod(json!({"containers": [], "dnsPolicy": "None"}));
        assert_eq!(dns_config(&bare, &cluster(), &host()), None);
        let own = pod(json!({"containers": [], "dnsPolicy": "None", "dnsConfig": {
            "nameservers": ["9.9.9.9"], "searches": ["a.example"],
            "options": [{"name": "ndots", "value": "2"}, {"name": "rotate"}]}}));
        let dns = dns_config(&own, &cluster(), &host()).unwrap();
        assert_eq!(
            (dns.servers, dns.searches, dns.options),
            (
                vec!["9.9.9.9".to_owned()],
                vec!["a.example".to_owned()],
                vec!["ndots:2".to_owned(), "rotate".to_owned()]
            )
        );
    }

    #[test]
    fn a_pods_option_replaces_the_cluster_option_of_the_same_name() {
        let tuned = pod(
            json!({"containers": [], "dnsConfig": {"options": [{"name": "ndots", "value": "1"}]}}),
        );
        assert_eq!(
            dns_config(&tuned, &cluster(), &host()).unwrap().options,
            ["ndots:1"]
        );
    }

    #[test]
    fn set_hostname_as_fqdn_gives_the_kernel_the_fqdn_unless_it_is_too_long() {
        let fqdn = pod(json!({"hostname": "web", "subdomain": "front",
            "setHostnameAsFQDN": true, "containers": []}));
        assert_eq!(
            kernel_hostname(&fqdn, "cluster.local"),
            Ok("web.front.shop.svc.cluster.local".to_owned())
        );
        let plain = pod(json!({"hostname": "web", "subdomain": "front", "containers": []}));
        assert_eq!(
            kernel_hostname(&plain, "cluster.local"),
            Ok("web".to_owned())
        );
        let long = pod(json!({"hostname": "a".repeat(40), "subdomain": "front",
            "setHostnameAsFQDN": true, "containers": []}));
        let error = kernel_hostname(&long, "cluster.local").expect_err("too long");
        assert_eq!(
            error.to_string(),
            format!(
                "failed to construct FQDN from pod hostname and cluster domain, FQDN {}.front.shop.svc.cluster.local is too long (64 characters is the max, 69 characters requested)",
                "a".repeat(40)
            )
        );
    }

    #[test]
    fn the_sandbox_is_privileged_when_any_container_is() {
        let plain = pod(json!({"containers": [{"name": "app"}]}));
        assert!(!sandbox_security(&plain).privileged);
        let init = pod(json!({"containers": [{"name": "app"}],
            "initContainers": [{"name": "setup", "securityContext": {"privileged": true}}]}));
        assert!(sandbox_security(&init).privileged);
        let ephemeral = pod(json!({"containers": [{"name": "app"}],
            "ephemeralContainers": [{"name": "debug", "securityContext": {"privileged": true}}]}));
        assert!(sandbox_security(&ephemeral).privileged);
    }
}
