//! Service-link environment variables, as the kubelet's `getServiceEnvVarMap` and its
//! `envvars` package make them: for the `kubernetes` Service of `default` always, and for every
//! Service of the pod's namespace when `enableServiceLinks` (default true), those with a cluster
//! IP get `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT[_<PORT NAME>]` and the Docker-link
//! `<NAME>_PORT[_<port>_<PROTO>[_PROTO|_PORT|_ADDR]]` (names upper-cased, `-` as `_`). Pure.

use std::collections::BTreeMap;

use crate::ports::ServiceLink;

/// The Service whose variables every pod gets, from `default`.
const MASTER_SERVICE: &str = "kubernetes";
const DEFAULT_NAMESPACE: &str = "default";

/// The service variables of a pod in `namespace`, by name.
pub fn service_env(
    services: &[ServiceLink],
    namespace: &str,
    enable_service_links: bool,
) -> BTreeMap<String, String> {
    let mut chosen: BTreeMap<&str, &ServiceLink> = BTreeMap::new();
    for service in services.iter().filter(|s| has_cluster_ip(s)) {
        if service.namespace == DEFAULT_NAMESPACE && service.name == MASTER_SERVICE {
            chosen.entry(&service.name).or_insert(service);
        } else if service.namespace == namespace && enable_service_links {
            chosen.insert(&service.name, service);
        }
    }
    let mut env = BTreeMap::new();
    for service in chosen.values() {
        add_variables(service, &mut env);
    }
    env
}

fn has_cluster_ip(service: &ServiceLink) -> bool {
    !service.cluster_ip.is_empty() && service.cluster_ip != "None"
}

fn variable_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

/// Go's `net.JoinHostPort`: an IPv6 address in brackets.
fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

fn add_variables(service: &ServiceLink, env: &mut BTreeMap<String, String>) {
    let Some(first) = service.ports.first() else {
        return;
    };
    let prefix = variable_name(&service.name);
    let ip = &service.cluster_ip;
    env.insert(format!("{prefix}_SERVICE_HOST"), ip.clone());
    env.insert(format!("{prefix}_SERVICE_PORT"), first.port.to_string());
    for port in service.ports.iter().filter(|p| !p.name.is_empty()) {
        env.insert(
            format!("{prefix}_SERVICE_PORT_{}", variable_name(&port.name)),
            port.port.to_string(),
        );
    }
    for (index, port) in service.ports.iter().enumerate() {
        let protocol = if port.protocol.is_empty() {
            "TCP"
        } else {
            port.protocol.as_str()
        };
        let (lower, upper) = (protocol.to_lowercase(), protocol.to_uppercase());
        let url = format!("{lower}://{}", host_port(ip, port.port));
        if index == 0 {
            env.insert(format!("{prefix}_PORT"), url.clone());
        }
        let port_prefix = format!("{prefix}_PORT_{}_{upper}", port.port);
        env.insert(format!("{port_prefix}_PROTO"), lower);
        env.insert(format!("{port_prefix}_PORT"), port.port.to_string());
        env.insert(format!("{port_prefix}_ADDR"), ip.clone());
        env.insert(port_prefix, url);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::ServiceLinkPort;

    fn service(namespace: &str, name: &str, ip: &str, ports: &[(&str, i32, &str)]) -> ServiceLink {
        ServiceLink {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            cluster_ip: ip.to_owned(),
            ports: ports
                .iter()
                .map(|(name, port, protocol)| ServiceLinkPort {
                    name: (*name).to_owned(),
                    port: *port,
                    protocol: (*protocol).to_owned(),
                })
                .collect(),
        }
    }

    fn cluster() -> Vec<ServiceLink> {
        vec![
            service(
                "default",
                "kubernetes",
                "10.0.0.1",
                &[("https", 443, "TCP")],
            ),
            service("app", "fooservice", "10.0.0.11", &[("", 8765, "TCP")]),
            service(
                "app",
                "my-db",
                "10.0.0.12",
                &[("sql", 5432, "TCP"), ("stats", 9100, "UDP")],
            ),
            service("app", "headless", "None", &[("", 80, "TCP")]),
            service("other", "elsewhere", "10.0.0.13", &[("", 80, "TCP")]),
        ]
    }

    #[test]
    fn a_pod_gets_its_namespaces_services_and_the_kubernetes_one_as_the_kubelet_names_them() {
        let env = service_env(&cluster(), "app", true);
        let expected: BTreeMap<String, String> = [
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.0.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.0.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.0.0.1"),
            ("FOOSERVICE_SERVICE_HOST", "10.0.0.11"),
            ("FOOSERVICE_SERVICE_PORT", "8765"),
            ("FOOSERVICE_PORT", "tcp://10.0.0.11:8765"),
            ("FOOSERVICE_PORT_8765_TCP", "tcp://10.0.0.11:8765"),
            ("FOOSERVICE_PORT_8765_TCP_PROTO", "tcp"),
            ("FOOSERVICE_PORT_8765_TCP_PORT", "8765"),
            ("FOOSERVICE_PORT_8765_TCP_ADDR", "10.0.0.11"),
            ("MY_DB_SERVICE_HOST", "10.0.0.12"),
            ("MY_DB_SERVICE_PORT", "5432"),
            ("MY_DB_SERVICE_PORT_SQL", "5432"),
            ("MY_DB_SERVICE_PORT_STATS", "9100"),
            ("MY_DB_PORT", "tcp://10.0.0.12:5432"),
            ("MY_DB_PORT_5432_TCP", "tcp://10.0.0.12:5432"),
            ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
            ("MY_DB_PORT_5432_TCP_PORT", "5432"),
            ("MY_DB_PORT_5432_TCP_ADDR", "10.0.0.12"),
            ("MY_DB_PORT_9100_UDP", "udp://10.0.0.12:9100"),
            ("MY_DB_PORT_9100_UDP_PROTO", "udp"),
            ("MY_DB_PORT_9100_UDP_PORT", "9100"),
            ("MY_DB_PORT_9100_UDP_ADDR", "10.0.0.12"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(env, expected);
    }

    #[test]
    fn without_service_links_only_the_kubernetes_service_is_given() {
        let env = service_env(&cluster(), "app", false);
        assert!(env.keys().all(|k| k.starts_with("KUBERNETES_")), "{env:?}");
        assert_eq!(env.len(), 8);
    }

    #[test]
    fn a_kubernetes_service_of_the_pods_namespace_wins_over_the_masters() {
        let mut services = cluster();
        services.push(service(
            "app",
            "kubernetes",
            "10.0.0.99",
            &[("", 80, "TCP")],
        ));
        let env = service_env(&services, "app", true);
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.0.0.99");
        let default_pod = service_env(&services, "default", true);
        assert_eq!(default_pod["KUBERNETES_SERVICE_HOST"], "10.0.0.1");
        let ipv6 = service_env(
            &[service(
                "default",
                "kubernetes",
                "fd00::1",
                &[("https", 443, "")],
            )],
            "x",
            true,
        );
        assert_eq!(ipv6["KUBERNETES_PORT"], "tcp://[fd00::1]:443");
    }
}
