//! The kubelet's sysctl admission (`pkg/kubelet/sysctl`): a pod's `securityContext.sysctls`
//! must be safe (namespaced and harmless: the kubelet's list) or allowed by the node's
//! `allowedUnsafeSysctls`, and never one of the host's IPC or network namespace while the pod
//! shares it. A refused pod fails with `SysctlForbidden`.

use k8s_openapi::api::core::v1::Pod;

use super::admission::Rejection;

pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// The kubelet's `safeSysctls` (all of them: each needs at most kernel 4.15).
pub const SAFE: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The namespace a sysctl lives in (component-helpers' `namespaceOf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    fn name(self) -> &'static str {
        match self {
            Self::Ipc => "IPC",
            Self::Net => "Net",
        }
    }
}

/// `NormalizeName`: a name whose first separator is `/` has its `/` and `.` swapped.
pub fn normalize(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(at) if name.as_bytes()[at] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                other => other,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

pub fn namespace_of(name: &str) -> Option<Namespace> {
    const IPC: &[&str] = &[
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.shm",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.msg",
    ];
    if IPC.contains(&name) {
        return Some(Namespace::Ipc);
    }
    if name.starts_with("net.") {
        return Some(Namespace::Net);
    }
    name.starts_with("fs.mqueue.").then_some(Namespace::Ipc)
}

/// One allowed pattern: a name, or a prefix ending in `*`.
fn pattern_namespace(pattern: &str) -> (String, bool, Option<Namespace>) {
    let normalized = normalize(pattern);
    let (name, prefixed) = match normalized.find('*') {
        Some(at) => (normalized[..at].to_owned(), true),
        None => (normalized, false),
    };
    let namespace = namespace_of(&name);
    (name, prefixed, namespace)
}

/// Why an `allowedUnsafeSysctls` entry is refused (the kubelet's `NewAllowlist`), if it is.
pub fn pattern_error(pattern: &str) -> Option<String> {
    let (name, _, namespace) = pattern_namespace(pattern);
    namespace
        .is_none()
        .then(|| format!("the sysctls {name:?} are not known to be namespaced"))
}

/// The pod's sysctls against the safe list and `allowed_unsafe` (the kubelet's `Admit`).
pub fn admit(pod: &Pod, allowed_unsafe: &[String]) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let sysctls = spec
        .security_context
        .as_ref()
        .and_then(|context| context.sysctls.as_deref())
        .unwrap_or_default();
    let (host_network, host_ipc) = (
        spec.host_network.unwrap_or(false),
        spec.host_ipc.unwrap_or(false),
    );
    let patterns: Vec<_> = SAFE
        .iter()
        .map(|name| (*name).to_owned())
        .chain(allowed_unsafe.iter().cloned())
        .map(|pattern| pattern_namespace(&pattern))
        .filter_map(|(name, prefixed, namespace)| Some((name, prefixed, namespace?)))
        .collect();
    for sysctl in sysctls {
        let name = normalize(&sysctl.name);
        let found = patterns
            .iter()
            .filter(|(pattern, prefixed, _)| match prefixed {
                true => name.starts_with(pattern.as_str()),
                false => &name == pattern,
            })
            // An exact name is looked up before the prefixes, as the kubelet's two maps.
            .min_by_key(|(_, prefixed, _)| *prefixed);
        let error = match found {
            None => format!("{name:?} not allowlisted"),
            Some((_, _, namespace))
                if (*namespace == Namespace::Ipc && host_ipc)
                    || (*namespace == Namespace::Net && host_network) =>
            {
                format!(
                    "{name:?} not allowed with host {} enabled",
                    namespace.name()
                )
            }
            Some(_) => continue,
        };
        return Err(Rejection::new(
            FORBIDDEN_REASON,
            format!("forbidden sysctl: {error}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut manifest = json!({"spec": {"containers": []}});
        for (key, value) in spec.as_object().unwrap() {
            manifest["spec"][key] = value.clone();
        }
        serde_json::from_value(manifest).unwrap()
    }

    fn with(sysctl: &str) -> serde_json::Value {
        json!({"securityContext": {"sysctls": [{"name": sysctl, "value": "1"}]}})
    }

    #[test]
    fn safe_sysctls_pass_and_others_need_the_nodes_allowlist() {
        assert_eq!(admit(&pod(with("kernel.shm_rmid_forced")), &[]), Ok(()));
        assert_eq!(admit(&pod(with("kernel/shm_rmid_forced")), &[]), Ok(()));
        let refused = admit(&pod(with("kernel.msgmax")), &[]).unwrap_err();
        assert_eq!(refused.reason, "SysctlForbidden");
        assert_eq!(
            refused.message,
            "forbidden sysctl: \"kernel.msgmax\" not allowlisted"
        );
        assert_eq!(
            admit(&pod(with("kernel.msgmax")), &["kernel.msg*".to_owned()]),
            Ok(())
        );
    }

    #[test]
    fn a_namespaced_sysctl_is_refused_while_the_pod_shares_the_hosts_namespace() {
        let mut spec = with("net.ipv4.tcp_syncookies");
        spec["hostNetwork"] = json!(true);
        assert_eq!(
            admit(&pod(spec), &[]).unwrap_err().message,
            "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host Net enabled"
        );
        let mut spec = with("kernel.shm_rmid_forced");
        spec["hostIPC"] = json!(true);
        assert!(admit(&pod(spec), &[]).is_err());
    }

    #[test]
    fn allowlist_entries_must_be_namespaced() {
        assert_eq!(pattern_error("net.core.somaxconn"), None);
        assert_eq!(pattern_error("kernel.msg*"), None);
        assert_eq!(
            pattern_error("kernel.panic").as_deref(),
            Some("the sysctls \"kernel.panic\" are not known to be namespaced")
        );
        assert_eq!(
            normalize("net/ipv4/conf/eno2.100/rp_filter"),
            "net.ipv4.conf.eno2/100.rp_filter"
        );
    }
}
