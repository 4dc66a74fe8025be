//! Joining a cluster as a kubeadm node does: nodepulse given only a bootstrap kubeconfig (a
//! bootstrap token) asks for its client certificate with a CSR, is approved and issued one,
//! writes it and the kubeconfig naming it, and runs as `system:node:<name>`; a short-lived
//! certificate is rotated before it expires with the node staying Ready; a denied CSR and a
//! refused token end the run with the kubelet's words. The tests create the bootstrap token
//! Secret and (on a real cluster) kubeadm's RBAC bindings, and delete them and the CSRs after.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant, SystemTime},
};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::{
    Api,
    api::{Patch, PatchParams},
    config::Kubeconfig,
};
use nodepulse_emulator::{FaultAction, FaultRule, Verb};
use nodepulse_testkit::{
    PATIENCE,
    bootstrap::{
        CsrSweep, KUBEADM_GROUP, NodeFiles, Token, UNAPPROVED_GROUP, bootstrap_kubeconfig,
        node_ready, not_after, requests_by, tls_emulator,
    },
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
    node_history::NodeHistory,
    skip::skipped,
};
use serde_json::json;

#[actix_rt::test]
async fn a_node_joins_with_only_a_bootstrap_kubeconfig_and_becomes_ready() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let token = Token::create(&cluster, KUBEADM_GROUP).await;
    let node = unique_node_name("joined");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user(), format!("system:node:{node}")],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let cert_dir = files.cert_dir();
    let kubeconfig = files.kubeconfig();
    assert!(!kubeconfig.exists());
    let daemon = DaemonProcess::start_with_args(
        &kubeconfig,
        &node,
        &attack_config(""),
        &[],
        &files.args(&bootstrap, &cert_dir),
    )
    .await;
    eventually_async("the joined node is Ready", || {
        node_ready(&cluster.client, &node)
    })
    .await;

    // The CSR is the kubelet's, made with the token and approved as kubeadm's binding says.
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let requests = requests_by(&csrs, &[token.user()]).await;
    assert_eq!(requests.len(), 1, "one CSR with the bootstrap token");
    let spec = &requests[0].spec;
    assert_eq!(
        spec.signer_name,
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    let mut usages = spec.usages.clone().unwrap_or_default();
    usages.sort();
    assert_eq!(usages, ["client auth", "digital signature"]);
    assert!(
        spec.groups
            .iter()
            .flatten()
            .any(|g| g == "system:bootstrappers")
    );
    // Without rotation, named from its key as the kubelet's `LoadClientCert` names it.
    let name = requests[0].metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("node-csr-"), "{name}");

    // The files: the dated certificate, the link to it, the kubeconfig naming the link.
    let dated = files.dated_certificates();
    assert_eq!(dated.len(), 1, "one dated certificate: {dated:?}");
    let current = cert_dir.join("kubelet-client-current.pem");
    assert_eq!(std::fs::read_link(&current).expect("a link"), dated[0]);
    let written = Kubeconfig::read_from(&kubeconfig).expect("the kubeconfig is written");
    let user = written.auth_infos[0].auth_info.clone().expect("a user");
    assert_eq!(user.client_certificate.as_deref(), current.to_str());
    assert_eq!(user.client_key.as_deref(), current.to_str());

    // It runs as the node: its writes are `system:node:<name>`'s (only the emulator logs who).
    if let Some(emulator) = &cluster.emulator {
        // The bootstrap token only asked for the certificate; the node did the rest, the
        // registration among it.
        let node_user = format!("system:node:{node}");
        let requests = emulator.requests();
        let by_token: Vec<String> = requests
            .iter()
            .filter(|r| r.user == token.user())
            .map(|r| r.resource.clone())
            .collect();
        assert!(!by_token.is_empty());
        assert!(
            by_token.iter().all(|r| r == "certificatesigningrequests"),
            "{by_token:?}"
        );
        assert!(
            requests
                .iter()
                .any(|r| r.user == node_user && r.resource == "nodes" && r.verb == Verb::Create),
            "the node registered itself as {node_user}"
        );
    }
    drop(daemon);
}

/// Links at every name the bootstrap writes, to a file of the test's: the kubeconfig's and the
/// pending key's `.partial`, and the dated certificate of each second of the next two minutes.
fn plant_links(files: &NodeFiles, victim: &Path) -> Vec<std::path::PathBuf> {
    let cert_dir = files.cert_dir();
    let mut names = vec![
        files.kubeconfig().with_extension("partial"),
        cert_dir.join("kubelet-client.key.tmp.partial"),
    ];
    let now = jiff::Timestamp::now();
    for second in 0..120 {
        let at = now + jiff::SignedDuration::from_secs(second);
        let stamp = at.strftime("%Y-%m-%d-%H-%M-%S");
        names.push(cert_dir.join(format!("kubelet-client-{stamp}.pem")));
    }
    for name in &names {
        std::os::unix::fs::symlink(victim, name).expect("a planted link");
    }
    names
}

