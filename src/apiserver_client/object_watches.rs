//! The kubelet's `Watch` change-detection strategy for the ConfigMaps and Secrets its pods read
//! (`watch_based_manager.go`): each object is watched on its own (a `metadata.name` field
//! selector in its namespace, which the node authorizer allows) from its first read on, and
//! every read after that is answered from the watch. A volume's remount every sync period and a
//! container's environment then cost no request, where a live `GET` each time cost one per pod
//! and minute. A watch nobody read for five sync periods (at least a minute) is stopped, as the
//! kubelet's idle recycler stops it; an immutable object's watch stops once it has been read,
//! and the object is kept. The kubelet registers each pod's objects when the pod is added and
//! drops a watch when its last pod goes; here the first read registers, and idleness or the
//! node authorizer's 403 (no pod of this node refers to the object any more) drops: a watch
//! the API server refuses is not retried for ever, the next read starts a new one.

use std::{
    collections::HashMap,
    fmt::Debug,
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{ConfigMap, Secret},
};
use kube::{Api, Resource, runtime::watcher};
use nodepulse_actors::ports::{ApiError, ApiRecovery, ApiResult};
use serde::de::DeserializeOwned;
use tokio::{sync::watch, task::AbortHandle, time::Instant};

use super::{errors::from_kube, resume::resuming};

/// The kubelet's floor for the idle time (`minIdleTime`).
const MIN_IDLE: Duration = Duration::from_secs(60);
/// How often idle watches are looked for (the kubelet's recycler runs every minute).
const RECYCLE_EVERY: Duration = Duration::from_secs(60);

/// What a kind needs to be watched here.
pub trait Watched:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The plural the kubelet's errors name (`configmaps`, `secrets`).
    const PLURAL: &'static str;
    /// `immutable: true`: the object can no longer change, so its watch can stop.
    fn immutable(&self) -> bool;
}

impl Watched for ConfigMap {
    const PLURAL: &'static str = "configmaps";
    fn immutable(&self) -> bool {
        self.immutable == Some(true)
    }
}

impl Watched for Secret {
    const PLURAL: &'static str = "secrets";
    fn immutable(&self) -> bool {
        self.immutable == Some(true)
    }
}

/// One object's watch as its readers see it.
#[derive(Debug, Clone)]
enum Seen<K> {
    /// The first list has not come back yet.
    Listing,
    /// It has: the object, or `None` when there is none of that name.
    Listed(Option<Arc<K>>),
    /// The first list failed (a 403, say); the watch keeps trying.
    Failed(ApiError),
}

struct Entry<K> {
    seen: watch::Receiver<Seen<K>>,
    watch: AbortHandle,
    last_read: Instant,
}

impl<K> Drop for Entry<K> {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

type Entries<K> = HashMap<(String, String), Entry<K>>;

/// The watched objects of one kind, for every pod one API client serves (a fleet's nodes
/// share them).
pub struct ObjectWatches<K: Watched> {
    entries: Arc<Mutex<Entries<K>>>,
    client: kube::Client,
    recovery: ApiRecovery,
    runtime: tokio::runtime::Handle,
    /// How long a read waits for a new watch's first list (a `GET`'s own bound).
    first_list_timeout: Duration,
    recycler: AbortHandle,
}

impl<K: Watched> ObjectWatches<K> {
    /// Watches through `client` on `runtime`; `sync_period` is the kubelet's
    /// `syncFrequency`, five of which make a watch idle.
    pub fn new(
        client: kube::Client,
        recovery: ApiRecovery,
        runtime: &tokio::runtime::Handle,
        sync_period: Duration,
        first_list_timeout: Duration,
    ) -> Self {
        let entries: Arc<Mutex<Entries<K>>> = Arc::default();
        let max_idle = sync_period.saturating_mul(5).max(MIN_IDLE);
        let recycler = runtime
            .spawn(recycle_idle(Arc::downgrade(&entries), max_idle))
            .abort_handle();
        Self {
            entries,
            client,
            recovery,
            runtime: runtime.clone(),
            first_list_timeout,
            recycler,
        }
    }

