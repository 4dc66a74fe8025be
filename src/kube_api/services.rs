//! The kubelet's service lister over kube-rs: one watch of every Service per API client (so one
//! per process for a node, whatever its pod count), kept as the few fields the service-link
//! variables use, by namespace. A relist replaces the whole set, so Services deleted while the
//! watch was down go too. The watch runs on the client's runtime and ends with the cache.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, RwLock},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::{Api, runtime::watcher};
use nodepulse_actors::ports::{ApiRecovery, ServiceLink, ServiceLinkPort, ServiceLister};
use tokio::task::AbortHandle;

use super::resume::resuming;

type ByNamespace = HashMap<String, BTreeMap<String, ServiceLink>>;

#[derive(Default)]
struct Listed {
    synced: bool,
    services: ByNamespace,
}

/// Every Service of the cluster, as the watch has them so far.
pub struct ServiceCache {
    listed: Arc<RwLock<Listed>>,
    watch: AbortHandle,
}

impl ServiceCache {
    /// Starts the watch of every Service on `runtime`.
    pub fn start(
        client: kube::Client,
        recovery: ApiRecovery,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let listed = Arc::new(RwLock::new(Listed::default()));
        let state = Arc::clone(&listed);
        let watch = runtime.spawn(async move {
            let api = Api::<Service>::all(client);
            let mut events = resuming(watcher(api, watcher::Config::default()), recovery);
            let mut relisted: Option<ByNamespace> = None;
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                let mut listed = state
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match event {
                    watcher::Event::Init => relisted = Some(ByNamespace::new()),
                    watcher::Event::InitApply(service) => {
                        if let (Some(set), Some(link)) = (relisted.as_mut(), link(&service)) {
                            insert(set, link);
                        }
                    }
                    watcher::Event::InitDone => {
                        listed.services = relisted.take().unwrap_or_default();
                        listed.synced = true;
                    }
                    watcher::Event::Apply(service) => {
                        if let Some(link) = link(&service) {
                            insert(&mut listed.services, link);
                        }
                    }
                    watcher::Event::Delete(service) => {
                        if let Some(link) = link(&service)
                            && let Some(names) = listed.services.get_mut(&link.namespace)
                        {
                            names.remove(&link.name);
                        }
                    }
                }
            }
        });
        Self {
            listed,
            watch: watch.abort_handle(),
        }
    }
}

impl Drop for ServiceCache {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

fn insert(set: &mut ByNamespace, link: ServiceLink) {
    set.entry(link.namespace.clone())
        .or_default()
        .insert(link.name.clone(), link);
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
        self.listed
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .synced
    }

    fn services_for(&self, namespace: &str) -> Vec<ServiceLink> {
        let listed = self
            .listed
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        services_for(&listed.services, namespace)
    }
}

/// The Services of `namespace` and of `default`, each once.
fn services_for(services: &ByNamespace, namespace: &str) -> Vec<ServiceLink> {
    let mut namespaces = vec![namespace];
    if namespace != "default" {
        namespaces.push("default");
    }
    namespaces
        .into_iter()
        .filter_map(|ns| services.get(ns))
        .flat_map(|names| names.values().cloned())
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
        let mut set = ByNamespace::new();
        for (namespace, name) in [("app", "web"), ("default", "kubernetes"), ("other", "db")] {
            let ip = serde_json::json!({"clusterIP": "10.0.0.9"});
            insert(
                &mut set,
                link(&service(namespace, name, ip)).expect("a link"),
            );
        }
        let names = |ns: &str| -> Vec<String> {
            services_for(&set, ns).into_iter().map(|s| s.name).collect()
        };
        assert_eq!(names("app"), ["web", "kubernetes"]);
        assert_eq!(names("default"), ["kubernetes"]);
    }
}