#[actix_rt::test]
async fn a_bootstrap_writes_through_no_planted_link_and_leaves_the_cert_dirs_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let token = Token::create(&cluster, KUBEADM_GROUP).await;
    let node = unique_node_name("planted");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user(), format!("system:node:{node}")],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let cert_dir = files.cert_dir();
    std::fs::create_dir(&cert_dir).expect("the cert dir");
    std::fs::set_permissions(&cert_dir, std::fs::Permissions::from_mode(0o700)).expect("0700");
    let outside = tempfile::tempdir().expect("temp dir");
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "victim").expect("written");
    let planted = plant_links(&files, &victim);

    let daemon = DaemonProcess::start_with_args(
        &files.kubeconfig(),
        &node,
        &attack_config(""),
        &[],
        &files.args(&bootstrap, &cert_dir),
    )
    .await;
    eventually_async("the joined node is Ready", || {
        node_ready(&cluster.client, &node)
    })
    .await;
    drop(daemon);

    assert_eq!(
        std::fs::read_to_string(&victim).expect("the victim"),
        "victim",
        "written through a planted link"
    );
    let current = cert_dir.join("kubelet-client-current.pem");
    let dated = std::fs::read_link(&current).expect("the current link");
    assert!(planted.contains(&dated), "{dated:?} had a link planted");
    for written in [&dated, &files.kubeconfig()] {
        let metadata = std::fs::symlink_metadata(written).expect("written");
        assert!(metadata.file_type().is_file(), "{written:?} is a file");
        assert_eq!(metadata.permissions().mode() & 0o777, 0o600, "{written:?}");
    }
    let mode = std::fs::metadata(&cert_dir)
        .expect("there")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the cert dir keeps its owner's mode");
}

#[actix_rt::test]
async fn a_short_lived_certificate_is_rotated_with_no_failed_request_and_no_not_ready() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(150))).await;
    let Some(emulator) = &cluster.emulator else {
        // A real kube-controller-manager signs for a year unless --cluster-signing-duration
        // says otherwise, and the kubelet asks for no shorter lifetime.
        return skipped(
            "a_short_lived_certificate_is_rotated_with_no_failed_request_and_no_not_ready",
            "minutes-long certificates (the emulator's cluster_signing_duration)",
        );
    };
    let token = Token::create(&cluster, KUBEADM_GROUP).await;
    let node = unique_node_name("rotated");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user(), format!("system:node:{node}")],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let cert_dir = files.cert_dir();
    let daemon = DaemonProcess::start_with_args(
        &files.kubeconfig(),
        &node,
        &attack_config("rotateCertificates: true\n"),
        &[],
        &files.args(&bootstrap, &cert_dir),
    )
    .await;
    eventually_async("the joined node is Ready", || {
        node_ready(&cluster.client, &node)
    })
    .await;
    let history = NodeHistory::start(&cluster.client, &node).await;
    let first = files.dated_certificates()[0].clone();
    let first_expiry = not_after(&first);
    let until_expiry = first_expiry
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    let expired_at = Instant::now() + until_expiry;

    // Rotated before the first certificate's end: a second dated file, the link on it.
    daemon
        .wait_event_within(
            "Certificate rotation detected, shutting down client connections to start using new credentials",
            until_expiry,
        )
        .await;
    let dated = files.dated_certificates();
    assert!(dated.len() >= 2, "{dated:?}");
    let current = std::fs::read_link(cert_dir.join("kubelet-client-current.pem")).expect("a link");
    assert_ne!(current, first);
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let renewals = requests_by(&csrs, &[format!("system:node:{node}")]).await;
    assert!(!renewals.is_empty(), "the renewal is the node's own CSR");

    // Past the first certificate's end, the node still renews its Lease as itself: the new
    // certificate carries every connection.
    let lease_renewed_after_expiry = || {
        emulator.requests().into_iter().any(|r| {
            r.resource == "leases"
                && r.name == node
                && matches!(r.verb, Verb::Update | Verb::Patch)
                && r.received > expired_at + Duration::from_secs(1)
                && r.code < 300
                && r.user == format!("system:node:{node}")
        })
    };
    let deadline = expired_at + PATIENCE;
    while !lease_renewed_after_expiry() {
        assert!(
            Instant::now() < deadline,
            "no Lease renewal by the node after its first certificate expired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let failed: Vec<String> = emulator
        .requests()
        .into_iter()
        .filter(|r| {
            r.user == format!("system:node:{node}")
                && r.code >= 400
                && r.code != 404
                && r.code != 409
        })
        .map(|r| format!("{:?} {}/{} {}", r.verb, r.resource, r.subresource, r.code))
        .collect();
    assert!(failed.is_empty(), "failed requests by the node: {failed:?}");
    // Nor was any refused on the way (an expired certificate's 401 never reaches the log).
    let metrics = reqwest::get(format!("{}/metrics", daemon.debug))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let refused: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("nodepulse_rest_client_requests_total"))
        .filter(|l| l.contains("code=\"401\"") || l.contains("code=\"403\""))
        .collect();
    assert!(refused.is_empty(), "refused requests: {refused:?}");
    let not_ready: Vec<_> = history
        .versions()
        .into_iter()
        .filter(|v| v.conditions.get("Ready").is_some_and(|s| s != "True"))
        .collect();
    assert!(
        not_ready.is_empty(),
        "the node went NotReady: {not_ready:?}"
    );
    drop(daemon);
}