    /// The object `namespace/name` as its watch has it, the watch started by this first read.
    pub async fn get(&self, namespace: &str, name: &str) -> ApiResult<K> {
        let mut seen = self.reader(namespace, name);
        let waited = tokio::time::timeout(
            self.first_list_timeout,
            seen.wait_for(|seen| !matches!(seen, Seen::Listing)),
        )
        .await;
        // Still `Listing` when the watch did not list in time (or ended with this cache).
        let current = match waited {
            Ok(Ok(seen)) => seen.clone(),
            Ok(Err(_)) | Err(_) => Seen::Listing,
        };
        match current {
            Seen::Listed(Some(object)) => {
                if object.immutable() {
                    self.stop_watching(namespace, name);
                }
                Ok(K::clone(&object))
            }
            Seen::Listed(None) => Err(ApiError::NotFound(format!(
                "{} \"{name}\" not found",
                K::PLURAL
            ))),
            Seen::Failed(error) => Err(error),
            Seen::Listing => Err(ApiError::Timeout(self.first_list_timeout)),
        }
    }

    /// The entry's receiver, the entry made (and its watch started) when there is none.
    fn reader(&self, namespace: &str, name: &str) -> watch::Receiver<Seen<K>> {
        let mut entries = lock(&self.entries);
        let key = (namespace.to_owned(), name.to_owned());
        let now = Instant::now();
        if let Some(entry) = entries.get_mut(&key) {
            entry.last_read = now;
            return entry.seen.clone();
        }
        let (sender, seen) = watch::channel(Seen::Listing);
        let api = Api::<K>::namespaced(self.client.clone(), namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let events = resuming(watcher(api, config), self.recovery.clone());
        let forget = forget_entry(Arc::downgrade(&self.entries), key.clone());
        let watch = self
            .runtime
            .spawn(follow(events, sender, forget))
            .abort_handle();
        entries.insert(
            key,
            Entry {
                seen: seen.clone(),
                watch,
                last_read: now,
            },
        );
        seen
    }

    /// An immutable object's watch stops; what it listed stays for the readers after.
    fn stop_watching(&self, namespace: &str, name: &str) {
        if let Some(entry) = lock(&self.entries).get(&(namespace.to_owned(), name.to_owned())) {
            entry.watch.abort();
        }
    }
}

impl<K: Watched> Drop for ObjectWatches<K> {
    fn drop(&mut self) {
        self.recycler.abort();
    }
}

fn lock<K>(entries: &Mutex<Entries<K>>) -> MutexGuard<'_, Entries<K>> {
    // Each entry is inserted or removed whole; a panic elsewhere leaves nothing half-made.
    entries.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes the entry `key` when it is still the one whose readers `seen` serves (a newer entry
/// of the same object is left alone).
fn forget_entry<K: Watched>(
    entries: Weak<Mutex<Entries<K>>>,
    key: (String, String),
) -> impl FnOnce(&watch::Sender<Seen<K>>) + Send + 'static {
    move |seen| {
        let Some(entries) = entries.upgrade() else {
            return;
        };
        let mut entries = lock(&entries);
        if entries
            .get(&key)
            .is_some_and(|entry| entry.seen.same_channel(&seen.subscribe()))
        {
            // The entry's drop aborts this very task, which ends here anyway.
            entries.remove(&key);
            nodepulse_actors::shrink::map_after_removal(&mut entries);
        }
    }
}

/// Whether the API server refuses this node the object: the node authorizer's answer once no
/// pod bound to the node refers to it (or not yet: a new pod's first read, retried by its
/// reader as a `GET` would be).
fn forbidden(error: &ApiError) -> bool {
    matches!(error, ApiError::Refused { code: 403, .. })
}

/// Applies one object's watch events to what its readers see, until it is aborted, or until
/// the API server refuses the watch (then readers get the refusal and `forget` drops the
/// entry, so the next read watches anew instead of this one retrying for ever).
async fn follow<K: Watched>(
    mut events: futures::stream::BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    seen: watch::Sender<Seen<K>>,
    forget: impl FnOnce(&watch::Sender<Seen<K>>),
) {
    // The object of a relist in progress (`Init` .. `InitDone`).
    let mut relisted: Option<Option<Arc<K>>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted = Some(None),
            Ok(watcher::Event::InitApply(object)) => relisted = Some(Some(Arc::new(object))),
            Ok(watcher::Event::InitDone) => {
                seen.send_replace(Seen::Listed(relisted.take().flatten()));
            }
            Ok(watcher::Event::Apply(object)) => {
                seen.send_replace(Seen::Listed(Some(Arc::new(object))));
            }
            Ok(watcher::Event::Delete(_)) => {
                seen.send_replace(Seen::Listed(None));
            }
            Err(error) => {
                let error = watch_error(error);
                if forbidden(&error) {
                    tracing::debug!(%error, kind = K::PLURAL, "the watch is refused; stopped watching");
                    seen.send_replace(Seen::Failed(error));
                    forget(&seen);
                    return;
                }
                // Once listed, readers keep the last state while the watch resumes.
                seen.send_if_modified(|current| {
                    if matches!(current, Seen::Listed(_)) {
                        return false;
                    }
                    *current = Seen::Failed(error);
                    true
                });
            }
        }
    }
}

