//! Joining a cluster as a kubeadm node does: nodepulse given only a bootstrap kubeconfig (a
//! bootstrap token) asks for its client certificate with a CSR, is approved and issued one,
//! writes it and the kubeconfig naming it, and runs as `system:node:<name>`; a short-lived
//! certificate is rotated before it expires with the node staying Ready; a denied CSR and a
//! refused token end the run with the kubelet's words. The tests create the bootstrap token
//! Secret and (on a real cluster) kubeadm's RBAC bindings, and delete them and the CSRs after.

use crate::common;

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant, SystemTime},
};

use common::{
    PATIENCE,
    cleanup::{Owned, own},
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
    node_history::NodeHistory,
    skip::skipped,
};
use k8s_openapi::api::{certificates::v1::CertificateSigningRequest, core::v1::Node};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
    config::Kubeconfig,
};
use nodepulse_emulator::{EmulatorConfig, FaultAction, FaultRule, Verb};
use serde_json::{Value, json};

/// The group kubeadm gives its tokens, bound to CSR creation and the `nodeclient` approval.
const KUBEADM_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// A group bound to CSR creation only: nobody approves its requests automatically.
const UNAPPROVED_GROUP: &str = "system:bootstrappers:nodepulse-test";

/// A bootstrap token in `kube-system`, and what a test made for it.
struct Token {
    id: String,
    secret: String,
}

impl Token {
    /// Creates `bootstrap-token-<id>` with `group` as its extra group and, on a real cluster,
    /// the ClusterRoleBindings kubeadm makes for that group (and for node certificate renewal).
    async fn create(cluster: &TestCluster, group: &str) -> Self {
        let random = |len: usize| -> String {
            const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            (0..len)
                .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
                .collect()
        };
        let token = Token {
            id: random(6),
            secret: random(16),
        };
        let name = format!("bootstrap-token-{}", token.id);
        own(Owned::Object {
            path: format!("/api/v1/namespaces/kube-system/secrets/{name}"),
        });
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {"token-id": token.id, "token-secret": token.secret,
                "usage-bootstrap-authentication": "true", "auth-extra-groups": group,
                "description": "nodepulse tls_bootstrap test"}});
        create(cluster, "/api/v1/namespaces/kube-system/secrets", &secret).await;
        if !cluster.is_emulator() {
            // The emulator plays kubeadm's bindings; a real cluster needs them made.
            let mut bindings = vec![("system:node-bootstrapper", group.to_owned())];
            if group == KUBEADM_GROUP {
                bindings.push((
                    "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                    group.to_owned(),
                ));
                bindings.push((
                    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                    "system:nodes".to_owned(),
                ));
            }
            for (index, (role, subject)) in bindings.into_iter().enumerate() {
                let binding = format!("nodepulse-test-{}-{index}", token.id);
                own(Owned::Object {
                    path: format!(
                        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}"
                    ),
                });
                let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": subject}]});
                create(
                    cluster,
                    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                    &body,
                )
                .await;
            }
        }
        token
    }

    fn user(&self) -> String {
        format!("system:bootstrap:{}", self.id)
    }
}

async fn create(cluster: &TestCluster, path: &str, body: &Value) {
    let request = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("JSON"))
        .expect("a request");
    cluster
        .client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
}

/// Deletes, when dropped, the CSRs `users` made (their names are the API server's).
struct CsrSweep {
    kubeconfig: PathBuf,
    users: Vec<String>,
}

impl Drop for CsrSweep {
    fn drop(&mut self) {
        let (kubeconfig, users) = (self.kubeconfig.clone(), self.users.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                let file = Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
                let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await;
                let Some(client) = config.ok().and_then(|c| kube::Client::try_from(c).ok()) else {
                    return;
                };
                let api = Api::<CertificateSigningRequest>::all(client);
                for csr in requests_by(&api, &users).await {
                    let name = csr.metadata.name.unwrap_or_default();
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            });
        })
        .join();
    }
}

