//! The kubelet's RuntimeClass manager over kube-rs: one watch of every `node.k8s.io/v1`
//! RuntimeClass per API client (the Node authorizer lets a node get, list and watch them),
//! kept as name → handler. A relist replaces the whole set, so classes deleted while the watch
//! was down go too. The watch runs on the client's runtime and ends with the cache.

use std::{
    collections::BTreeMap,
    sync::{Arc, PoisonError, RwLock},
};

use futures::StreamExt;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::{Api, runtime::watcher};
use nodepulse_actors::ports::{ApiRecovery, RuntimeClassLister};
use tokio::task::AbortHandle;

use super::resume::resuming;

#[derive(Default)]
struct Listed {
    synced: bool,
    handlers: BTreeMap<String, String>,
}

/// Every RuntimeClass of the cluster, as the watch has them so far.
pub struct RuntimeClassCache {
    listed: Arc<RwLock<Listed>>,
    watch: AbortHandle,
}

fn entry(class: &RuntimeClass) -> Option<(String, String)> {
    Some((class.metadata.name.clone()?, class.handler.clone()))
}

impl RuntimeClassCache {
    /// Starts the watch of every RuntimeClass on `runtime`.
    pub fn start(
        client: kube::Client,
        recovery: ApiRecovery,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let listed = Arc::new(RwLock::new(Listed::default()));
        let state = Arc::clone(&listed);
        let watch = runtime.spawn(async move {
            let api = Api::<RuntimeClass>::all(client);
            let mut events = resuming(watcher(api, watcher::Config::default()), recovery);
            let mut relisted: Option<BTreeMap<String, String>> = None;
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                let mut listed = state.write().unwrap_or_else(PoisonError::into_inner);
                match event {
                    watcher::Event::Init => relisted = Some(BTreeMap::new()),
                    watcher::Event::InitApply(class) => {
                        if let Some(set) = relisted.as_mut() {
                            set.extend(entry(&class));
                        }
                    }
                    watcher::Event::InitDone => {
                        listed.handlers = relisted.take().unwrap_or_default();
                        listed.synced = true;
                    }
                    watcher::Event::Apply(class) => listed.handlers.extend(entry(&class)),
                    watcher::Event::Delete(class) => {
                        if let Some((name, _)) = entry(&class) {
                            listed.handlers.remove(&name);
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

impl Drop for RuntimeClassCache {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

impl RuntimeClassLister for RuntimeClassCache {
    fn has_synced(&self) -> bool {
        self.listed
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .synced
    }

    fn handler(&self, name: &str) -> Option<String> {
        let listed = self.listed.read().unwrap_or_else(PoisonError::into_inner);
        listed.handlers.get(name).cloned()
    }
}
