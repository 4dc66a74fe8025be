//! Tests of the store's write rules.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::*;
use crate::api::resource::{LEASES, NAMESPACES, NODES, PODS};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_714_564_800)
}

fn store_with_default_namespace() -> Store {
    let store = Store::new(100, 100);
    store
        .create(&NAMESPACES, json!({"metadata": {"name": "default"}}), now())
        .expect("namespace");
    crate::service_accounts::ensure_default(&store, "default", now());
    store
}

fn rv(object: &Value) -> u64 {
    meta_str(object, "resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

#[test]
fn every_write_advances_one_global_resource_version() {
    let store = store_with_default_namespace();
    let node = store
        .create(&NODES, json!({"metadata": {"name": "n1"}}), now())
        .expect("create");
    let lease = store
        .create(
            &LEASES,
            json!({"metadata": {"name": "n1", "namespace": "default"}}),
            now(),
        )
        .expect("create");
    assert_eq!(rv(&lease), rv(&node) + 1);
    assert_eq!(store.revision(), rv(&lease));
}

#[test]
fn duplicate_names_and_missing_namespaces_are_rejected() {
    let store = store_with_default_namespace();
    store
        .create(&NODES, json!({"metadata": {"name": "n1"}}), now())
        .expect("create");
    let err = store
        .create(&NODES, json!({"metadata": {"name": "n1"}}), now())
        .expect_err("duplicate");
    assert_eq!((err.code, err.reason), (409, "AlreadyExists"));
    let err = store
        .create(&PODS, json!({"metadata": {"name": "p", "namespace": "nope"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}), now())
        .expect_err("no namespace");
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );
}

/// The ServiceAccount admission plugin, behind NamespaceLifecycle: a pod runs as an account
/// that exists (else 403), named by `serviceAccountName` or the v1 alias `serviceAccount`.
#[test]
fn a_pod_is_admitted_only_as_an_existing_service_account() {
    let store = store_with_default_namespace();
    let pod = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "i"}]);
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
    };
    let created = store
        .create(&PODS, pod("p1", json!({})), now())
        .expect("create");
    assert_eq!(
        (
            &created["spec"]["serviceAccountName"],
            &created["spec"]["serviceAccount"]
        ),
        (&json!("default"), &json!("default"))
    );
    let err = store
        .create(&PODS, pod("p2", json!({"serviceAccount": "robot"})), now())
        .expect_err("no such account");
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "pods \"p2\" is forbidden: error looking up service account default/robot: serviceaccount \"robot\" not found"
        )
    );
    let mut missing_namespace = pod("p3", json!({"serviceAccountName": "robot"}));
    missing_namespace["metadata"]["namespace"] = json!("nope");
    let err = store
        .create(&PODS, missing_namespace, now())
        .expect_err("no namespace");
    assert_eq!(err.code, 404, "NamespaceLifecycle admits first: {err}");
    store
        .create(
            &crate::api::resource::SERVICE_ACCOUNTS,
            json!({"metadata": {"name": "robot", "namespace": "default"}}),
            now(),
        )
        .expect("account");
    let created = store
        .create(&PODS, pod("p4", json!({"serviceAccount": "robot"})), now())
        .expect("create");
    assert_eq!(created["spec"]["serviceAccountName"], "robot");
}

#[test]
fn stale_resource_version_conflicts_and_noop_update_keeps_version() {
    let store = store_with_default_namespace();
    let node = store
        .create(&NODES, json!({"metadata": {"name": "n1"}}), now())
        .expect("create");
    let key = ObjectKey::new("", "n1");
    let updated = store
        .update(&NODES, &key, None, |cur| {
            let mut next = cur.clone();
            set_meta(&mut next, "labels", json!({"a": "b"}));
            Ok(next)
        })
        .expect("update");
    assert!(rv(&updated) > rv(&node));
    let err = store
        .update(&NODES, &key, None, |_| Ok((*node).clone()))
        .expect_err("stale");
    assert_eq!(err.reason, "Conflict");
    let same = store
        .update(&NODES, &key, None, |cur| Ok(cur.clone()))
        .expect("no-op");
    assert_eq!(rv(&same), rv(&updated));
}

