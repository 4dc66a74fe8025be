//! The HTTP source's reads against a server on loopback, and what each answer does to the
//! source's pods, with the kubelet's texts.

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use super::*;

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: busybox}]
";

/// Serves `answers` in turn, one connection each, on loopback; hands back each request's head.
async fn serve(answers: Vec<String>) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/pods", listener.local_addr().expect("addr"));
    let (seen, heads) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for answer in answers {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let mut head = vec![0; 4096];
            let read = stream.read(&mut head).await.unwrap_or(0);
            let _ = seen.send(String::from_utf8_lossy(&head[..read]).into_owned());
            let _ = stream.write_all(answer.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    });
    (url, heads)
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn source(url: &str) -> UrlSource {
    UrlSource {
        url: url.to_owned(),
        headers: vec![
            ("X-Token".to_owned(), "a".to_owned()),
            ("X-Token".to_owned(), "b".to_owned()),
        ],
        period: Duration::from_secs(20),
        tls: None,
    }
}

fn names(read: Option<Read>) -> Option<Vec<String>> {
    match read? {
        Read::Pods(pods) => Some(
            pods.iter()
                .map(|pod| pod.metadata.name.clone().unwrap_or_default())
                .collect(),
        ),
        Read::Unchanged => None,
    }
}

#[tokio::test]
async fn a_get_sends_the_configured_headers_and_reads_the_body_of_a_200() {
    let (url, mut heads) = serve(vec![ok(POD)]).await;
    let body = fetch(&source(&url)).await.expect("a body");
    assert_eq!(body, POD.as_bytes());
    let head = heads.recv().await.expect("a request").to_lowercase();
    assert!(head.starts_with("get /pods http/1.1"), "{head}");
    assert!(
        head.contains("x-token: a") && head.contains("x-token: b"),
        "{head}"
    );
}

#[tokio::test]
async fn a_status_other_than_200_a_redirect_and_a_refused_connection_say_what_they_are() {
    let (url, _heads) = serve(vec![
        "HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 0\r\n\r\n".to_owned(),
        "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone".to_owned(),
    ])
    .await;
    let error = fetch(&source(&url))
        .await
        .expect_err("404 after the redirect");
    assert_eq!(error.to_string(), format!("{url}: 404 Not Found"));

    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let dead = format!("http://{}/pods", closed.local_addr().expect("addr"));
    drop(closed);
    let error = fetch(&source(&dead)).await.expect_err("refused");
    assert!(
        error
            .to_string()
            .starts_with(&format!("Get \"{dead}\": dial tcp")),
        "{error}"
    );
}

#[test]
fn a_body_replaces_the_pods_the_same_body_changes_nothing_and_errors_keep_them() {
    let url = "http://127.0.0.1:1/pods";
    let mut state = UrlState::default();
    let (read, error) = state.take(Ok(POD.as_bytes().to_vec()), url, "n1");
    assert!(error.is_none());
    assert_eq!(names(read), Some(vec!["web-n1".to_owned()]));
    let (read, error) = state.take(Ok(POD.as_bytes().to_vec()), url, "n1");
    assert!(matches!(read, Some(Read::Unchanged)) && error.is_none());

    // Unreachable, or a bad body: an error and no change to the pods.
    let unreachable = UrlError::Get {
        url: url.to_owned(),
        source: GetError::NoHost,
    };
    let (read, error) = state.take(Err(unreachable), url, "n1");
    assert!(read.is_none() && error.is_some());
    let (read, error) = state.take(Ok(b"kind: [".to_vec()), url, "n1");
    assert!(read.is_none());
    let text = error.expect("an error").to_string();
    assert!(
        text.starts_with(&format!(
            "{url}: received 'kind: [', but couldn't parse as single ("
        )),
        "{text}"
    );

    // An empty body empties the source, and is an error too.
    let (read, error) = state.take(Ok(Vec::new()), url, "n1");
    assert_eq!(names(read), Some(vec![]));
    assert_eq!(
        error.expect("an error").to_string(),
        format!("zero-length data received from {url}")
    );
    // The same body as before the empty one runs its pods again.
    let (read, _) = state.take(Ok(POD.as_bytes().to_vec()), url, "n1");
    assert_eq!(names(read), Some(vec!["web-n1".to_owned()]));
}

