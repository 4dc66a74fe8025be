//! The kubelet API's listeners as kube-apiserver meets them: HTTPS on the configured port
//! with the self-signed certificate the kubelet would make (`<rootDir>/pki/kubelet.crt`, valid
//! for the node's name, reused on restart), x509 client certificates of `clientCAFile` (a
//! stranger's, or none, is a 401 `Unauthorized` on every path), unknown paths a 404 as the
//! kubelet's mux answers them, the plain-HTTP `/healthz`, and a clear refusal of a bad
//! serving certificate from `check-config`.

use std::{io::Write, net::SocketAddr, sync::Arc};

use nodepulse::{
    config::Settings,
    kubelet_server::{self, KubeletApi, Parts},
};

use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    kubelet_client::{KubeletClient, TestCa, serving_ca},
    node::connect,
    root_dir::RootDir,
};

pub(crate) struct Served {
    api: KubeletApi,
    settings: Settings,
    root: RootDir,
    _ca_file: tempfile::NamedTempFile,
}

/// A kubelet API for a node of `cluster` on ephemeral ports, trusting `ca` for client
/// certificates, with `extra` configuration; its self-signed certificate under `root`.
pub(crate) async fn serve(
    cluster: &TestCluster,
    ca: &TestCa,
    extra: &str,
    root: Option<RootDir>,
) -> Served {
    serve_with_healthz(cluster, &ca.pem, extra, root, 0).await
}

/// [`serve`], trusting the client certificates of the CA `client_ca_pem` (the emulator's, for
/// its node proxy).
pub(crate) async fn serve_trusting(
    cluster: &TestCluster,
    client_ca_pem: &str,
    extra: &str,
) -> Served {
    serve_with_healthz(cluster, client_ca_pem, extra, None, 0).await
}

async fn serve_with_healthz(
    cluster: &TestCluster,
    client_ca_pem: &str,
    extra: &str,
    root: Option<RootDir>,
    healthz_port: u16,
) -> Served {
    let root = root.unwrap_or_else(RootDir::new);
    let mut ca_file = tempfile::NamedTempFile::new().expect("temp file");
    ca_file.write_all(client_ca_pem.as_bytes()).expect("write");
    let yaml = format!(
        "runtime: cri\nrootDir: {root}\nport: 0\nhealthzPort: {healthz_port}\nauthentication:\n  x509: {{clientCAFile: {ca}}}\n{extra}",
        root = root.path().display(),
        ca = ca_file.path().display(),
    );
    let (settings, api) = connect(&cluster.kubeconfig, &unique_node_name("kapi"), &yaml).await;
    let prepared = kubelet_server::prepare(&settings).expect("prepared");
    let api = prepared
        .serve(Parts {
            reviews: api,
            problems: Some(Arc::new(Vec::new)),
            pods: nodepulse_actors::pods::PodsView::empty(),
            runtime: None,
            volumes: None,
            probes: None,
            pod_storage: None,
        })
        .expect("serving");
    Served {
        api,
        settings,
        root,
        _ca_file: ca_file,
    }
}

impl Served {
    fn kubelet_crt(&self) -> String {
        // `<rootDir>/pki` as the host sees it (under `hostRoot` when one is set).
        let crt = self.settings.config.cert_dir_on_host().join("kubelet.crt");
        std::fs::read_to_string(crt).expect("kubelet.crt")
    }

    /// The node's name and the port the API serves on.
    pub(crate) fn node(&self) -> (&str, u16) {
        (&self.settings.node_name, self.api.address.port())
    }

    pub(crate) fn client(
        &self,
        identity: Option<&nodepulse_testkit::kubelet_client::ClientIdentity>,
    ) -> KubeletClient {
        let address = SocketAddr::from(([127, 0, 0, 1], self.api.address.port()));
        KubeletClient::new(
            address,
            &self.settings.node_name,
            &serving_ca(&self.kubelet_crt()),
            identity,
        )
    }
}

