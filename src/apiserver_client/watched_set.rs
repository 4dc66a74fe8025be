//! A watch of every object of one kind, kept as the few fields a reader needs, by namespace
//! and name: the informer-backed listers the kubelet reads Services and RuntimeClasses from.
//! One per API client; a relist replaces the whole set, so objects deleted while the watch was
//! down go too. The watch runs on the client's runtime and ends with the set.

use std::{
    collections::BTreeMap,
    fmt::Debug,
    sync::{Arc, PoisonError, RwLock},
};

use futures::StreamExt;
use kube::{Api, Resource, runtime::watcher};
use nodepulse_actors::ports::ApiRecovery;
use serde::de::DeserializeOwned;
use tokio::task::AbortHandle;

use super::resume::resuming;

/// Objects by (namespace, name); the namespace is empty for cluster-scoped kinds.
pub type ByKey<T> = BTreeMap<(String, String), T>;

struct Listed<T> {
    synced: bool,
    items: ByKey<T>,
}

/// Every object of a kind, as the watch has them so far.
pub struct WatchedSet<T> {
    listed: Arc<RwLock<Listed<T>>>,
    watch: AbortHandle,
}

fn key<K: Resource>(object: &K) -> Option<(String, String)> {
    let meta = object.meta();
    Some((
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone()?,
    ))
}

impl<T: Send + Sync + 'static> WatchedSet<T> {
    /// Starts the watch of every `K` on `runtime`, keeping what `keep` makes of each object
    /// (`None`: nothing worth keeping).
    pub fn start<K>(
        client: kube::Client,
        recovery: ApiRecovery,
        runtime: &tokio::runtime::Handle,
        keep: fn(&K) -> Option<T>,
    ) -> Self
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let listed = Arc::new(RwLock::new(Listed {
            synced: false,
            items: ByKey::new(),
        }));
        let state = Arc::clone(&listed);
        let watch = runtime.spawn(async move {
            let api = Api::<K>::all(client);
            let mut events = resuming(watcher(api, watcher::Config::default()), recovery);
            let mut relisted: Option<ByKey<T>> = None;
            let entry = |object: &K| Some((key(object)?, keep(object)?));
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                let mut listed = state.write().unwrap_or_else(PoisonError::into_inner);
                match event {
                    watcher::Event::Init => relisted = Some(ByKey::new()),
                    watcher::Event::InitApply(object) => {
                        if let Some(set) = relisted.as_mut() {
                            set.extend(entry(&object));
                        }
                    }
                    watcher::Event::InitDone => {
                        listed.items = relisted.take().unwrap_or_default();
                        listed.synced = true;
                    }
                    watcher::Event::Apply(object) => listed.items.extend(entry(&object)),
                    watcher::Event::Delete(object) => {
                        if let Some(key) = key(&object) {
                            listed.items.remove(&key);
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

    /// Whether the objects were listed at least once (an informer's `HasSynced`).
    pub fn has_synced(&self) -> bool {
        self.listed
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .synced
    }

    /// What `read` makes of the set as it is now.
    pub fn read<R>(&self, read: impl FnOnce(&ByKey<T>) -> R) -> R {
        read(
            &self
                .listed
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .items,
        )
    }
}

impl<T> Drop for WatchedSet<T> {
    fn drop(&mut self) {
        self.watch.abort();
    }
}
