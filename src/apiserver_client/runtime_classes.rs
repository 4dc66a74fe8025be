//! The kubelet's RuntimeClass manager over kube-rs: one watch of every `node.k8s.io/v1`
//! RuntimeClass per API client (the Node authorizer lets a node get, list and watch them),
//! kept as name → handler.

use k8s_openapi::api::node::v1::RuntimeClass;
use nodepulse_actors::ports::{ApiRecovery, RuntimeClassLister};

use super::watched_set::WatchedSet;

/// Every RuntimeClass of the cluster, as the watch has them so far.
pub struct RuntimeClassCache(WatchedSet<String>);

impl RuntimeClassCache {
    /// Starts the watch of every RuntimeClass on `runtime`.
    pub fn start(
        client: kube::Client,
        recovery: ApiRecovery,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let handler = |class: &RuntimeClass| Some(class.handler.clone());
        Self(WatchedSet::start(client, recovery, runtime, handler))
    }
}

impl RuntimeClassLister for RuntimeClassCache {
    fn has_synced(&self) -> bool {
        self.0.has_synced()
    }

    fn handler(&self, name: &str) -> Option<String> {
        self.0
            .read(|classes| classes.get(&(String::new(), name.to_owned())).cloned())
    }
}
