//! A kubeconfig with the cluster's CA and a client certificate works over nodepulse's TLS
//! stack (rustls with ring): `nodepulse status` reaches the API emulator through a TLS front
//! that verifies the server name against the CA and requires a client certificate signed by it
//! — as kube-apiserver does for a node's `system:node:<name>` certificate — and the same
//! kubeconfig without the client certificate, or without the CA, is refused at the handshake.
//!
//! The certificates are minted with the `openssl` command (X.509 v3, as webpki requires).

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};

use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    node::{report_healthy_and_wait_ready, start_api_actors},
};
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// A CA, a server certificate for 127.0.0.1 and a node's client certificate, as PEM files.
struct Certificates {
    directory: tempfile::TempDir,
}

impl Certificates {
    fn path(&self, name: &str) -> PathBuf {
        self.directory.path().join(name)
    }

    fn mint(node: &str) -> Option<Self> {
        let directory = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            std::fs::write(directory.path().join(name), text).expect("written");
        };
        write(
            "server.ext",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        );
        write("client.ext", "extendedKeyUsage=clientAuth\n");
        let openssl = |args: &str| {
            Command::new("openssl")
                .args(args.split_whitespace())
                .current_dir(directory.path())
                .output()
                .is_ok_and(|output| output.status.success())
        };
        // A certificate request for `name`, signed by the CA with `name.ext`'s v3 extensions.
        let signed = |name: &str, key: &str, subject: &str| {
            openssl(&format!(
                "req -newkey {key} -nodes -keyout {name}.key -out {name}.csr -subj {subject}"
            )) && openssl(&format!(
                "x509 -req -in {name}.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
                 -out {name}.crt -days 1 -extfile {name}.ext"
            ))
        };
        let minted = openssl(
            "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 \
             -subj /CN=nodepulse-test-ca",
        ) && signed(
            "server",
            "ec -pkeyopt ec_paramgen_curve:P-256",
            "/CN=kube-apiserver",
        ) && signed(
            "client",
            "rsa:2048",
            &format!("/O=system:nodes/CN=system:node:{node}"),
        );
        minted.then_some(Self { directory })
    }
}

/// Accepts TLS on a loopback port, requiring a client certificate signed by the CA, and pipes
/// each connection to `backend`. Returns the port.
async fn tls_front(certificates: &Certificates, backend: std::net::SocketAddr) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(certificates.path("ca.crt")).expect("the CA"))
        .expect("a CA certificate");
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("a client verifier");
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_file(certificates.path("server.crt")).expect("cert")],
            PrivateKeyDer::from_pem_file(certificates.path("server.key")).expect("key"),
        )
        .expect("a server configuration");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bound");
    let port = listener.local_addr().expect("an address").port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A refused handshake just ends this connection; the client reports it.
                let Ok(mut tls) = acceptor.accept(client).await else {
                    return;
                };
                if let Ok(mut server) = TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                }
            });
        }
    });
    port
}

fn base64(path: &Path) -> String {
    let output = Command::new("base64")
        .arg("-w0")
        .arg(path)
        .output()
        .expect("base64 runs");
    String::from_utf8(output.stdout).expect("ascii")
}

fn kubeconfig(certificates: &Certificates, port: u16, with_ca: bool, with_client: bool) -> PathBuf {
    let ca = if with_ca {
        format!(
            "    certificate-authority-data: {}\n",
            base64(&certificates.path("ca.crt"))
        )
    } else {
        String::new()
    };
    let user = if with_client {
        format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            base64(&certificates.path("client.crt")),
            base64(&certificates.path("client.key"))
        )
    } else {
        "    {}\n".to_owned()
    };
    let path = certificates.path(&format!("kubeconfig-{with_ca}-{with_client}"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: tls\n  cluster:\n    server: https://127.0.0.1:{port}\n{ca}\
             users:\n- name: node\n  user:\n{user}contexts:\n- name: tls\n  context: {{cluster: tls, user: node}}\n\
             current-context: tls\n"
        ),
    )
    .expect("written");
    path
}

async fn status(kubeconfig: &Path, node: &str) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodepulse"));
    command
        .arg("status")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--node-name", node]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("runs"))
        .await
        .expect("joined");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[actix_rt::test]
async fn a_client_certificate_and_the_cluster_ca_work_over_rustls() {
    let test = "a_client_certificate_and_the_cluster_ca_work_over_rustls";
    if nodepulse_testkit::skip::on_real_cluster() {
        nodepulse_testkit::skip::skipped(test, "the emulator behind a test TLS front");
        return;
    }
    let node = unique_node_name("tls");
    let Some(certificates) = Certificates::mint(&node) else {
        nodepulse_testkit::skip::missing(test, "the openssl command (scripts/test.sh installs it)");
        return;
    };
    let cluster = TestCluster::start().await;
    let emulator = cluster.emulator.as_ref().expect("the emulator");
    let yaml = "nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nrootDir: /\n";
    let (supervisor, addresses) = start_api_actors(&cluster.kubeconfig, &node, yaml).await;
    report_healthy_and_wait_ready(&cluster.client, &node, &addresses).await;
    let port = tls_front(&certificates, emulator.address()).await;

    let (code, stdout, stderr) = status(&kubeconfig(&certificates, port, true, true), &node).await;
    assert_eq!(
        code,
        Some(0),
        "over TLS with a client certificate: {stderr}"
    );
    assert!(
        stdout.contains(&format!("Server:      https://127.0.0.1:{port}/")),
        "{stdout}"
    );
    assert!(
        stdout.contains("Ready") && stdout.contains("KubeletReady"),
        "{stdout}"
    );

    // Without the client certificate the front refuses the handshake, so the one above was used.
    let (code, _, stderr) = status(&kubeconfig(&certificates, port, true, false), &node).await;
    assert_eq!(code, Some(1), "{stderr}");
    // Without the CA the server's certificate is not trusted.
    let (code, _, stderr) = status(&kubeconfig(&certificates, port, false, true), &node).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("certificate"),
        "the refusal names the certificate: {stderr}"
    );
    supervisor
        .shutdown(std::time::Duration::from_secs(10))
        .await;
}
