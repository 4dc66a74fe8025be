//! The kubelet API's serving certificate under `serverTLSBootstrap: true`, as a joined node
//! asks for it: a `kubernetes.io/kubelet-serving` CSR by `system:node:<name>` with the Node's
//! addresses as SANs and the kubelet's usages, every TLS handshake refused until someone
//! approves it (no controller does, on the emulator as on a real cluster: the test approves
//! it as an administrator would), then the issued certificate served (it verifies against the
//! cluster CA for the node's IP) and stored as `kubelet-server-current.pem`; a short-lived one
//! is asked for again before it expires and the new one served without a restart.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::{certificates::v1::CertificateSigningRequest, core::v1::Node};
use kube::{Api, config::Kubeconfig};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};

use nodepulse_testkit::{
    PATIENCE,
    bootstrap::{
        CsrSweep, KUBEADM_GROUP, NodeFiles, Token, approve, bootstrap_kubeconfig, delete_csrs,
        tls_emulator,
    },
    cluster::{TestCluster, unique_node_name},
    daemon::{DEBUG_TOKEN, DaemonProcess},
    eventually_async,
    skip::skipped,
};

const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// A `runtime: cri` node (the kind that serves the kubelet API; no runtime is needed to serve
/// it) asking for its serving certificate, with rotated client certificates.
fn serving_config(root: &Path) -> String {
    format!(
        "runtime: cri\ncontainerRuntimeEndpoint: unix://{root}/no-runtime.sock\nrootDir: {root}/root\nport: 0\nhealthzPort: 0\nevictionHard:\n  memory.available: 1Mi\ndebug:\n  address: 127.0.0.1:0\n  faultInjection: {{enabled: true, token: {DEBUG_TOKEN}}}\nrotateCertificates: true\nserverTLSBootstrap: true\n",
        root = root.display()
    )
}

/// The cluster CA the admin kubeconfig trusts: the serving signer's CA too (kubeadm's
/// `--cluster-signing-cert-file` is the cluster CA; the emulator signs with its CA).
fn cluster_ca(kubeconfig: &Path) -> Vec<CertificateDer<'static>> {
    let admin = Kubeconfig::read_from(kubeconfig).expect("the cluster's kubeconfig");
    let cluster = admin.clusters[0].cluster.clone().expect("a cluster");
    let pem = match (
        cluster.certificate_authority_data,
        cluster.certificate_authority,
    ) {
        (Some(data), _) => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .expect("base64 CA data")
        }
        (None, Some(path)) => std::fs::read(path).expect("the CA file"),
        (None, None) => panic!("the test cluster's kubeconfig names no CA"),
    };
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

/// A TLS handshake with the kubelet API on loopback `port`, verifying its certificate against
/// `roots` for `ip`: the served leaf, or why the handshake failed.
async fn handshake(
    port: u16,
    ip: IpAddr,
    roots: &[CertificateDer<'static>],
) -> Result<CertificateDer<'static>, String> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(store)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio::time::timeout(
        Duration::from_secs(10),
        connector.connect(ServerName::IpAddress(ip.into()), tcp),
    )
    .await
    .map_err(|_| "the handshake timed out".to_owned())?
    .map_err(|e| e.to_string())?;
    tls.get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| leaf.clone().into_owned())
        .ok_or_else(|| "no certificate".to_owned())
}

/// The node's kubelet port (from `daemonEndpoints`) and InternalIP, once it reports both.
async fn kubelet_endpoint(client: &kube::Client, node: &str) -> (u16, IpAddr, Node) {
    let nodes = Api::<Node>::all(client.clone());
    let found = || async {
        let node = nodes.get(node).await.ok()?;
        let status = node.status.as_ref()?;
        let port = status
            .daemon_endpoints
            .as_ref()?
            .kubelet_endpoint
            .as_ref()?
            .port;
        let ip = status
            .addresses
            .iter()
            .flatten()
            .find(|a| a.type_ == "InternalIP")?
            .address
            .parse()
            .ok()?;
        (port > 0).then(|| (u16::try_from(port).ok(), ip, node.clone()))
    };
    eventually_async(
        "the node reports its kubelet port and InternalIP",
        || async { found().await.is_some() },
    )
    .await;
    let (port, ip, node) = found().await.expect("reported");
    (port.expect("a port"), ip, node)
}

/// The serving CSRs `node` made, oldest first.
async fn serving_requests(
    csrs: &Api<CertificateSigningRequest>,
    node: &str,
) -> Vec<CertificateSigningRequest> {
    let user = format!("system:node:{node}");
    serving_requests_where(csrs, |csr| {
        csr.spec.username.as_deref() == Some(user.as_str())
    })
    .await
}

