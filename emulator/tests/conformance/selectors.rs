//! Field and label selectors on lists.

use serde_json::{Value, json};

use crate::common::{Cluster, unique};

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .map(|i| {
            i.iter()
                .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn pods_are_selected_by_spec_node_name_and_metadata_name() {
    let cluster = Cluster::start().await;
    let (node_a, node_b) = (unique("sel-node"), unique("sel-node"));
    let (pod_a, pod_b) = (unique("sel-pod"), unique("sel-pod"));
    for (pod, node) in [(&pod_a, &node_a), (&pod_b, &node_b)] {
        let reply = cluster
            .post("/api/v1/namespaces/default/pods", &json!({"metadata": {"name": pod}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1"}]}}))
            .await;
        assert_eq!(reply.status, 201);
    }
    let list = cluster
        .get(&format!(
            "/api/v1/pods?fieldSelector=spec.nodeName%3D{node_a}"
        ))
        .await;
    assert_eq!(names(&list.body), std::slice::from_ref(&pod_a));
    let list = cluster.get(&format!("/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3D{pod_b},metadata.namespace%3Ddefault")).await;
    assert_eq!(names(&list.body), std::slice::from_ref(&pod_b));
    let list = cluster.get(&format!("/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3D{node_a},status.phase!%3DSucceeded")).await;
    assert_eq!(names(&list.body), [pod_a]);
}

#[tokio::test]
async fn label_selectors_support_every_operator() {
    let cluster = Cluster::start().await;
    let run = unique("run");
    let (web, db, bare) = (unique("web"), unique("db"), unique("bare"));
    for (name, labels) in [
        (&web, json!({"run": run, "tier": "web"})),
        (&db, json!({"run": run, "tier": "db"})),
        (&bare, json!({"run": run})),
    ] {
        assert_eq!(
            cluster
                .post(
                    "/api/v1/nodes",
                    &json!({"metadata": {"name": name, "labels": labels}})
                )
                .await
                .status,
            201
        );
    }
    let cluster = &cluster;
    let select = |selector: &str| {
        let path = format!(
            "/api/v1/nodes?labelSelector=run%3D{run},{}",
            selector.replace('=', "%3D").replace(' ', "%20")
        );
        async move { names(&cluster.get(&path).await.body) }
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(select("tier=web").await, std::slice::from_ref(&web));
    assert_eq!(
        select("tier!=web").await,
        sorted(vec![db.clone(), bare.clone()])
    );
    assert_eq!(
        select("tier in (web,db)").await,
        sorted(vec![web.clone(), db.clone()])
    );
    assert_eq!(
        select("tier notin (web)").await,
        sorted(vec![db.clone(), bare.clone()])
    );
    assert_eq!(select("tier").await, sorted(vec![web.clone(), db.clone()]));
    assert_eq!(select("!tier").await, [bare]);
}

#[tokio::test]
async fn unsupported_field_selectors_are_400() {
    let cluster = Cluster::start().await;
    let reply = cluster
        .get("/api/v1/nodes?fieldSelector=spec.nodeName%3Dx")
        .await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (400, Some("BadRequest"))
    );
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("field label not supported: spec.nodeName")),
        "{}",
        reply.body["message"]
    );
}