fn watch_error(error: watcher::Error) -> ApiError {
    match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => from_kube(error),
        watcher::Error::WatchError(status) => ApiError::Refused {
            code: status.code,
            reason: status.reason,
            message: status.message,
        },
        watcher::Error::NoResourceVersion => ApiError::Refused {
            code: 500,
            reason: "NoResourceVersion".to_owned(),
            message: watcher::Error::NoResourceVersion.to_string(),
        },
    }
}

/// Every [`RECYCLE_EVERY`], drops the watches unread for `max_idle`; ends with the cache.
async fn recycle_idle<K: Watched>(entries: Weak<Mutex<Entries<K>>>, max_idle: Duration) {
    loop {
        tokio::time::sleep(RECYCLE_EVERY).await;
        let Some(entries) = entries.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut entries = lock(&entries);
        entries.retain(|(namespace, name), entry| {
            let idle = now.saturating_duration_since(entry.last_read) >= max_idle;
            if idle {
                tracing::debug!(%namespace, %name, kind = K::PLURAL, ?max_idle, "not read for long; stopped watching");
            }
            !idle
        });
        nodepulse_actors::shrink::map_after_removal(&mut entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16) -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(
            kube::core::Status::failure("no relationship found", "Forbidden")
                .with_code(code)
                .boxed(),
        ))
    }

    /// An entry for `key` fed by `events`; the entries and its readers' receiver.
    async fn followed(
        events: Vec<Result<watcher::Event<ConfigMap>, watcher::Error>>,
    ) -> (
        Arc<Mutex<Entries<ConfigMap>>>,
        watch::Receiver<Seen<ConfigMap>>,
    ) {
        let entries: Arc<Mutex<Entries<ConfigMap>>> = Arc::default();
        let key = ("ns".to_owned(), "cm".to_owned());
        let (sender, seen) = watch::channel(Seen::Listing);
        let forget = forget_entry(Arc::downgrade(&entries), key.clone());
        let stream = futures::stream::iter(events)
            .chain(futures::stream::pending())
            .boxed();
        let task = tokio::spawn(follow(stream, sender, forget));
        lock(&entries).insert(
            key,
            Entry {
                seen: seen.clone(),
                watch: task.abort_handle(),
                last_read: Instant::now(),
            },
        );
        // On paused time the clock only moves once the watch task has nothing left to do.
        tokio::time::sleep(Duration::from_secs(1)).await;
        (entries, seen)
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_the_api_server_refuses_is_dropped_and_its_readers_get_the_refusal() {
        let listed = watcher::Event::InitApply(ConfigMap::default());
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(listed),
            Ok(watcher::Event::InitDone),
            Err(refused(403)),
        ];
        let (entries, seen) = followed(events).await;
        assert!(lock(&entries).is_empty(), "the refused watch is forgotten");
        assert!(
            matches!(
                &*seen.borrow(),
                Seen::Failed(ApiError::Refused { code: 403, .. })
            ),
            "{:?}",
            seen.borrow()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_failing_otherwise_keeps_its_entry_and_what_it_listed() {
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(ConfigMap::default())),
            Ok(watcher::Event::InitDone),
            Err(refused(500)),
        ];
        let (entries, seen) = followed(events).await;
        assert_eq!(lock(&entries).len(), 1, "the watch goes on resuming");
        assert!(matches!(&*seen.borrow(), Seen::Listed(Some(_))));
    }
}
