//! The node log query on the kubelet API (`/logs/?query=…`), as the upstream `NodeLogQuery`
//! specs meet it: off by default (the query is ignored and `/var/log` listed), and with
//! `enableSystemLogQuery` an empty query is a 400, a path beside a query or an option out of
//! bounds a 406 with the kubelet's field errors, a service journald does not know is read from
//! `/var/log/<service>.log` (or said missing), a file query serves that file; and the
//! upstream specs' `kubectl get --raw …/proxy/logs/?query=kubelet` through the API server's node
//! proxy. The node's `/var/log` is a directory of the test's (`hostRoot`); `journalctl` is the
//! host's (with no journal, or no `nodepulse-test-*` unit in it, the files answer).

use k8s_openapi::api::core::v1::Node;

use crate::{
    kubelet_api::{serve, serve_trusting},
    kubelet_api_logs::{kubectl, kubectl_available},
};
use nodepulse_testkit::{cluster::TestCluster, kubelet_client::TestCa};

/// A host root whose `/var/log` is the test's and whose `/proc` is the real one (read at start).
fn host_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(root.path().join("var/log")).expect("mkdir");
    std::os::unix::fs::symlink("/proc", root.path().join("proc")).expect("symlink");
    root
}

#[tokio::test]
async fn the_node_log_query_answers_from_the_log_directory_with_the_kubelets_errors() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let host = host_root();
    let logs = host.path().join("var/log");
    // A unit no journal on any host has: the kubelet's heuristics then read its file.
    let service = format!("nodepulse-test-{}", std::process::id());
    std::fs::write(logs.join(format!("{service}.log")), "service started\n").expect("write");
    std::fs::write(logs.join("app.log"), "app line\n").expect("write");

    let off = serve(
        &cluster,
        &ca,
        &format!(
            "authorization: {{mode: AlwaysAllow}}\nhostRoot: {}\n",
            host.path().display()
        ),
        None,
    )
    .await;
    let ignored = off.client(Some(&admin)).get("/logs/?query").await;
    assert_eq!(ignored.status, 200, "{}", ignored.body);
    assert!(
        ignored.body.contains("<a href=\"app.log\">app.log</a>"),
        "{}",
        ignored.body
    );

    let on = serve(
        &cluster,
        &ca,
        &format!(
            "authorization: {{mode: AlwaysAllow}}\nhostRoot: {}\nenableSystemLogQuery: true\n",
            host.path().display()
        ),
        None,
    )
    .await;
    let client = on.client(Some(&admin));
    let answer = |path: String| {
        let client = &client;
        async move {
            let answer = client.get(&path).await;
            (answer.status, answer.body)
        }
    };
    assert_eq!(
        answer("/logs/?query".into()).await,
        (
            400,
            "query: Invalid value: []string{\"\"}: query cannot be empty\n".into()
        )
    );
    let found = client.get(&format!("/logs/?query={service}")).await;
    assert_eq!(
        (found.status, found.body.as_str()),
        (200, "service started\n")
    );
    assert_eq!(
        found
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/plain;charset=UTF-8")
    );
    assert_eq!(
        answer(format!("/logs/?query={service}-gone")).await,
        (200, format!("\nlog not found for {service}-gone\n"))
    );
    assert_eq!(
        answer(format!("/logs/?query={service}&boot=0")).await,
        (
            200,
            format!(
                "\noptions present and query resolved to log files for [{service}]\ntry without specifying options\n"
            )
        )
    );
    assert_eq!(
        answer("/logs/?query=/app.log".into()).await,
        (200, "app line\n".into())
    );
    assert_eq!(
        answer("/logs/app.log?query=kubelet".into()).await,
        (406, "path not allowed in query mode\n".into())
    );
    assert_eq!(
        answer("/logs/?query=kubelet&boot=1&tailLines=100001".into()).await,
        (
            406,
            "[boot: Invalid value: 1: must be less than 1, tailLines: Invalid value: 100001: must be between 0 and 100000, inclusive]\n".into()
        )
    );
    assert_eq!(
        answer("/logs/?query=/../etc/passwd".into()).await,
        (
            406,
            "query: Invalid value: []string{\"/../etc/passwd\"}: statat /../etc/passwd: path escapes from parent\n".into()
        )
    );
    let gzip = client
        .request(
            "GET",
            &format!("/logs/?query={service}"),
            &[("accept-encoding", "gzip")],
        )
        .await;
    assert_eq!(
        gzip.headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
    // Without a query the directory is served as before.
    let (status, listing) = answer("/logs/?unrelated=1".into()).await;
    assert_eq!(status, 200);
    assert!(
        listing.contains("<a href=\"app.log\">app.log</a>"),
        "{listing}"
    );
}

