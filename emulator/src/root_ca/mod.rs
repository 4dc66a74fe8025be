//! kube-controller-manager's root-CA publisher (`pkg/controller/certificates/rootcacertpublisher`):
//! a `kube-root-ca.crt` ConfigMap with the cluster CA in every namespace, created with the
//! namespace and re-created or reset whenever someone deletes or changes it. The emulator
//! serves plain HTTP, so the CA is a fixed certificate (`ca.crt`, no key kept) that only fills
//! the pods' `ca.crt` files.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};

use crate::api::StoredKind;
use crate::api::resource::CONFIG_MAPS;
use crate::store::{Change, EventType, ObjectKey, Store, meta_str};

/// The ConfigMap's name (`RootCACertConfigMapName`).
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// The CA bundle published as `ca.crt`.
pub const ROOT_CA_PEM: &str = include_str!("ca.crt");

const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// `syncNamespace`: creates the namespace's ConfigMap, or puts back its data and annotation
/// when they differ. A namespace that is gone is not an error (the publisher drops it too).
pub fn publish(store: &Store, namespace: &str, now: SystemTime) {
    let data = json!({"ca.crt": ROOT_CA_PEM});
    let key = ObjectKey::new(namespace, ROOT_CA_CONFIG_MAP);
    let result = match store.get(StoredKind::ConfigMap, &key) {
        None => store
            .create(
                &CONFIG_MAPS,
                json!({"metadata": {"name": ROOT_CA_CONFIG_MAP, "namespace": namespace,
                    "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data}),
                now,
            )
            .map(drop),
        Some(current) if up_to_date(&current, &data) => Ok(()),
        Some(_) => store
            .update(&CONFIG_MAPS, &key, None, |current| {
                let mut fixed = current.clone();
                fixed["data"] = data.clone();
                if !fixed["metadata"]["annotations"].is_object() {
                    fixed["metadata"]["annotations"] = json!({});
                }
                fixed["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
                Ok(fixed)
            })
            .map(drop),
    };
    match result {
        Ok(()) => {}
        // Gone with its namespace, or a write that raced this one (the next change re-syncs).
        Err(error) if matches!(error.code, 404 | 409) => {}
        Err(error) => {
            tracing::warn!(namespace, message = %error.message, "cannot publish the root CA ConfigMap");
        }
    }
}

fn up_to_date(config_map: &Value, data: &Value) -> bool {
    config_map.get("data") == Some(data)
        && config_map
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
            .and_then(Value::as_str)
            .is_some_and(|d| !d.is_empty())
}

/// Starts the publisher's informer handlers: a deleted or changed `kube-root-ca.crt` is
/// published again (new namespaces are published as they are created). Watches from the
/// current revision before returning, so no later change is missed; runs until `shutdown`
/// flips or its sender is gone.
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
                Ok(change) => {
                    let ours = change.kind == StoredKind::ConfigMap
                        && change.event_type != EventType::Added
                        && meta_str(&change.object, "name") == ROOT_CA_CONFIG_MAP;
                    if ours {
                        publish(&store, meta_str(&change.object, "namespace"), SystemTime::now());
                    }
                }
                // Missed changes: resync every namespace, as an informer's relist would.
                Err(RecvError::Lagged(_)) => {
                    for namespace in store.list(StoredKind::Namespace, None, |_| true).0 {
                        publish(&store, meta_str(&namespace, "name"), SystemTime::now());
                    }
                }
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resource::NAMESPACES;
    use crate::store::DeleteOptions;

    fn store_with(namespace: &str) -> Store {
        let store = Store::new(100, 100);
        store
            .create(
                &NAMESPACES,
                json!({"metadata": {"name": namespace}}),
                SystemTime::now(),
            )
            .expect("namespace");
        store
    }

    fn config_map(store: &Store, namespace: &str) -> Option<Arc<Value>> {
        store.get(
            StoredKind::ConfigMap,
            &ObjectKey::new(namespace, ROOT_CA_CONFIG_MAP),
        )
    }

    #[test]
    fn publish_creates_the_config_map_and_puts_back_changed_data() {
        let store = store_with("ns");
        publish(&store, "ns", SystemTime::now());
        let created = config_map(&store, "ns").expect("published");
        assert_eq!(created["data"], json!({"ca.crt": ROOT_CA_PEM}));
        assert!(ROOT_CA_PEM.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert_eq!(
            created["metadata"]["annotations"][DESCRIPTION_ANNOTATION],
            DESCRIPTION
        );
        let key = ObjectKey::new("ns", ROOT_CA_CONFIG_MAP);
        store
            .update(&CONFIG_MAPS, &key, None, |current| {
                let mut changed = current.clone();
                changed["data"] = json!({"ca.crt": "tampered"});
                Ok(changed)
            })
            .expect("changed");
        publish(&store, "ns", SystemTime::now());
        let fixed = config_map(&store, "ns").expect("still there");
        assert_eq!(fixed["data"], json!({"ca.crt": ROOT_CA_PEM}));
        assert_eq!(fixed["metadata"]["uid"], created["metadata"]["uid"]);
    }

    #[test]
    fn publish_in_a_missing_namespace_does_nothing() {
        let store = Store::new(100, 100);
        publish(&store, "gone", SystemTime::now());
        assert_eq!(config_map(&store, "gone"), None);
    }

    #[tokio::test]
    async fn a_deleted_config_map_is_published_again() {
        let store = Arc::new(store_with("ns"));
        publish(&store, "ns", SystemTime::now());
        let first = config_map(&store, "ns").expect("published");
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let mut republished = store.subscribe_changes();
        let _publisher = spawn(store.clone(), shutdown);
        store
            .delete(
                &CONFIG_MAPS,
                &ObjectKey::new("ns", ROOT_CA_CONFIG_MAP),
                &DeleteOptions::default(),
                SystemTime::now(),
            )
            .expect("deleted");
        let added = async {
            loop {
                let change = republished.recv().await.expect("changes");
                if change.event_type == EventType::Added {
                    break;
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), added)
            .await
            .expect("published again within 10 s");
        let second = config_map(&store, "ns").expect("published again");
        assert_ne!(second["metadata"]["uid"], first["metadata"]["uid"]);
        assert_eq!(second["data"], first["data"]);
    }
}
