//! Services as kube-apiserver serves them to a node's service lister: the `kubernetes`
//! Service of `default` (the range's first address, `https` 443), a new Service's defaults
//! and allocated cluster IP, the port rules' 422s.

use serde_json::json;

use crate::common::{Cluster, unique};

const NS: &str = "/api/v1/namespaces/default";

#[tokio::test]
async fn the_kubernetes_service_has_the_ranges_first_address_and_https_443() {
    let cluster = Cluster::start().await;
    let reply = cluster.get(&format!("{NS}/services/kubernetes")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["spec"]["clusterIP"], "10.0.0.1");
    assert_eq!(reply.body["spec"]["type"], "ClusterIP");
    let port = &reply.body["spec"]["ports"][0];
    assert_eq!(
        (
            port["name"].as_str(),
            port["port"].as_i64(),
            port["protocol"].as_str()
        ),
        (Some("https"), Some(443), Some("TCP"))
    );
}

#[tokio::test]
async fn a_new_service_gets_a_cluster_ip_of_the_range_and_the_apis_defaults() {
    let cluster = Cluster::start().await;
    let name = unique("svc");
    let reply = cluster
        .post(
            &format!("{NS}/services"),
            &json!({"metadata": {"name": name}, "spec": {"ports": [{"name": "http", "port": 8080}]}}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let spec = &reply.body["spec"];
    let ip = spec["clusterIP"].as_str().unwrap_or_default().to_owned();
    assert!(ip.starts_with("10.0.0.") && ip != "10.0.0.1", "{ip}");
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(
        spec["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": 8080}])
    );
    let listed = cluster
        .get(&format!("{NS}/services?fieldSelector=metadata.name={name}"))
        .await;
    assert_eq!(
        listed.body["items"][0]["spec"]["clusterIP"],
        ip.as_str(),
        "{}",
        listed.body
    );
    let taken = cluster
        .post(
            &format!("{NS}/services"),
            &json!({"metadata": {"name": unique("svc")}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}),
        )
        .await;
    assert_eq!(taken.status, 422, "{}", taken.body);
    let message = taken.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("provided IP is already allocated"),
        "{message}"
    );
}

#[tokio::test]
async fn a_service_without_ports_or_with_unnamed_ones_is_invalid() {
    let cluster = Cluster::start().await;
    for (spec, field) in [
        (json!({}), "spec.ports: Required value"),
        (
            json!({"ports": [{"name": "a", "port": 80}, {"port": 81}]}),
            "spec.ports[1].name: Required value",
        ),
    ] {
        let reply = cluster
            .post(
                &format!("{NS}/services"),
                &json!({"metadata": {"name": unique("svc")}, "spec": spec}),
            )
            .await;
        assert_eq!(reply.status, 422, "{}", reply.body);
        let message = reply.body["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{message}");
    }
}
