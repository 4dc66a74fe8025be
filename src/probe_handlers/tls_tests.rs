//! The https probe against a loopback TLS server whose self-signed certificate names another
//! host: the kubelet does not verify, so the probe still gets its answer. The certificate is
//! minted with the `openssl` command, as `tests/it/kubeconfig_tls.rs` does.

use std::{process::Command, sync::Arc, time::Duration};

use nodepulse_actors::ports::ProbeOutcome;
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};
use tokio::{io::AsyncWriteExt, net::TcpListener};
use tokio_rustls::TlsAcceptor;

use super::http;

/// A TLS server on 127.0.0.1 answering every request `200 OK` with body `secure`.
async fn serve_https(directory: &std::path::Path) -> u16 {
    let minted = Command::new("openssl")
        .args("req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 1 -subj /CN=not-this-host".split(' '))
        .current_dir(directory)
        .output()
        .expect("the openssl command");
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from_pem_file(directory.join("cert.pem")).unwrap()],
                PrivateKeyDer::from_pem_file(directory.join("key.pem")).unwrap(),
            )
            .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(stream).await else {
                continue;
            };
            super::tests::read_head(&mut tls).await;
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecure";
            let _ = tls.write_all(answer.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    port
}

#[tokio::test]
async fn https_probe_skips_certificate_verification_as_the_kubelet() {
    let directory = tempfile::tempdir().unwrap();
    let port = serve_https(directory.path()).await;
    let spec = http::HttpProbe {
        scheme: "https",
        host: "127.0.0.1",
        port,
        path: "/",
        headers: &[],
    };
    let outcome = http::probe(&spec, Duration::from_secs(5)).await;
    assert_eq!(outcome, ProbeOutcome::Success("secure".into()));
}
