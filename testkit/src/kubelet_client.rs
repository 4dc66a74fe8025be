//! A client of a node's kubelet API as kube-apiserver is one: HTTPS, with or without a client
//! certificate of a test CA, verifying the serving certificate against a given CA (the
//! self-signed `kubelet.crt`'s own) under the node's name; and that test CA.

use std::{net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName},
};
use tokio_rustls::TlsConnector;

/// A CA that issues client certificates, and its PEM for `clientCAFile`.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A client certificate (leaf) and its key.
pub struct ClientIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).expect("ca").pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A client certificate for `user` in `group`.
    pub fn client(&self, user: &str, group: &str) -> ClientIdentity {
        let (certificate, key) = self.issue(user, group);
        ClientIdentity {
            chain: vec![certificate.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }

    /// [`Self::client`] as PEM files hold it (certificate, key), for a client outside the
    /// test process such as Prometheus.
    pub fn client_pem(&self, user: &str, group: &str) -> (String, String) {
        let (certificate, key) = self.issue(user, group);
        (certificate.pem(), key.serialize_pem())
    }

    fn issue(&self, user: &str, group: &str) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, user);
        params
            .distinguished_name
            .push(DnType::OrganizationName, group);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let certificate = params.signed_by(&key, &self.issuer).expect("sign");
        (certificate, key)
    }
}

/// An answer: status, headers and the whole body.
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

pub struct KubeletClient {
    address: SocketAddr,
    server_name: ServerName<'static>,
    tls: Arc<ClientConfig>,
}

impl KubeletClient {
    /// Trusts `serving_ca_pem` for `server_name`; presents `identity` when given.
    pub fn new(
        address: SocketAddr,
        server_name: &str,
        serving_ca_pem: &[u8],
        identity: Option<&ClientIdentity>,
    ) -> Self {
        use rustls::pki_types::pem::PemObject;
        let mut roots = RootCertStore::empty();
        for der in CertificateDer::pem_slice_iter(serving_ca_pem) {
            roots.add(der.expect("pem")).expect("root");
        }
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_root_certificates(roots);
        let tls = match identity {
            Some(identity) => builder
                .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
                .expect("client certificate"),
            None => builder.with_no_client_auth(),
        };
        Self {
            address,
            server_name: ServerName::try_from(server_name.to_owned()).expect("name"),
            tls: Arc::new(tls),
        }
    }

    /// A new connection, TLS and HTTP/1.1 handshakes done.
    async fn connect(&self) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
        let tcp = tokio::net::TcpStream::connect(self.address)
            .await
            .expect("the kubelet API accepts");
        let tls = TlsConnector::from(Arc::clone(&self.tls))
            .connect(self.server_name.clone(), tcp)
            .await
            .expect("TLS handshake with the serving certificate");
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("HTTP/1.1");
        tokio::spawn(connection);
        sender
    }

    /// `method path` with `headers`, on a new connection.
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut sender = self.connect().await;
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.address.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = sender
            .send_request(request.body(Empty::<Bytes>::new()).expect("request"))
            .await
            .expect("an answer");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.request("GET", path, &[]).await
    }

    /// A new connection kept for many requests in a row.
    pub async fn connection(&self) -> Connection {
        Connection {
            sender: self.connect().await,
            host: self.address.to_string(),
        }
    }

    /// `GET path` on a new connection: the status and how many body bytes came, counted as
    /// they arrive (a body of any size costs the test nothing).
    pub async fn get_counted(&self, path: &str) -> (u16, u64) {
        let mut sender = self.connect().await;
        let request = http::Request::builder()
            .uri(path)
            .header("host", self.address.to_string())
            .body(Empty::<Bytes>::new())
            .expect("request");
        let response = sender.send_request(request).await.expect("an answer");
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut count = 0;
        while let Some(frame) = body.frame().await {
            if let Some(data) = frame.expect("the body").data_ref() {
                count += data.len() as u64;
            }
        }
        (status, count)
    }
}

/// One connection to the kubelet API, kept alive between requests.
pub struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: String,
}

impl Connection {
    /// `GET path`, with `Authorization: Bearer <token>` when given: the status (the body is
    /// read, so the connection can carry the next request).
    pub async fn get(&mut self, path: &str, token: Option<&str>) -> u16 {
        self.sender.ready().await.expect("the connection is open");
        let mut request = http::Request::builder()
            .uri(path)
            .header("host", &self.host);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = self
            .sender
            .send_request(request.body(Empty::<Bytes>::new()).expect("request"))
            .await
            .expect("an answer");
        let status = response.status().as_u16();
        response.into_body().collect().await.expect("body");
        status
    }
}