async fn requests_by(
    api: &Api<CertificateSigningRequest>,
    users: &[String],
) -> Vec<CertificateSigningRequest> {
    api.list(&Default::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|csr| {
            csr.spec
                .username
                .as_ref()
                .is_some_and(|user| users.contains(user))
        })
        .collect()
}

/// The cluster's server and CA with the token as the user: what `kubeadm join` writes as
/// `bootstrap-kubelet.conf`.
fn bootstrap_kubeconfig(cluster: &TestCluster, token: &Token, directory: &Path) -> PathBuf {
    let admin = Kubeconfig::read_from(&cluster.kubeconfig).expect("the cluster's kubeconfig");
    let context = admin.current_context.clone().unwrap_or_default();
    let cluster_name = admin
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .expect("a current context");
    let entry = admin
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .expect("its cluster");
    let mut cluster_yaml = json!({"server": entry.server});
    if let Some(ca) = entry.certificate_authority {
        cluster_yaml["certificate-authority"] = json!(ca);
    }
    if let Some(ca) = entry.certificate_authority_data {
        cluster_yaml["certificate-authority-data"] = json!(ca);
    }
    let kubeconfig = json!({"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "kubernetes", "cluster": cluster_yaml}],
        "users": [{"name": "tls-bootstrap-token-user", "user": {"token": format!("{}.{}", token.id, token.secret)}}],
        "contexts": [{"name": "tls-bootstrap-token-user@kubernetes", "context": {"cluster": "kubernetes", "user": "tls-bootstrap-token-user"}}],
        "current-context": "tls-bootstrap-token-user@kubernetes"});
    let path = directory.join("bootstrap-kubelet.conf");
    std::fs::write(&path, serde_yaml_ng::to_string(&kubeconfig).expect("YAML")).expect("written");
    path
}

/// An emulator serving HTTPS, signing certificates for `duration`.
fn tls_emulator(duration: Duration) -> EmulatorConfig {
    EmulatorConfig {
        tls: true,
        cluster_signing_duration: duration,
        ..EmulatorConfig::for_tests()
    }
}

/// The node's files: where the kubeconfig is written and the certificate directory.
struct NodeFiles {
    directory: tempfile::TempDir,
}

impl NodeFiles {
    fn new() -> Self {
        Self {
            directory: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.directory.path().join("kubelet.conf")
    }

    fn cert_dir(&self) -> PathBuf {
        self.directory.path().join("pki")
    }

    fn dated_certificates(&self) -> Vec<PathBuf> {
        let mut dated: Vec<PathBuf> = std::fs::read_dir(self.cert_dir())
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        dated.retain(|p| {
            let name = p.file_name().and_then(OsStr::to_str).unwrap_or("");
            name.starts_with("kubelet-client-2") && name.ends_with(".pem")
        });
        dated.sort();
        dated
    }

    fn args<'a>(&'a self, bootstrap: &'a Path, cert_dir: &'a Path) -> [&'a OsStr; 4] {
        [
            OsStr::new("--bootstrap-kubeconfig"),
            bootstrap.as_os_str(),
            OsStr::new("--cert-dir"),
            cert_dir.as_os_str(),
        ]
    }
}

async fn node_ready(client: &kube::Client, name: &str) -> bool {
    let Ok(node) = Api::<Node>::all(client.clone()).get(name).await else {
        return false;
    };
    node.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// A certificate file's NotAfter.
fn not_after(path: &Path) -> SystemTime {
    let text = std::fs::read_to_string(path).expect("a certificate file");
    let der = rustls::pki_types::CertificateDer::pem_slice_iter(text.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM");
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).expect("X.509");
    let seconds = u64::try_from(parsed.validity().not_after.timestamp()).expect("after 1970");
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

use rustls::pki_types::pem::PemObject as _;

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
    assert!(
        requests[0]
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("csr-"))
    );

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
