//! kube-controller-manager's root-CA publisher (`pkg/controller/certificates/rootcacertpublisher`):
//! a `kube-root-ca.crt` ConfigMap with the cluster CA in every namespace, created with the
//! namespace and re-created or reset whenever someone deletes or changes it (the watching is
//! `namespace_controllers`'). The emulator
//! serves plain HTTP, so the CA is a fixed certificate (`ca.crt`, no key kept) that only fills
//! the pods' `ca.crt` files.

use std::time::SystemTime;

use serde_json::{Value, json};

use crate::api::StoredKind;
use crate::api::resource::CONFIG_MAPS;
use crate::store::{ObjectKey, Store};

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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::resource::NAMESPACES;

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
}