#[actix_rt::test]
async fn an_expired_certificate_while_the_server_answers_ends_the_run() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(150))).await;
    if !cluster.is_emulator() {
        return skipped(
            "an_expired_certificate_while_the_server_answers_ends_the_run",
            "minutes-long certificates and fault injection (the emulator)",
        );
    }
    let token = Token::create(&cluster, KUBEADM_GROUP).await;
    let node = unique_node_name("expired");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user(), format!("system:node:{node}")],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let cert_dir = files.cert_dir();
    let mut daemon = DaemonProcess::start_with_args(
        &files.kubeconfig(),
        &node,
        &attack_config("rotateCertificates: true\n"),
        &[],
        &files.args(&bootstrap, &cert_dir),
    )
    .await;
    // No CSR is accepted from now on, and the answer (403) says the server is there.
    cluster.faults().inject(
        FaultRule::new(FaultAction::Error {
            code: 403,
            message: Some("no more certificates".into()),
        })
        .resource("certificatesigningrequests")
        .verb(Verb::Create),
    );
    let expiry = not_after(&files.dated_certificates()[0]);
    let until_expiry = expiry.duration_since(SystemTime::now()).unwrap_or_default();
    let code = daemon.wait_exit(until_expiry + PATIENCE).await;
    let log = daemon.log_lines().join("\n");
    assert_eq!(code, Some(1), "log:\n{log}");
    assert!(
        log.contains(
            "The currently active client certificate has expired and the server is responsive, exiting."
        ),
        "log:\n{log}"
    );
    assert!(
        SystemTime::now() > expiry,
        "it ran until the certificate expired"
    );
}

/// Starts the daemon for a join that is to fail (the test waits for its exit).
fn run_to_exit(files: &NodeFiles, node: &str, bootstrap: &Path) -> std::process::Child {
    let config_path = files.directory.path().join("nodepulse.yaml");
    std::fs::write(&config_path, attack_config("")).expect("written");
    Command::new(env!("CARGO_BIN_EXE_nodepulse"))
        .arg("--config")
        .arg(&config_path)
        .arg("--kubeconfig")
        .arg(files.kubeconfig())
        .args(files.args(bootstrap, &files.cert_dir()))
        .args(["--node-name", node])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the daemon starts")
}

/// Waits for `child`'s exit (up to [`PATIENCE`]): its code and stderr.
async fn exit_of(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    (status.and_then(|s| s.code()), stderr)
}

#[actix_rt::test]
async fn a_denied_csr_ends_the_join_with_the_denial() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let token = Token::create(&cluster, UNAPPROVED_GROUP).await;
    let node = unique_node_name("denied");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user()],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let child = run_to_exit(&files, &node, &bootstrap);
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let user = token.user();
    eventually_async("the node's CSR is pending", || {
        let (csrs, user) = (csrs.clone(), user.clone());
        async move { !requests_by(&csrs, &[user]).await.is_empty() }
    })
    .await;
    let name = requests_by(&csrs, &[user])
        .await
        .into_iter()
        .next()
        .and_then(|csr| csr.metadata.name)
        .expect("a named CSR");
    let denial = json!({"status": {"conditions": [{"type": "Denied", "status": "True",
        "reason": "NodepulseTestDenied", "message": "denied by the test"}]}});
    csrs.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&denial))
        .await
        .expect("denied");
    let (code, stderr) = exit_of(child).await;
    assert_eq!(code, Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains(
            "certificate signing request is denied, reason: NodepulseTestDenied, message: denied by the test"
        ),
        "stderr:\n{stderr}"
    );
    assert!(
        !files.kubeconfig().exists(),
        "no kubeconfig without a certificate"
    );
}

#[actix_rt::test]
async fn a_refused_bootstrap_token_ends_the_join_with_a_clear_error() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let token = Token {
        id: "zzzzzz".into(),
        secret: "0000000000000000".into(),
    };
    let node = unique_node_name("refused");
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(&cluster, &token, files.directory.path());
    let (code, stderr) = exit_of(run_to_exit(&files, &node, &bootstrap)).await;
    assert_eq!(code, Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("the API server refused the bootstrap credentials of"),
        "stderr:\n{stderr}"
    );
}