#[tokio::test]
async fn the_api_serves_its_self_signed_certificate_for_the_node_name_and_reuses_it() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let served = serve(&cluster, &ca, "authorization: {mode: AlwaysAllow}\n", None).await;
    let first = served.kubelet_crt();
    let key_mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(served.root.path().join("pki/kubelet.key"))
            .expect("kubelet.key")
            .permissions(),
    );
    assert_eq!(key_mode & 0o777, 0o600, "the key is private");
    // The handshake verifies the leaf against its CA under the node's name.
    let answer = served.client(None).get("/healthz").await;
    assert_eq!((answer.status, answer.body.as_str()), (401, "Unauthorized"));
    assert_eq!(
        answer
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/plain; charset=utf-8")
    );

    served.api.stop();
    let again = serve(&cluster, &ca, "", Some(served.root)).await;
    assert_eq!(
        again.kubelet_crt(),
        first,
        "the pair is made once and reused"
    );
}

#[tokio::test]
async fn a_client_certificate_of_the_client_ca_is_served_and_a_strangers_is_a_401() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let served = serve(&cluster, &ca, "authorization: {mode: AlwaysAllow}\n", None).await;
    let apiserver = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let client = served.client(Some(&apiserver));
    let healthz = client.get("/healthz").await;
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));
    let verbose = client.get("/healthz?verbose").await;
    assert_eq!(
        verbose.body,
        "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"
    );
    let unknown = client.get("/no/such/path").await;
    assert_eq!(
        (unknown.status, unknown.body.as_str()),
        (404, "404: Page Not Found")
    );

    let stranger = TestCa::new("another-ca").client("mallory", "system:masters");
    for path in ["/healthz", "/no/such/path"] {
        let answer = served.client(Some(&stranger)).get(path).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (401, "Unauthorized"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_plain_healthz_listener_answers_ok_without_credentials() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        probe.local_addr().expect("address").port()
    };
    let served = serve_with_healthz(&cluster, &ca.pem, "", None, port).await;
    let address = served.api.healthz_address.expect("healthz listening");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    tokio::io::AsyncWriteExt::write_all(
        &mut stream,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await
    .expect("write");
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut answer)
        .await
        .expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
}

#[test]
fn check_config_refuses_a_serving_certificate_that_is_not_one_or_a_key_that_does_not_fit() {
    let dir = tempfile::tempdir().expect("dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let generated = kubelet_server::self_signed::generate("np-node", std::time::SystemTime::now())
        .expect("a pair");
    let other = kubelet_server::self_signed::generate("np-node", std::time::SystemTime::now())
        .expect("another pair");
    let certificate = write("kubelet.crt", &generated.certificate_pem);
    let key = write("kubelet.key", &generated.key_pem);
    let garbage = write("garbage.crt", "not a certificate\n");
    let foreign_key = write("other.key", &other.key_pem);
    let check = |certificate: &std::path::Path, key: &std::path::Path| {
        let config = write(
            "nodepulse.yaml",
            &format!(
                "tlsCertFile: {}\ntlsPrivateKeyFile: {}\n",
                certificate.display(),
                key.display()
            ),
        );
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_nodepulse"))
            .arg("check-config")
            .arg(&config)
            .output()
            .expect("runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert_eq!(
        check(&certificate, &key).0,
        Some(0),
        "a matching pair is fine"
    );
    let (code, stderr) = check(&garbage, &key);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("tlsCertFile {}: ", garbage.display())),
        "{stderr}"
    );
    let (code, stderr) = check(&certificate, &foreign_key);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("the key does not fit the certificate"),
        "{stderr}"
    );
}