/// The CA certificate of a self-signed `kubelet.crt` (the leaf comes first, its CA second).
pub fn serving_ca(kubelet_crt: &str) -> Vec<u8> {
    let start = kubelet_crt
        .match_indices("-----BEGIN CERTIFICATE-----")
        .nth(1)
        .map(|(at, _)| at)
        .expect("kubelet.crt holds the leaf and its CA");
    kubelet_crt.as_bytes()[start..].to_vec()
}

/// A WebSocket session over an upgraded kubelet API connection, as a client of the legacy
/// `v4.channel.k8s.io` protocol reads it: every message is one channel byte and its data.
pub struct ChannelSocket {
    io: hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>,
}

impl KubeletClient {
    /// `GET path` as a WebSocket upgrade offering `protocol`; the answer's status and headers,
    /// and the socket when it switched protocols.
    pub async fn websocket(
        &self,
        path: &str,
        protocol: &str,
    ) -> (u16, http::HeaderMap, Option<ChannelSocket>) {
        let tcp = tokio::net::TcpStream::connect(self.address)
            .await
            .expect("the kubelet API accepts");
        let tls = TlsConnector::from(Arc::clone(&self.tls))
            .connect(self.server_name.clone(), tcp)
            .await
            .expect("TLS handshake");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("HTTP/1.1");
        tokio::spawn(connection.with_upgrades());
        let request = http::Request::get(path)
            .header("host", self.address.to_string())
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("sec-websocket-protocol", protocol)
            .body(Empty::<Bytes>::new())
            .expect("request");
        let mut response = sender.send_request(request).await.expect("an answer");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status != 101 {
            return (status, headers, None);
        }
        let upgraded = hyper::upgrade::on(&mut response).await.expect("upgraded");
        (
            status,
            headers,
            Some(ChannelSocket {
                io: hyper_util::rt::TokioIo::new(upgraded),
            }),
        )
    }
}

impl ChannelSocket {
    /// Every (channel, data) message until the server closes, in order.
    pub async fn read_to_close(mut self) -> Vec<(u8, Vec<u8>)> {
        let mut messages = Vec::new();
        while let Some(message) = self.next_message().await {
            messages.push(message);
        }
        messages
    }

    /// Sends `data` on `channel` (a masked binary message, as a client must send it).
    pub async fn send(&mut self, channel: u8, data: &[u8]) {
        use tokio::io::AsyncWriteExt;
        let mut payload = vec![channel];
        payload.extend_from_slice(data);
        assert!(payload.len() < 126, "short messages only");
        let mask = [0x12, 0x34, 0x56, 0x78];
        let mut frame = vec![0x82, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(
            payload
                .iter()
                .enumerate()
                .map(|(i, byte)| byte ^ mask[i % 4]),
        );
        self.io.write_all(&frame).await.expect("sent");
    }

    /// The next (channel, data) message; `None` once the server closed.
    pub async fn next_message(&mut self) -> Option<(u8, Vec<u8>)> {
        use tokio::io::AsyncReadExt;
        loop {
            let mut head = [0u8; 2];
            if self.io.read_exact(&mut head).await.is_err() {
                return None;
            }
            let opcode = head[0] & 0x0f;
            let length = match head[1] & 0x7f {
                126 => {
                    let mut bytes = [0u8; 2];
                    self.io.read_exact(&mut bytes).await.expect("length");
                    u64::from(u16::from_be_bytes(bytes))
                }
                127 => {
                    let mut bytes = [0u8; 8];
                    self.io.read_exact(&mut bytes).await.expect("length");
                    u64::from_be_bytes(bytes)
                }
                short => u64::from(short),
            };
            let mut payload = vec![0; usize::try_from(length).expect("a small frame")];
            self.io.read_exact(&mut payload).await.expect("payload");
            match opcode {
                // Close.
                8 => return None,
                // Binary (and continuation, which a short exec never needs).
                0 | 2 => {
                    if let Some((channel, data)) = payload.split_first() {
                        return Some((*channel, data.to_vec()));
                    }
                }
                _ => {}
            }
        }
    }
}
