//! `staticPodURL`'s redirects (issue 53), against servers of the test's on loopback: the
//! configured `Authorization` and `Cookie` follow a redirect on the same host (another port
//! included), as Go's client sends them, but never to another host; and a redirect from `https`
//! to plain `http` is refused, nothing sent in the clear.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpListener,
};

use nodepulse_testkit::{
    attack::clean_up,
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
};

/// The credentials and one plain header, as `staticPodURLHeader`.
const HEADERS: &str = "staticPodURLHeader: {Authorization: [\"Bearer s3cret\"], Cookie: [\"session=s3cret\"], X-Trace: [kept]}\n";

/// A server on `ip` that answers every request with the answer set now, and keeps each
/// request's head, lower-cased.
#[derive(Clone)]
struct Recorder {
    url: String,
    answer: Arc<Mutex<String>>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    async fn start(ip: &str, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let address = listener.local_addr().expect("addr");
        let recorder = Self {
            url: format!("{scheme}://{address}/pods"),
            answer: Arc::new(Mutex::new(status("404 Not Found"))),
            heads: Arc::default(),
        };
        let serving = recorder.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                match &tls {
                    Some(config) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(config));
                        if let Ok(stream) = acceptor.accept(stream).await {
                            serving.answer_one(stream).await;
                        }
                    }
                    None => serving.answer_one(stream).await,
                }
            }
        });
        recorder
    }

    async fn answer_one(&self, mut stream: impl AsyncRead + AsyncWrite + Unpin) {
        let mut head = vec![0; 8192];
        let read = stream.read(&mut head).await.unwrap_or(0);
        let head = String::from_utf8_lossy(&head[..read]).to_lowercase();
        self.heads.lock().expect("heads").push(head);
        let answer = self.answer.lock().expect("answer").clone();
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    }

    fn redirect_to(&self, to: &Recorder) {
        *self.answer.lock().expect("answer") = format!(
            "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            to.url
        );
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("heads").clone()
    }

    /// The first request's head, once there is one.
    async fn first_head(&self) -> String {
        eventually_async(&format!("a request to {}", self.url), || async {
            !self.heads().is_empty()
        })
        .await;
        self.heads().swap_remove(0)
    }
}

fn status(line: &str) -> String {
    format!("HTTP/1.1 {line}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

#[actix_rt::test]
async fn credentials_follow_a_redirect_on_the_same_host_but_never_to_another() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("url-redirects");
    let first = Recorder::start("127.0.0.1", None).await;
    let other_host = Recorder::start("127.0.0.2", None).await;
    let other_port = Recorder::start("127.0.0.1", None).await;
    first.redirect_to(&other_host);
    let config = format!(
        "staticPodURL: {}\nhttpCheckFrequency: 1s\n{HEADERS}",
        first.url
    );
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &attack_config(&config)).await;

    let sent = first.first_head().await;
    assert!(
        sent.contains("authorization: bearer s3cret") && sent.contains("cookie: session=s3cret"),
        "the configured host gets the credentials: {sent}"
    );
    let elsewhere = other_host.first_head().await;
    assert!(elsewhere.contains("x-trace: kept"), "{elsewhere}");
    assert!(
        !elsewhere.contains("s3cret"),
        "another host got the credentials: {elsewhere}"
    );

    first.redirect_to(&other_port);
    let same_host = other_port.first_head().await;
    assert!(
        same_host.contains("authorization: bearer s3cret")
            && same_host.contains("cookie: session=s3cret"),
        "the same host on another port gets them, as from Go's client: {same_host}"
    );
    clean_up(&cluster, daemon, &name).await;
}

#[actix_rt::test]
async fn a_redirect_from_https_to_plain_http_is_refused() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("url-downgrade");
    let roots = tempfile::tempdir().expect("temp dir");
    let (ca_file, server) = tls_pair(roots.path());
    let secure = Recorder::start("127.0.0.1", Some(server)).await;
    let plain = Recorder::start("127.0.0.1", None).await;
    secure.redirect_to(&plain);
    let config = format!(
        "staticPodURL: {}\nhttpCheckFrequency: 1s\n{HEADERS}",
        secure.url
    );
    let ca_file = ca_file.to_str().expect("a UTF-8 path");
    let env = [("SSL_CERT_FILE", ca_file)];
    let daemon =
        DaemonProcess::start_with_env(&cluster.kubeconfig, &name, &attack_config(&config), &env)
            .await;

    let message = "Failed to read pods from URL";
    let refusal = "refused a redirect from https to plain http";
    eventually_async("the downgrade refused", || async {
        (daemon.events(message).iter())
            .any(|event| event["error"].as_str().is_some_and(|e| e.contains(refusal)))
    })
    .await;
    assert!(!secure.heads().is_empty(), "the https server was asked");
    assert!(
        plain.heads().is_empty(),
        "sent in the clear: {:?}",
        plain.heads()
    );
    clean_up(&cluster, daemon, &name).await;
}

/// A CA, written to a PEM file in `directory` (the daemon's `SSL_CERT_FILE`), and a server
/// configuration with a certificate it signs for 127.0.0.1.
fn tls_pair(directory: &Path) -> (std::path::PathBuf, Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_certificate = ca.self_signed(&ca_key).expect("the CA");
    let ca_file = directory.join("ca.pem");
    std::fs::write(&ca_file, ca_certificate.pem()).expect("the CA written");
    let leaf_key = KeyPair::generate().expect("a key");
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("leaf params");
    let leaf_certificate = leaf
        .signed_by(&leaf_key, &Issuer::new(ca, ca_key))
        .expect("the leaf");
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(vec![leaf_certificate.der().clone()], key)
        .expect("the serving certificate");
    (ca_file, Arc::new(config))
}