#[test]
fn scheduled_pods_are_deleted_gracefully_and_removed_with_grace_zero() {
    let store = store_with_default_namespace();
    let pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
    store.create(&PODS, pod, now()).expect("create");
    let key = ObjectKey::new("default", "p");
    let first = store
        .delete(&PODS, &key, &DeleteOptions::default(), now())
        .expect("delete");
    let Deletion::Pending(pending) = first else {
        panic!("a scheduled pod must be deleted gracefully")
    };
    assert_eq!(pending["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(
        pending["metadata"]["deletionTimestamp"],
        "2024-05-01T12:00:30Z"
    );
    assert_eq!(pending["metadata"]["generation"], 2);
    let zero = DeleteOptions {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    assert!(matches!(
        store.delete(&PODS, &key, &zero, now()),
        Ok(Deletion::Removed(_))
    ));
    assert!(store.get(StoredKind::Pod, &key).is_none());
}

#[test]
fn uid_precondition_mismatch_is_a_conflict_naming_the_kind() {
    let store = store_with_default_namespace();
    let node = store
        .create(&NODES, json!({"metadata": {"name": "n1"}}), now())
        .expect("create");
    let options = DeleteOptions {
        preconditions: Some(delete::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = store
        .delete(&NODES, &ObjectKey::new("", "n1"), &options, now())
        .expect_err("precondition");
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on Node \"n1\": the UID in the precondition (other) does not match the UID in record ({}). The object might have been deleted and then recreated",
            meta_str(&node, "uid")
        )
    );
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let store = store_with_default_namespace();
    store
        .create(
            &NODES,
            json!({"metadata": {"name": "n1", "finalizers": ["x"]}}),
            now(),
        )
        .expect("create");
    let key = ObjectKey::new("", "n1");
    assert!(matches!(
        store.delete(&NODES, &key, &DeleteOptions::default(), now()),
        Ok(Deletion::Pending(_))
    ));
    store
        .update(&NODES, &key, None, |cur| {
            let mut next = cur.clone();
            set_meta(&mut next, "finalizers", json!([]));
            Ok(next)
        })
        .expect("remove finalizer");
    assert!(store.get(StoredKind::Node, &key).is_none());
}

#[test]
fn subscriptions_replay_history_after_a_version() {
    let store = store_with_default_namespace();
    let first = store
        .create(&NODES, json!({"metadata": {"name": "a"}}), now())
        .expect("create");
    store
        .create(&NODES, json!({"metadata": {"name": "b"}}), now())
        .expect("create");
    let sub = store
        .subscribe(StoredKind::Node, Some(rv(&first)))
        .expect("subscribe");
    let names: Vec<&str> = sub
        .initial
        .iter()
        .map(|c| meta_str(&c.object, "name"))
        .collect();
    assert_eq!(names, ["b"]);
    let fresh = store.subscribe(StoredKind::Node, None).expect("subscribe");
    assert_eq!(fresh.initial.len(), 2);
}

#[test]
fn a_shorter_grace_period_moves_the_deadline_back() {
    let store = store_with_default_namespace();
    let pod = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
    store.create(&PODS, pod, now()).expect("create");
    let key = ObjectKey::new("default", "p");
    store
        .delete(&PODS, &key, &DeleteOptions::default(), now())
        .expect("graceful");
    let later = now() + Duration::from_secs(5);
    let shorter = DeleteOptions {
        grace_period_seconds: Some(10),
        ..Default::default()
    };
    let Ok(Deletion::Pending(pod)) = store.delete(&PODS, &key, &shorter, later) else {
        panic!("still pending")
    };
    assert_eq!(pod["metadata"]["deletionTimestamp"], "2024-05-01T12:00:10Z");
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 10);
    let longer = DeleteOptions {
        grace_period_seconds: Some(60),
        ..Default::default()
    };
    let Ok(Deletion::Pending(same)) = store.delete(&PODS, &key, &longer, later) else {
        panic!("still pending")
    };
    assert_eq!(
        same["metadata"]["deletionGracePeriodSeconds"], 10,
        "a longer grace period is ignored"
    );
}

#[test]
fn only_leases_refuse_an_update_without_a_resource_version() {
    let store = store_with_default_namespace();
    let lease = store
        .create(
            &LEASES,
            json!({"metadata": {"name": "l1", "namespace": "default"}}),
            now(),
        )
        .expect("create");
    let key = ObjectKey::new("default", "l1");
    let without_rv = |object: &Value| {
        let mut next = object.clone();
        next["metadata"]
            .as_object_mut()
            .map(|m| m.remove("resourceVersion"));
        next["spec"] = json!({"holderIdentity": "x"});
        next
    };
    let err = store
        .update(&LEASES, &key, None, |cur| Ok(without_rv(cur)))
        .expect_err("leases need a resourceVersion");
    assert_eq!((err.code, err.reason), (422, "Invalid"));
    assert_eq!(store.get(StoredKind::Lease, &key), Some(lease));

    store
        .create(&NODES, json!({"metadata": {"name": "n1"}}), now())
        .expect("create");
    let updated = store
        .update(&NODES, &ObjectKey::new("", "n1"), None, |cur| {
            Ok(without_rv(cur))
        })
        .expect("nodes allow unconditional updates");
    assert_eq!(updated["spec"]["holderIdentity"], "x");
}

#[test]
fn storage_keys_follow_kube_apiserver_prefixes() {
    for (kind, key, expected) in [
        (
            StoredKind::Node,
            ObjectKey::new("", "n1"),
            "/registry/minions/n1",
        ),
        (
            StoredKind::Namespace,
            ObjectKey::new("", "ns"),
            "/registry/namespaces/ns",
        ),
        (
            StoredKind::Pod,
            ObjectKey::new("ns", "p"),
            "/registry/pods/ns/p",
        ),
        (
            StoredKind::Lease,
            ObjectKey::new("kube-node-lease", "n1"),
            "/registry/leases/kube-node-lease/n1",
        ),
        (
            StoredKind::Event,
            ObjectKey::new("default", "e"),
            "/registry/events/default/e",
        ),
    ] {
        assert_eq!(storage_key(kind, &key), expected);
    }
}

/// RuntimeClasses are stored and validated, and a pod naming one goes through the RuntimeClass
/// admission plugin: refused (403) while the class does not exist, given its overhead once it
/// does.
#[test]
fn a_pod_is_admitted_only_with_a_runtime_class_that_exists() {
    use crate::api::resource::RUNTIME_CLASSES;
    let store = store_with_default_namespace();
    let pod = json!({"metadata": {"name": "p", "namespace": "default"},
        "spec": {"runtimeClassName": "kata", "containers": [{"name": "c", "image": "i"}]}});
    let err = store
        .create(&PODS, pod.clone(), now())
        .expect_err("no such class");
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "pods \"p\" is forbidden: pod rejected: RuntimeClass \"kata\" not found"
        )
    );
    let err = store
        .create(
            &RUNTIME_CLASSES,
            json!({"metadata": {"name": "kata"}}),
            now(),
        )
        .expect_err("no handler");
    assert_eq!(err.code, 422, "{err}");
    store
        .create(
            &RUNTIME_CLASSES,
            json!({"metadata": {"name": "kata"}, "handler": "kata",
                "overhead": {"podFixed": {"cpu": "250m"}}}),
            now(),
        )
        .expect("the class");
    let created = store.create(&PODS, pod, now()).expect("admitted");
    assert_eq!(created["spec"]["overhead"], json!({"cpu": "250m"}));
}