/// The serving CSRs `selected` picks, oldest first.
async fn serving_requests_where(
    csrs: &Api<CertificateSigningRequest>,
    selected: impl Fn(&CertificateSigningRequest) -> bool,
) -> Vec<CertificateSigningRequest> {
    let mut found: Vec<CertificateSigningRequest> = csrs
        .list(&Default::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|csr| csr.spec.signer_name == SERVING_SIGNER && selected(csr))
        .collect();
    found.sort_by_key(|csr| csr.metadata.creation_timestamp.clone().map(|t| t.0));
    found
}

/// Waits for the `count`-th serving CSR of `node` and returns it.
async fn nth_serving_request(
    csrs: &Api<CertificateSigningRequest>,
    node: &str,
    count: usize,
    within: Duration,
) -> CertificateSigningRequest {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = serving_requests(csrs, node).await;
        if found.len() >= count {
            return found[count - 1].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no serving CSR number {count} from {node} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the CSR's PKCS#10 request asks for: its subject's CN and O, DNS and IP SANs.
fn requested(csr: &CertificateSigningRequest) -> (String, Vec<String>, Vec<String>, Vec<IpAddr>) {
    use x509_parser::prelude::{FromDer, GeneralName, ParsedExtension, X509CertificationRequest};
    let der = rustls::pki_types::CertificateSigningRequestDer::from_pem_slice(&csr.spec.request.0)
        .expect("a PEM request");
    let (_, request) = X509CertificationRequest::from_der(der.as_ref()).expect("PKCS#10");
    let subject = &request.certification_request_info.subject;
    let text =
        |a: &x509_parser::x509::AttributeTypeAndValue<'_>| a.as_str().ok().map(str::to_owned);
    let common_name = subject
        .iter_common_name()
        .find_map(text)
        .unwrap_or_default();
    let organizations = subject.iter_organization().filter_map(text).collect();
    let (mut dns, mut ips) = (Vec::new(), Vec::new());
    for extension in request.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(names) = extension {
            for name in &names.general_names {
                match name {
                    GeneralName::DNSName(d) => dns.push((*d).to_owned()),
                    GeneralName::IPAddress(b) if b.len() == 4 => {
                        ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).expect("4 bytes")));
                    }
                    GeneralName::IPAddress(b) if b.len() == 16 => {
                        ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).expect("16 bytes")));
                    }
                    _ => {}
                }
            }
        }
    }
    (common_name, organizations, dns, ips)
}

fn serial(leaf: &CertificateDer<'_>) -> Vec<u8> {
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf).expect("X.509");
    parsed.raw_serial().to_vec()
}

/// The node's files, its daemon, and what a test needs to reach its kubelet API.
struct ServingNode {
    files: NodeFiles,
    daemon: DaemonProcess,
    name: String,
    port: u16,
    ip: IpAddr,
    node: Node,
    _sweep: CsrSweep,
}

async fn join(cluster: &TestCluster, prefix: &str) -> ServingNode {
    let token = Token::create(cluster, KUBEADM_GROUP).await;
    let name = unique_node_name(prefix);
    let sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![token.user(), format!("system:node:{name}")],
    };
    let files = NodeFiles::new();
    let bootstrap = bootstrap_kubeconfig(cluster, &token, files.directory.path());
    let cert_dir = files.cert_dir();
    let daemon = DaemonProcess::start_with_args(
        &files.kubeconfig(),
        &name,
        &serving_config(files.directory.path()),
        &[],
        &files.args(&bootstrap, &cert_dir),
    )
    .await;
    let (port, ip, node) = kubelet_endpoint(&cluster.client, &name).await;
    ServingNode {
        files,
        daemon,
        name,
        port,
        ip,
        node,
        _sweep: sweep,
    }
}

impl ServingNode {
    fn current_link(&self) -> PathBuf {
        self.files.cert_dir().join("kubelet-server-current.pem")
    }