/// The upstream `NodeLogQuery` specs that go through the API server, as they run:
/// `kubectl get --raw /api/v1/nodes/<node>/proxy/logs/?query=kubelet` (and `&boot=0`) shows
/// "kubelet", `?query` alone makes kubectl fail. The emulator's node proxy dials the Node's
/// InternalIP (127.0.0.1 here, which kube-apiserver refuses to proxy to: "address not
/// allowed", so a real cluster skips this) at its `daemonEndpoints` port.
#[actix_rt::test]
async fn the_upstream_specs_query_reaches_the_node_through_the_api_servers_node_proxy() {
    let test = "the_upstream_specs_query_reaches_the_node_through_the_api_servers_node_proxy";
    if !kubectl_available(test) {
        return;
    }
    let cluster = TestCluster::start_with(nodepulse_emulator::EmulatorConfig {
        kubelet_preferred_address_types: vec!["InternalIP".into()],
        ..nodepulse_emulator::EmulatorConfig::for_tests()
    })
    .await;
    let Some(emulator) = cluster.emulator.as_ref() else {
        nodepulse_testkit::skip::skipped(test, "the emulator (a loopback node address it dials)");
        return;
    };
    let host = host_root();
    let service = format!("nodepulse-test-{}", std::process::id());
    let logs = host.path().join("var/log");
    std::fs::write(logs.join(format!("{service}.log")), "service started\n").expect("write");
    let served = serve_trusting(
        &cluster,
        emulator.kubelet_client_ca_pem(),
        &format!(
            "authorization: {{mode: AlwaysAllow}}\nhostRoot: {}\nenableSystemLogQuery: true\n",
            host.path().display()
        ),
    )
    .await;
    let (node, port) = served.node();
    let nodes: kube::Api<Node> = kube::Api::all(cluster.client.clone());
    let object: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": node},
    }))
    .expect("a Node");
    nodes
        .create(&Default::default(), &object)
        .await
        .expect("the Node is created");
    let status = serde_json::json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    nodes
        .patch_status(node, &Default::default(), &kube::api::Patch::Merge(status))
        .await
        .expect("its address and port");

    let raw = |query: String| {
        let kubeconfig = cluster.kubeconfig.clone();
        let path = format!("/api/v1/nodes/{node}/proxy/logs/?{query}");
        async move { kubectl(&kubeconfig, &["get", "--raw", &path]).await }
    };
    let (ok, kubelet, stderr) = raw("query=kubelet".into()).await;
    assert!(ok && kubelet.contains("kubelet"), "{kubelet}{stderr}");
    let (ok, boot, stderr) = raw("query=kubelet&boot=0".into()).await;
    assert!(ok && boot.contains("kubelet"), "{boot}{stderr}");
    let (ok, found, stderr) = raw(format!("query={service}")).await;
    assert_eq!(
        (ok, found.as_str()),
        (true, "service started\n"),
        "{stderr}"
    );
    let (ok, _, stderr) = raw("query".into()).await;
    assert!(!ok, "an empty query is an error");
    assert!(
        stderr.contains("BadRequest") || stderr.contains("400"),
        "{stderr}"
    );
}
