//! A TLS bootstrap interrupted by a restart, as the kubelet's without rotation
//! (`LoadClientCert`): the key is kept in `<certDir>/kubelet-client.key.tmp` while the CSR is
//! pending and the CSR is named from it (`node-csr-<digest>`), so a daemon killed before its
//! CSR was approved and started again sends no second CSR: it finds the first, checks that it
//! is the same request, waits on it, and joins once it is approved.

use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Api;
use nodepulse_testkit::{
    bootstrap::{
        CsrSweep, NodeFiles, Token, UNAPPROVED_GROUP, approve, bootstrap_kubeconfig, node_ready,
        requests_by, tls_emulator,
    },
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
};

#[actix_rt::test]
async fn a_bootstrap_restarted_before_approval_waits_on_its_first_csr() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    // Nobody approves this token's CSRs: the test does, after the restart.
    let token = Token::create(&cluster, UNAPPROVED_GROUP).await;
    let node = unique_node_name("restarted");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user()],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let cert_dir = files.cert_dir();
    let kubeconfig = files.kubeconfig();
    let args = files.args(&bootstrap, &cert_dir);
    let config = attack_config("");
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let by_token = || {
        let (csrs, user) = (csrs.clone(), token.user());
        async move { requests_by(&csrs, &[user]).await }
    };

    let first = DaemonProcess::spawn_with_args(&kubeconfig, &node, &config, &[], &args);
    eventually_async("the first run's CSR is pending", || async {
        !by_token().await.is_empty()
    })
    .await;
    let sent = by_token().await;
    let name = sent[0].metadata.name.clone().expect("a named CSR");
    assert!(name.starts_with("node-csr-"), "{name}");
    let pending_key = cert_dir.join("kubelet-client.key.tmp");
    let key = std::fs::read_to_string(&pending_key).expect("the pending key is kept");
    first.signal("KILL");
    drop(first);

    let mut second = DaemonProcess::spawn_with_args(&kubeconfig, &node, &config, &[], &args);
    let reused = second
        .wait_event("csr for this node already exists, reusing")
        .await;
    assert_eq!(reused["csr"], name.as_str(), "{reused}");
    second.wait_event("csr for this node is still valid").await;
    approve(&csrs, &sent[0]).await;
    second.wait_running().await;
    eventually_async("the node is Ready", || node_ready(&cluster.client, &node)).await;

    let all = by_token().await;
    let names: Vec<_> = all.iter().filter_map(|c| c.metadata.name.clone()).collect();
    assert_eq!(names, [name], "one CSR over both runs");
    assert!(
        !pending_key.exists(),
        "the pending key is removed once the certificate is stored"
    );
    let stored = std::fs::read_to_string(cert_dir.join("kubelet-client-current.pem"))
        .expect("the certificate is stored");
    let key_block = stored
        .find("-----BEGIN PRIVATE KEY-----")
        .map(|at| &stored[at..])
        .expect("the stored file ends with the key");
    let stored_key = rcgen::KeyPair::from_pem(key_block).expect("the stored key");
    let kept_key = rcgen::KeyPair::from_pem(&key).expect("the kept key");
    assert_eq!(
        stored_key.public_key_raw(),
        kept_key.public_key_raw(),
        "the certificate is for the key kept over the restart"
    );
    drop(second);
}