    /// Waits until the kubelet API serves a certificate other than `not`, and returns it.
    async fn served_other_than(
        &self,
        roots: &[CertificateDer<'static>],
        not: Option<&CertificateDer<'static>>,
    ) -> CertificateDer<'static> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let outcome = handshake(self.port, self.ip, roots).await;
            match outcome {
                Ok(leaf) if not.is_none_or(|old| serial(old) != serial(&leaf)) => return leaf,
                other => assert!(
                    tokio::time::Instant::now() < deadline,
                    "no new serving certificate within {PATIENCE:?}: {:?}",
                    other.map(|leaf| serial(&leaf))
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[actix_rt::test]
async fn the_serving_certificate_is_requested_for_the_nodes_addresses_and_served_once_approved() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let roots = cluster_ca(&cluster.kubeconfig);
    let node = join(&cluster, "serving").await;
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let csr = nth_serving_request(&csrs, &node.name, 1, PATIENCE).await;

    // The kubelet's request: its signer, usages for an ECDSA key, the Node's addresses.
    let mut usages = csr.spec.usages.clone().unwrap_or_default();
    usages.sort();
    assert_eq!(usages, ["digital signature", "server auth"]);
    assert!(
        csr.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("csr-"))
    );
    assert_eq!(csr.spec.expiration_seconds, None);
    let (common_name, organizations, dns, ips) = requested(&csr);
    assert_eq!(common_name, format!("system:node:{}", node.name));
    assert_eq!(organizations, ["system:nodes"]);
    let addresses = node
        .node
        .status
        .clone()
        .and_then(|s| s.addresses)
        .unwrap_or_default();
    let mut want_dns: Vec<String> = addresses
        .iter()
        .filter(|a| a.type_ == "Hostname" && a.address.parse::<IpAddr>().is_err())
        .map(|a| a.address.clone())
        .collect();
    want_dns.sort();
    assert_eq!(dns, want_dns, "the Hostname address as a DNS SAN");
    assert!(
        ips.contains(&node.ip),
        "the InternalIP as an IP SAN: {ips:?}"
    );

    // Until it is approved every handshake is refused, and nobody approves it by itself:
    // after the refusal is logged it still holds no certificate.
    let refused = handshake(node.port, node.ip, &roots).await;
    assert!(refused.is_err(), "served before approval: {refused:?}");
    node.daemon
        .wait_event("http: TLS handshake error: no serving certificate available for the kubelet")
        .await;
    let pending = serving_requests(&csrs, &node.name).await;
    assert!(
        pending[0]
            .status
            .as_ref()
            .and_then(|s| s.certificate.as_ref())
            .is_none(),
        "no controller issues a serving certificate unasked"
    );
    assert!(!node.current_link().exists());

    // Approved: the issued certificate is served (verified for the node's IP against the
    // cluster CA) and stored as the kubelet stores it.
    approve(&csrs, &csr).await;
    let leaf = node.served_other_than(&roots, None).await;
    let (_, parsed) = x509_parser::parse_x509_certificate(&leaf).expect("X.509");
    assert!(
        parsed
            .subject()
            .iter_common_name()
            .any(|cn| cn.as_str() == Ok(common_name.as_str()))
    );
    let target =
        std::fs::read_link(node.current_link()).expect("kubelet-server-current.pem is a link");
    let file_name = target.file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        file_name.starts_with("kubelet-server-2") && file_name.ends_with(".pem"),
        "{target:?}"
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&target)
            .expect("the dated file")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let stored = std::fs::read_to_string(&target).expect("readable");
    let stored_leaf = CertificateDer::pem_slice_iter(stored.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM");
    assert_eq!(
        stored_leaf, leaf,
        "the stored certificate is the one served"
    );
}

#[actix_rt::test]
async fn a_short_lived_serving_certificate_is_renewed_and_the_new_one_served_without_a_restart() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(150))).await;
    if !cluster.is_emulator() {
        // A real kube-controller-manager signs for a year unless --cluster-signing-duration
        // says otherwise, and the kubelet asks for no shorter lifetime.
        return skipped(
            "a_short_lived_serving_certificate_is_renewed_and_the_new_one_served_without_a_restart",
            "minutes-long certificates (the emulator's cluster_signing_duration)",
        );
    }
    let roots = cluster_ca(&cluster.kubeconfig);
    let node = join(&cluster, "reserved").await;
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let first = nth_serving_request(&csrs, &node.name, 1, PATIENCE).await;
    approve(&csrs, &first).await;
    let served = node.served_other_than(&roots, None).await;
    let first_file = std::fs::read_link(node.current_link()).expect("a link");

    // Asked for again at 70–90 % of its 450 s (backdated) lifetime: 15..105 s after issue.
    let second =
        nth_serving_request(&csrs, &node.name, 2, Duration::from_secs(105) + PATIENCE).await;
    assert_eq!(
        requested(&second).3,
        requested(&first).3,
        "the same addresses"
    );
    // The old certificate is served while the new one waits.
    let meanwhile = handshake(node.port, node.ip, &roots)
        .await
        .expect("still served");
    assert_eq!(serial(&meanwhile), serial(&served));
    approve(&csrs, &second).await;
    let renewed = node.served_other_than(&roots, Some(&served)).await;
    assert_ne!(serial(&renewed), serial(&served));
    assert_ne!(
        std::fs::read_link(node.current_link()).expect("a link"),
        first_file,
        "a new dated file"
    );
    let starts = node
        .daemon
        .log_lines()
        .iter()
        .filter(|line| line.contains("nodepulse is running"))
        .count();
    assert_eq!(starts, 1, "the same process serves the new certificate");
}