#[tokio::test]
async fn with_webhook_authorization_the_api_servers_answer_decides() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let served = serve(&cluster, &ca, "authorization: {mode: Webhook}\n", None).await;
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let healthz = served.client(Some(&admin)).get("/healthz").await;
    assert_eq!(
        (healthz.status, healthz.body.as_str()),
        (200, "ok"),
        "a SubjectAccessReview allows system:masters"
    );
    if cluster.is_emulator() {
        // The emulator has no RBAC: every review it answers allows.
        nodepulse_testkit::skip::skipped(
            "with_webhook_authorization_the_api_servers_answer_decides (the refusal)",
            "a real cluster's RBAC",
        );
        return;
    }
    let nobody = ca.client("nodepulse-test-nobody", "nodepulse-test-nogroup");
    let refused = served.client(Some(&nobody)).get("/healthz").await;
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (
            403,
            "Forbidden (user=nodepulse-test-nobody, verb=get, resource=nodes, subresource(s)=[healthz proxy])\n"
        )
    );
}

#[tokio::test]
async fn node_logs_are_served_from_var_log_and_nothing_outside_it() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let served = serve(&cluster, &ca, "authorization: {mode: AlwaysAllow}\n", None).await;
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let client = served.client(Some(&admin));
    // A directory of its own under the node's /var/log, removed however the test ends.
    let logs = tempfile::Builder::new()
        .prefix("nodepulse-test-")
        .tempdir_in("/var/log")
        .expect("a directory under /var/log");
    let outside = tempfile::tempdir().expect("dir");
    std::fs::write(outside.path().join("secret"), "not a log\n").expect("write");
    std::fs::write(logs.path().join("app.log"), "started\n").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret"), logs.path().join("escape"))
        .expect("symlink");
    let dir = logs
        .path()
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();

    let listing = client.get("/logs/").await;
    assert_eq!(listing.status, 200);
    assert!(
        listing
            .body
            .contains(&format!("<a href=\"{dir}/\">{dir}/</a>\n")),
        "{}",
        listing.body
    );
    let inner = client.get(&format!("/logs/{dir}/")).await;
    assert!(
        inner.body.contains("<a href=\"app.log\">app.log</a>\n"),
        "{}",
        inner.body
    );
    let file = client.get(&format!("/logs/{dir}/app.log")).await;
    assert_eq!((file.status, file.body.as_str()), (200, "started\n"));
    let escaped = client.get(&format!("/logs/{dir}/escape")).await;
    assert_eq!(
        (escaped.status, escaped.body.as_str()),
        (404, "404 page not found\n")
    );
    let dotted = client
        .get(&format!("/logs/{dir}/%2e%2e/%2e%2e/etc/hostname"))
        .await;
    assert_eq!(
        (dotted.status, dotted.body.as_str()),
        (400, "invalid URL path\n")
    );
}

/// A port nothing listens on now.
pub(crate) fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    probe.local_addr().expect("address").port()
}

#[tokio::test]
async fn enable_server_false_serves_neither_the_api_nor_healthz() {
    let cluster = TestCluster::start().await;
    for enable in [true, false] {
        let root = RootDir::new();
        let (port, healthz) = (free_port(), free_port());
        let yaml = format!(
            "runtime: cri\ncontainerRuntimeEndpoint: unix://{root}/no-runtime.sock\nrootDir: {root}\naddress: 127.0.0.1\nport: {port}\nhealthzPort: {healthz}\nenableServer: {enable}\n",
            root = root.path().display(),
        );
        let node = unique_node_name("kapi-off");
        let daemon =
            nodepulse_testkit::daemon::DaemonProcess::start(&cluster.kubeconfig, &node, &yaml)
                .await;
        for listener in [port, healthz] {
            let connected = tokio::net::TcpStream::connect(("127.0.0.1", listener)).await;
            assert_eq!(
                connected.is_ok(),
                enable,
                "enableServer: {enable}, port {listener}: {connected:?}"
            );
        }
        drop(daemon);
    }
}

