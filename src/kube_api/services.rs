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
        let mut namespaces = vec![namespace];
        if namespace != "default" {
            namespaces.push("default");
        }
        namespaces
            .into_iter()
            .filter_map(|ns| listed.services.get(ns))
            .flat_map(|names| names.values().cloned())
            .collect()
    }
}
