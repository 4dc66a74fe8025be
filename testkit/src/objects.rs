//! API objects a test creates beside its pods (ConfigMaps, Secrets), deleted when it ends, and
//! the Events nodepulse recorded about a pod (polled until the wanted one shows) or a Node.

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use serde_json::{Value, json};

use crate::{
    cleanup::{Owned, own},
    cluster::TestCluster,
    eventually_async,
};

pub async fn create_config_map(
    cluster: &TestCluster,
    namespace: &str,
    name: &str,
    body: Value,
) -> ConfigMap {
    create_source(cluster, namespace, "ConfigMap", name, body).await
}

pub async fn create_secret(
    cluster: &TestCluster,
    namespace: &str,
    name: &str,
    body: Value,
) -> Secret {
    create_source(cluster, namespace, "Secret", name, body).await
}

/// Creates a ConfigMap or Secret (`kind`) for the test, deleted when it ends.
async fn create_source<K>(
    cluster: &TestCluster,
    namespace: &str,
    kind: &'static str,
    name: &str,
    body: Value,
) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let plural = if kind == "Secret" {
        "secrets"
    } else {
        "configmaps"
    };
    own(Owned::Object {
        path: format!("/api/v1/namespaces/{namespace}/{plural}/{name}"),
    });
    let mut object = json!({"metadata": {"name": name, "namespace": namespace}});
    if let (Value::Object(into), Value::Object(from)) = (&mut object, body) {
        into.extend(from);
    }
    Api::<K>::namespaced(cluster.client.clone(), namespace)
        .create(
            &PostParams::default(),
            &serde_json::from_value(object).expect(kind),
        )
        .await
        .unwrap_or_else(|e| panic!("the {kind} is created: {e}"))
}

/// Waits for an Event about `pod` (this UID) of `type_` and `reason` whose message passes
/// `message`; other writers' Events (the scheduler's) never match a reason nodepulse records.
pub async fn wait_pod_event(
    cluster: &TestCluster,
    pod: &Pod,
    type_: &str,
    reason: &str,
    message: impl Fn(&str) -> bool,
) {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let events = Api::<Event>::namespaced(cluster.client.clone(), namespace);
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    eventually_async(&format!("the {type_} {reason} event"), || async {
        events.list(&about).await.is_ok_and(|list| {
            list.items.iter().any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some(type_)
                    && e.message.as_deref().is_some_and(&message)
                    && e.involved_object.uid == pod.metadata.uid
            })
        })
    })
    .await;
}

/// The Events about this very pod (its UID), as the API has them now.
pub async fn pod_events(cluster: &TestCluster, pod: &Pod) -> Vec<Event> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let events = Api::<Event>::namespaced(cluster.client.clone(), namespace)
        .list(&about)
        .await
        .expect("the pod's events");
    (events.items.into_iter())
        .filter(|e| e.involved_object.uid == pod.metadata.uid)
        .collect()
}

/// nodepulse's Events about Node `node` with `reason`.
pub async fn events_about(cluster: &TestCluster, node: &str, reason: &str) -> Vec<Event> {
    let about = ListParams::default().fields(&format!(
        "involvedObject.kind=Node,involvedObject.name={node},reason={reason},source=kubelet"
    ));
    Api::<Event>::namespaced(cluster.client.clone(), "default")
        .list(&about)
        .await
        .expect("events listed")
        .items
}
