//! kube-controller-manager's controllers that keep what every namespace holds, as one watcher
//! of the store: the service-account controller re-creates a deleted `default` ServiceAccount,
//! the root-CA publisher puts a deleted or changed `kube-root-ca.crt` back. New namespaces get
//! both as they are created (`http::handlers`, the server's seed), so nothing waits on this.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::broadcast::{self, error::RecvError};

use crate::api::StoredKind;
use crate::root_ca::{ROOT_CA_CONFIG_MAP, publish};
use crate::service_accounts::{DEFAULT_SERVICE_ACCOUNT, ensure_default};
use crate::store::{Change, EventType, Store, meta_str};

/// Starts the watcher. It watches from the current revision before returning, so no later
/// change is missed; it runs until `shutdown` flips or its sender is gone.
pub fn spawn(
    store: Arc<Store>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let changes = store.subscribe_changes();
    tokio::spawn(run(store, changes, shutdown))
}

async fn run(
    store: Arc<Store>,
    mut changes: broadcast::Receiver<Arc<Change>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(change) => react(&store, &change, SystemTime::now()),
                // Missed changes: sync every namespace, as an informer's relist would.
                Err(RecvError::Lagged(_)) => {
                    for namespace in store.list(StoredKind::Namespace, None, |_| true).0 {
                        let name = meta_str(&namespace, "name");
                        ensure_default(&store, name, SystemTime::now());
                        publish(&store, name, SystemTime::now());
                    }
                }
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// The informers' handlers: a deleted ServiceAccount (the controller then makes sure
/// `default` exists), a changed or deleted `kube-root-ca.crt`.
fn react(store: &Store, change: &Change, now: SystemTime) {
    let (name, namespace) = (
        meta_str(&change.object, "name"),
        meta_str(&change.object, "namespace"),
    );
    match (change.kind, change.event_type) {
        (StoredKind::ServiceAccount, EventType::Deleted) if name == DEFAULT_SERVICE_ACCOUNT => {
            ensure_default(store, namespace, now);
        }
        (StoredKind::ConfigMap, EventType::Modified | EventType::Deleted)
            if name == ROOT_CA_CONFIG_MAP =>
        {
            publish(store, namespace, now);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::api::resource::{CONFIG_MAPS, NAMESPACES, SERVICE_ACCOUNTS};
    use crate::api::{ApiResource, StoredKind};
    use crate::store::{DeleteOptions, ObjectKey};

    /// Deletes `name` of `resource` in namespace `ns` with the controllers running, and returns
    /// the UIDs before and after it came back.
    async fn deleted_and_back(resource: &ApiResource, name: &str) -> (String, String) {
        let store = Arc::new(Store::new(100, 100));
        let now = SystemTime::now();
        store
            .create(&NAMESPACES, json!({"metadata": {"name": "ns"}}), now)
            .expect("namespace");
        ensure_default(&store, "ns", now);
        publish(&store, "ns", now);
        let key = ObjectKey::new("ns", name);
        let uid = |store: &Store| {
            store
                .get(resource.stored, &key)
                .map(|object| meta_str(&object, "uid").to_string())
        };
        let before = uid(&store).expect("made with the namespace");
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let mut changes = store.subscribe_changes();
        let _controllers = spawn(store.clone(), shutdown);
        store
            .delete(resource, &key, &DeleteOptions::default(), now)
            .expect("deleted");
        let back = async {
            loop {
                let change = changes.recv().await.expect("changes");
                if change.kind == resource.stored && change.event_type == EventType::Added {
                    break;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), back)
            .await
            .expect("made again within 10 s");
        (before, uid(&store).expect("there again"))
    }

    #[tokio::test]
    async fn a_deleted_default_service_account_is_made_again() {
        let (before, after) = deleted_and_back(&SERVICE_ACCOUNTS, DEFAULT_SERVICE_ACCOUNT).await;
        assert_ne!(before, after);
    }

    #[tokio::test]
    async fn a_deleted_root_ca_config_map_is_published_again() {
        let (before, after) = deleted_and_back(&CONFIG_MAPS, ROOT_CA_CONFIG_MAP).await;
        assert_ne!(before, after);
    }

    /// In a namespace that has neither object, so a reaction would show as a write.
    #[test]
    fn other_objects_and_additions_are_left_alone() {
        let store = Store::new(100, 100);
        store
            .create(
                &NAMESPACES,
                json!({"metadata": {"name": "ns"}}),
                SystemTime::now(),
            )
            .expect("namespace");
        let revision = store.revision();
        let change = |kind, event_type, name: &str| Change {
            kind,
            event_type,
            object: Arc::new(json!({"metadata": {"name": name, "namespace": "ns"}})),
            previous: None,
            revision: 1,
        };
        for (kind, event_type, name) in [
            (StoredKind::ServiceAccount, EventType::Deleted, "robot"),
            (StoredKind::ConfigMap, EventType::Deleted, "other"),
            (StoredKind::ConfigMap, EventType::Added, ROOT_CA_CONFIG_MAP),
        ] {
            react(&store, &change(kind, event_type, name), SystemTime::now());
        }
        assert_eq!(store.revision(), revision, "nothing written");
        react(
            &store,
            &change(StoredKind::ServiceAccount, EventType::Deleted, "default"),
            SystemTime::now(),
        );
        assert!(store.revision() > revision, "the check sees a write");
    }
}
