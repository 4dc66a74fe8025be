//! kube-rs's typed client, watcher and reflector work unchanged against the cluster.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use crate::common::{Cluster, eventually, unique};

#[tokio::test]
async fn typed_client_creates_renews_and_lists_leases() {
    let cluster = Cluster::start().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-node-lease");
    let name = unique("lease");
    let mut lease = Lease::default();
    lease.metadata.name = Some(name.clone());
    lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some(name.clone()),
        lease_duration_seconds: Some(40),
        ..Default::default()
    });
    let created = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease created");
    cluster.created(
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        &name,
    );
    let mut renewed = created.clone();
    if let Some(spec) = renewed.spec.as_mut() {
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    }
    let replaced = leases
        .replace(&name, &PostParams::default(), &renewed)
        .await
        .expect("lease renewed");
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let stale = leases
        .replace(&name, &PostParams::default(), &renewed)
        .await
        .expect_err("stale replace conflicts");
    assert!(
        matches!(&stale, kube::Error::Api(s) if s.code == 409),
        "{stale:?}"
    );
    let listed = leases
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1);
}

#[tokio::test]
async fn typed_strategic_status_patch_merges_conditions() {
    let cluster = Cluster::start().await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let name = unique("typed");
    cluster.create_node(&name).await;
    let condition = |kind: &str, status: &str| NodeCondition {
        type_: kind.into(),
        status: status.into(),
        ..Default::default()
    };
    let status = |conditions| json!({"status": NodeStatus { conditions: Some(conditions), ..Default::default() }});
    nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(status(vec![
                condition("Ready", "True"),
                condition("PIDPressure", "False"),
            ])),
        )
        .await
        .expect("patch");
    let node = nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(status(vec![condition("Ready", "False")])),
        )
        .await
        .expect("patch");
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str());
    assert_eq!((conditions.len(), ready), (2, Some("False")));
}

#[tokio::test]
async fn watcher_sees_applied_changes() {
    let cluster = Cluster::start().await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let name = unique("watcher");
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = Box::pin(watcher(nodes.clone(), config).applied_objects());
    cluster.create_node(&name).await;
    let seen = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("event in time");
    let node = seen.expect("stream open").expect("no watch error");
    assert_eq!(node.metadata.name.as_deref(), Some(name.as_str()));
}

#[tokio::test]
async fn streaming_list_watcher_sees_existing_objects() {
    let cluster = Cluster::start().await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let name = unique("streaming");
    cluster.create_node(&name).await;
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={name}"))
        .streaming_lists();
    let mut stream = Box::pin(watcher(nodes, config).applied_objects());
    let node = tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("event in time")
        .expect("open")
        .expect("ok");
    assert_eq!(node.metadata.name.as_deref(), Some(name.as_str()));
}

#[tokio::test]
async fn reflector_store_follows_creates_and_deletes() {
    let cluster = Cluster::start().await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let label = unique("refl");
    let (reader, writer) = reflector::store::<Node>();
    let config = watcher::Config::default().labels(&format!("refl={label}"));
    let stream = reflector(writer, watcher(nodes.clone(), config)).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    let names: Vec<String> = (0..3).map(|_| unique("refl")).collect();
    for name in &names {
        let reply = cluster
            .post(
                "/api/v1/nodes",
                &json!({"metadata": {"name": name, "labels": {"refl": label}}}),
            )
            .await;
        assert_eq!(reply.status, 201);
    }
    eventually(
        "reflector holds 3 nodes",
        Duration::from_secs(20),
        || async { (reader.state().len() == 3).then_some(()) },
    )
    .await;
    cluster
        .delete(&format!("/api/v1/nodes/{}", names[0]), None)
        .await;
    eventually(
        "reflector drops the deleted node",
        Duration::from_secs(20),
        || async { (reader.state().len() == 2).then_some(()) },
    )
    .await;
    task.abort();
}
