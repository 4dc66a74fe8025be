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
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, user);
        params
            .distinguished_name
            .push(DnType::OrganizationName, group);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let certificate = params.signed_by(&key, &self.issuer).expect("sign");
        ClientIdentity {
            chain: vec![certificate.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
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

    /// `method path` with `headers`, on a new connection.
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let tcp = tokio::net::TcpStream::connect(self.address)
            .await
            .expect("the kubelet API accepts");
        let tls = TlsConnector::from(Arc::clone(&self.tls))
            .connect(self.server_name.clone(), tcp)
            .await
            .expect("TLS handshake with the serving certificate");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("HTTP/1.1");
        tokio::spawn(connection);
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
}

/// The CA certificate of a self-signed `kubelet.crt` (the leaf comes first, its CA second).
pub fn serving_ca(kubelet_crt: &str) -> Vec<u8> {
    let start = kubelet_crt
        .match_indices("-----BEGIN CERTIFICATE-----")
        .nth(1)
        .map(|(at, _)| at)
        .expect("kubelet.crt holds the leaf and its CA");
    kubelet_crt[start..].as_bytes().to_vec()
}