/// The rotation of a serving certificate whose Node addresses the test sets, run in the test
/// with the cluster's credentials (the CSRs are the administrator's, which the signer takes as
/// it takes a node's): what it asks for follows the addresses.
struct MovingNode {
    addresses: Arc<std::sync::Mutex<Vec<k8s_openapi::api::core::v1::NodeAddress>>>,
    identity: Arc<nodepulse::apiserver_client::credentials::ServingIdentity>,
    rotation: tokio::task::JoinHandle<()>,
    _cert_dir: tempfile::TempDir,
}

impl Drop for MovingNode {
    fn drop(&mut self) {
        self.rotation.abort();
    }
}

fn internal_ip(ip: &str) -> Vec<k8s_openapi::api::core::v1::NodeAddress> {
    vec![k8s_openapi::api::core::v1::NodeAddress {
        type_: "InternalIP".into(),
        address: ip.into(),
    }]
}

async fn moving_node(cluster: &TestCluster, name: &str, ip: &str) -> MovingNode {
    use nodepulse::apiserver_client::credentials::{
        CertificateStore, Purpose, Rotation, ServingIdentity, rotation::Rotated,
    };
    let (_, api) =
        nodepulse_testkit::node::connect(&cluster.kubeconfig, name, "runtime: simulated\n").await;
    let addresses = Arc::new(std::sync::Mutex::new(internal_ip(ip)));
    let identity = Arc::new(ServingIdentity::default());
    let cert_dir = tempfile::tempdir().expect("temp dir");
    let observed = Arc::clone(&addresses);
    let rotation = Rotation {
        api,
        certificate: Rotated::Serving {
            identity: Arc::clone(&identity),
            addresses: Arc::new(move || observed.lock().expect("addresses").clone()),
        },
        store: CertificateStore::for_purpose(cert_dir.path(), Purpose::Serving),
        node_name: name.to_owned(),
        bootstrap_kubeconfig: None,
        server_responsive: std::sync::atomic::AtomicBool::new(false),
    };
    MovingNode {
        addresses,
        identity,
        rotation: tokio::spawn(rotation.run()),
        _cert_dir: cert_dir,
    }
}

/// The serving CSRs for `name`'s common name, oldest first, whoever made them.
async fn requests_for(
    csrs: &Api<CertificateSigningRequest>,
    name: &str,
) -> Vec<CertificateSigningRequest> {
    let common_name = format!("system:node:{name}");
    serving_requests_where(csrs, |csr| requested(csr).0 == common_name).await
}

/// Deletes, when dropped, the serving CSRs for a common name.
struct CommonNameSweep {
    kubeconfig: PathBuf,
    name: String,
}

impl Drop for CommonNameSweep {
    fn drop(&mut self) {
        let common_name = format!("system:node:{}", self.name);
        delete_csrs(&self.kubeconfig, move |csr| {
            csr.spec.signer_name == SERVING_SIGNER && requested(csr).0 == common_name
        });
    }
}

async fn wait_requests(
    csrs: &Api<CertificateSigningRequest>,
    name: &str,
    count: usize,
) -> Vec<CertificateSigningRequest> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let found = requests_for(csrs, name).await;
        if found.len() >= count {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} serving CSRs for {name}, not {count}",
            found.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[actix_rt::test]
async fn new_node_addresses_ask_for_a_new_serving_certificate_and_drop_the_wait_for_the_old() {
    let cluster = TestCluster::start_with(tls_emulator(Duration::from_secs(3600))).await;
    let name = unique_node_name("moving");
    let _sweep = CommonNameSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        name: name.clone(),
    };
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let node = moving_node(&cluster, &name, "192.0.2.10").await;
    let ip = |text: &str| text.parse::<IpAddr>().expect("an IP");

    // Moved while the first request waits: that wait is given up, a request for the new
    // address follows, and approving it gives a certificate for the new address.
    let first = wait_requests(&csrs, &name, 1).await;
    assert_eq!(requested(&first[0]).3, [ip("192.0.2.10")]);
    *node.addresses.lock().expect("addresses") = internal_ip("192.0.2.20");
    let second = wait_requests(&csrs, &name, 2).await;
    assert_eq!(requested(&second[1]).3, [ip("192.0.2.20")]);
    approve(&csrs, &second[1]).await;
    nodepulse_testkit::eventually("the certificate for the new address is installed", || {
        node.identity.certificate().leaf().is_some()
    })
    .await;

    // Moved again once it holds a certificate: a third request, for the newest address.
    *node.addresses.lock().expect("addresses") = internal_ip("192.0.2.30");
    let third = wait_requests(&csrs, &name, 3).await;
    assert_eq!(requested(&third[2]).3, [ip("192.0.2.30")]);
    // An address the certificate already covers asks for nothing more.
    *node.addresses.lock().expect("addresses") = internal_ip("192.0.2.20");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(requests_for(&csrs, &name).await.len(), 3);
}
