//! The kubelet's service lister over kube-rs: one watch of every Service per API client (so one
//! per process for a node, whatever its pod count), kept as the few fields the service-link
//! variables use, by namespace (`watched_set`).

use k8s_openapi::api::core::v1::Service;
use nodepulse_actors::ports::{ApiRecovery, ServiceLink, ServiceLinkPort, ServiceLister};

use super::watched_set::{ByKey, WatchedSet};

/// Every Service of the cluster, as the watch has them so far.
pub struct ServiceCache(WatchedSet<ServiceLink>);

impl ServiceCache {
    /// Starts the watch of every Service on `runtime`.
    pub fn start(
        client: kube::Client,
        recovery: ApiRecovery,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        Self(WatchedSet::start(client, recovery, runtime, link))
    }
}

/// The fields of `service` the variables use.
fn link(service: &Service) -> Option<ServiceLink> {
    let spec = service.spec.as_ref();
    Some(ServiceLink {
        namespace: service.metadata.namespace.clone()?,
        name: service.metadata.name.clone()?,
        cluster_ip: spec.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
        ports: (spec.and_then(|s| s.ports.as_ref()))
            .into_iter()
            .flatten()
            .map(|port| ServiceLinkPort {
                name: port.name.clone().unwrap_or_default(),
                port: port.port,
                protocol: port.protocol.clone().unwrap_or_default(),
            })
            .collect(),
    })
}

impl ServiceLister for ServiceCache {
    fn has_synced(&self) -> bool {
        self.0.has_synced()
    }

    fn services_for(&self, namespace: &str) -> Vec<ServiceLink> {
        self.0.read(|services| services_for(services, namespace))
    }
}

/// The Services of `namespace` and of `default`, each once.
fn services_for(services: &ByKey<ServiceLink>, namespace: &str) -> Vec<ServiceLink> {
    let mut namespaces = vec![namespace];
    if namespace != "default" {
        namespaces.push("default");
    }
    namespaces
        .into_iter()
        .flat_map(|ns| {
            let from = (ns.to_owned(), String::new());
            services
                .range(from..)
                .take_while(move |((service_ns, _), _)| service_ns == ns)
                .map(|(_, link)| link.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(namespace: &str, name: &str, spec: serde_json::Value) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": namespace, "name": name},
            "spec": spec,
        }))
        .expect("a Service")
    }

    #[test]
    fn a_service_is_kept_as_the_fields_its_variables_use() {
        let web = service(
            "app",
            "web",
            serde_json::json!({"clusterIP": "10.0.0.5", "ports": [{"name": "http", "port": 80}]}),
        );
        assert_eq!(
            link(&web),
            Some(ServiceLink {
                namespace: "app".to_owned(),
                name: "web".to_owned(),
                cluster_ip: "10.0.0.5".to_owned(),
                ports: vec![ServiceLinkPort {
                    name: "http".to_owned(),
                    port: 80,
                    protocol: String::new(),
                }],
            })
        );
        assert_eq!(link(&Service::default()), None, "no name, no link");
    }

    #[test]
    fn a_pod_sees_its_namespaces_services_and_defaults_once() {
        let mut set = ByKey::new();
        for (namespace, name) in [("app", "web"), ("default", "kubernetes"), ("other", "db")] {
            let ip = serde_json::json!({"clusterIP": "10.0.0.9"});
            let link = link(&service(namespace, name, ip)).expect("a link");
            set.insert((link.namespace.clone(), link.name.clone()), link);
        }
        let names = |ns: &str| -> Vec<String> {
            services_for(&set, ns).into_iter().map(|s| s.name).collect()
        };
        assert_eq!(names("app"), ["web", "kubernetes"]);
        assert_eq!(names("default"), ["kubernetes"]);
    }
}
