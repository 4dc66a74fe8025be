//! A `--kubeconfig` that still holds a valid client certificate is used as it is, as the
//! kubelet's `isClientConfigStillValid` decides before a bootstrap: a node given one with its
//! certificate inline and an empty certificate directory, beside a bootstrap kubeconfig, sends
//! no CSR, leaves the file as it was and runs as that certificate's node.

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Api;
use nodepulse_testkit::{
    bootstrap::{
        CsrSweep, KUBEADM_GROUP, NodeFiles, Token, bootstrap_kubeconfig, node_ready, requests_by,
        tls_emulator,
    },
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
};
use serde_json::Value;

#[actix_rt::test]
async fn a_kubeconfig_with_a_valid_inline_certificate_is_used_as_it_is() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let token = Token::create(&cluster, KUBEADM_GROUP).await;
    let node = unique_node_name("kept");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user(), format!("system:node:{node}")],
    };
    // A first join makes the node's certificate.
    let joined = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, joined.directory.path());
    let config = attack_config("");
    let first = DaemonProcess::start_with_args(
        &joined.kubeconfig(),
        &node,
        &config,
        &[],
        &joined.args(&bootstrap, &joined.cert_dir()),
    )
    .await;
    drop(first);
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    assert_eq!(requests_by(&csrs, &[token.user()]).await.len(), 1);

    // That certificate inline in a kubeconfig of its own, and an empty certificate directory.
    let pem = std::fs::read(joined.cert_dir().join("kubelet-client-current.pem")).expect("pem");
    let inline = base64::engine::general_purpose::STANDARD.encode(pem);
    let written: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(joined.kubeconfig()).expect("the written kubeconfig"),
    )
    .expect("YAML");
    let kubeconfig = serde_json::json!({"apiVersion": "v1", "kind": "Config",
        "clusters": written["clusters"],
        "users": [{"name": "node", "user": {"client-certificate-data": inline, "client-key-data": inline}}],
        "contexts": [{"name": "node", "context": {"cluster": "default-cluster", "user": "node"}}],
        "current-context": "node"});
    let files = NodeFiles::new();
    let text = serde_yaml_ng::to_string(&kubeconfig).expect("YAML");
    std::fs::write(files.kubeconfig(), &text).expect("written");
    let started = std::time::Instant::now();
    let second = DaemonProcess::start_with_args(
        &files.kubeconfig(),
        &node,
        &config,
        &[],
        &files.args(&bootstrap, &files.cert_dir()),
    )
    .await;
    second
        .wait_event("Kubeconfig exists and is valid, skipping bootstrap")
        .await;
    eventually_async("the node is Ready", || node_ready(&cluster.client, &node)).await;
    if let Some(emulator) = &cluster.emulator {
        // It runs as the inline certificate's node (only the emulator logs who).
        let user = format!("system:node:{node}");
        eventually_async("a Lease renewal by the node", || async {
            emulator.requests().iter().any(|r| {
                r.resource == "leases" && r.user == user && r.code < 300 && r.received > started
            })
        })
        .await;
    }
    assert_eq!(
        requests_by(&csrs, &[token.user()]).await.len(),
        1,
        "no second CSR"
    );
    assert_eq!(
        std::fs::read_to_string(files.kubeconfig()).expect("kept"),
        text,
        "the kubeconfig is not rewritten"
    );
    assert!(
        files.dated_certificates().is_empty(),
        "nothing stored: {:?}",
        files.dated_certificates()
    );
    drop(second);
}