#[test]
fn a_pod_list_gives_its_pods_once_per_name_and_one_refused_item_refuses_the_list() {
    let url = "http://127.0.0.1:1/pods";
    let list = r#"{"apiVersion": "v1", "kind": "PodList", "items": [
        {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "d", "image": "busybox"}]}}
    ]}"#;
    let mut state = UrlState::default();
    let (read, error) = state.take(Ok(list.as_bytes().to_vec()), url, "n1");
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        names(read),
        Some(vec!["a-n1".to_owned(), "b-n1".to_owned()])
    );
    let refused = r#"{"apiVersion": "v1", "kind": "PodList", "items": [
        {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        {"metadata": {"name": "b"}, "spec": {"serviceAccountName": "robot",
            "containers": [{"name": "c", "image": "busybox"}]}}
    ]}"#;
    let (read, error) = state.take(Ok(refused.as_bytes().to_vec()), url, "n1");
    assert!(read.is_none());
    assert_eq!(
        error.expect("refused").to_string(),
        "static pods may not reference serviceaccounts"
    );
}

/// A CA and a serving certificate it signs for 127.0.0.1: the CA's certificate and the server's
/// TLS configuration.
fn tls_pair() -> (
    rustls::pki_types::CertificateDer<'static>,
    Arc<rustls::ServerConfig>,
) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_certificate = ca.self_signed(&ca_key).expect("the CA");
    let leaf_key = KeyPair::generate().expect("a key");
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("leaf params");
    let leaf_certificate = leaf
        .signed_by(&leaf_key, &Issuer::new(ca, ca_key))
        .expect("the leaf");
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_no_client_auth()
    .with_single_cert(vec![leaf_certificate.der().clone()], key)
    .expect("the serving certificate");
    (ca_certificate.der().clone(), Arc::new(config))
}

/// Serves `answer` over TLS on loopback to every connection; the `https` URL.
async fn serve_https(config: Arc<rustls::ServerConfig>, answer: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("https://{}/pods", listener.local_addr().expect("addr"));
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(stream).await else {
                continue;
            };
            let mut head = vec![0; 4096];
            let _ = tls.read(&mut head).await;
            let _ = tls.write_all(answer.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    url
}

#[tokio::test]
async fn an_https_url_is_read_over_tls_verified_against_the_trusted_roots() {
    let (ca, server) = tls_pair();
    let url = serve_https(server, ok(POD)).await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).expect("the CA is a root");
    let trusting = UrlSource {
        tls: Some(client_config(roots).expect("a client")),
        ..source(&url)
    };
    let body = fetch(&trusting).await.expect("a body over TLS");
    assert_eq!(body, POD.as_bytes());

    // The host's roots do not hold the test's CA: the handshake is refused, as Go's would be.
    let error = fetch(&source(&url)).await.expect_err("an unknown issuer");
    let text = error.to_string();
    assert!(text.starts_with(&format!("Get \"{url}\": tls: ")), "{text}");
}

#[test]
fn credentials_go_to_the_domain_and_its_subdomains_only() {
    for (sub, parent, kept) in [
        ("example.com", "example.com", true),
        ("www.example.com", "example.com", true),
        ("badexample.com", "example.com", false),
        ("example.com", "www.example.com", false),
        ("127.0.0.2", "127.0.0.1", false),
        ("[::1]", "[::1]", true),
        ("[::1%.example.com]", "example.com", false),
    ] {
        assert_eq!(
            is_domain_or_subdomain(sub, parent),
            kept,
            "{sub} of {parent}"
        );
    }
}