#[tokio::test]
async fn configz_publishes_the_configuration_without_its_secrets() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let secrets = "authorization: {mode: AlwaysAllow}\nstaticPodURL: https://operator:url-password-7@pods.example/manifests\nstaticPodURLHeader:\n  Authorization: [Bearer header-token-0123456789]\ndebug:\n  address: 127.0.0.1:0\n  faultInjection: {enabled: true, token: fault-token-0123456789}\n";
    let served = serve(&cluster, &ca, secrets, None).await;
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let answer = served.client(Some(&admin)).get("/configz").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    for secret in [
        "url-password-7",
        "header-token-0123456789",
        "fault-token-0123456789",
    ] {
        assert!(
            !answer.body.contains(secret),
            "{secret} published: {}",
            answer.body
        );
    }
    let configz: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
    let published = &configz["kubeletconfig"];
    assert_eq!(published["kind"], "KubeletConfiguration");
    assert_eq!(published.get("debug"), None, "{published}");
    assert_eq!(
        published["staticPodURLHeader"],
        serde_json::json!({"Authorization": ["(hidden)"]})
    );
    assert_eq!(
        published["staticPodURL"],
        "https://(hidden)@pods.example/manifests"
    );
    assert_eq!(published["authorization"]["mode"], "AlwaysAllow");
}

/// Every number the kubelet API reads from a query, at its boundaries and past them: the
/// kubelet's answers (a valid value reaches the pod lookup, 404 here), and no request, however
/// large its numbers, takes the connection down.
#[tokio::test]
async fn numeric_query_parameters_are_taken_at_their_boundaries_and_refused_past_them() {
    let cluster = TestCluster::start().await;
    let ca = TestCa::new("test-cluster-ca");
    let served = serve(&cluster, &ca, "authorization: {mode: AlwaysAllow}\n", None).await;
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let client = served.client(Some(&admin));
    let (max, min) = (i64::MAX, i64::MIN);
    let missing = (404, "pod \"nope\" does not exist\n".to_owned());
    let undecodable = (400, r#"{"message": "Unable to decode query."}"#.to_owned());
    let invalid = (422, r#"{"message": "Invalid request."}"#.to_owned());
    let logs = [
        (format!("sinceSeconds={max}"), &missing),
        ("sinceSeconds=1".to_owned(), &missing),
        ("sinceSeconds=0".to_owned(), &invalid),
        (format!("sinceSeconds={min}"), &invalid),
        ("sinceSeconds=9223372036854775808".to_owned(), &undecodable),
        (format!("tailLines={max}"), &missing),
        ("tailLines=0".to_owned(), &missing),
        ("tailLines=-1".to_owned(), &invalid),
        ("tailLines=-9223372036854775809".to_owned(), &undecodable),
        (format!("tail={max}"), &missing),
        (format!("limitBytes={max}"), &missing),
        ("limitBytes=1".to_owned(), &missing),
        ("limitBytes=0".to_owned(), &invalid),
        ("limitBytes=18446744073709551615".to_owned(), &undecodable),
        (
            format!("sinceSeconds={max}&tailLines={max}&limitBytes={max}&follow=true"),
            &missing,
        ),
    ];
    for (query, expected) in logs {
        let answer = client
            .get(&format!("/containerLogs/default/nope/app?{query}"))
            .await;
        assert_eq!(&(answer.status, answer.body), expected, "{query}");
    }
    let websocket = [("connection", "Upgrade"), ("upgrade", "websocket")];
    let forwards = [
        ("port=1", 404, "pod does not exist\n"),
        ("port=65535", 404, "pod does not exist\n"),
        ("port=0", 400, "port \"0\" must be > 0"),
        (
            "port=65536",
            400,
            "unable to parse \"65536\" as a port: strconv.ParseUint: parsing \"65536\": value out of range",
        ),
        (
            "port=-1",
            400,
            "unable to parse \"-1\" as a port: strconv.ParseUint: parsing \"-1\": invalid syntax",
        ),
        ("", 400, "query parameter \"port\" is required"),
    ];
    for (query, status, body) in forwards {
        let answer = client
            .request(
                "GET",
                &format!("/portForward/default/nope?{query}"),
                &websocket,
            )
            .await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (status, body),
            "{query}"
        );
    }
    let healthz = client.get("/healthz").await;
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));
}
