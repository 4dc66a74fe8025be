//! How the emulator reaches a node's kubelet API, as kube-apiserver does: HTTPS to the Node's
//! first address of the preferred types (`--kubelet-preferred-address-types`, default
//! `Hostname, InternalDNS, InternalIP, ExternalDNS, ExternalIP`) on the port of
//! `status.daemonEndpoints.kubeletEndpoint` (10250 when unset), without verifying the serving
//! certificate (no `--kubelet-certificate-authority`), presenting a client certificate of its
//! cluster CA: `CN=kube-apiserver-kubelet-client, O=system:masters`, as kubeadm issues it. A node
//! that should accept it names [`KubeletClient::ca_pem`] as its `clientCAFile`.

use std::{sync::Arc, time::SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use rustls::{
    ClientConfig, DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::WebPkiSupportedAlgorithms,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime},
};
use serde_json::Value;

use crate::certificates::authority::ClusterCa;

/// kube-apiserver's default `--kubelet-preferred-address-types`.
pub const DEFAULT_PREFERRED_ADDRESS_TYPES: &[&str] = &[
    "Hostname",
    "InternalDNS",
    "InternalIP",
    "ExternalDNS",
    "ExternalIP",
];

pub struct KubeletClient {
    tls: Arc<ClientConfig>,
    ca_pem: String,
}

impl std::fmt::Debug for KubeletClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletClient").finish_non_exhaustive()
    }
}

impl KubeletClient {
    /// A client certificate of the emulator's cluster CA (the one that signs nodes' CSRs and,
    /// with `--tls`, its serving certificate), as kubeadm issues kube-apiserver's.
    pub fn from_ca(ca: &ClusterCa, now: SystemTime) -> Result<Self, String> {
        let (certificate, key) = ca
            .client_pair("kube-apiserver-kubelet-client", &["system:masters"], now)
            .map_err(|error| format!("cannot make the kubelet client certificate: {error}"))?;
        let ca_pem = ca.pem().to_owned();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| error.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(
                provider.signature_verification_algorithms,
            )))
            .with_client_auth_cert(
                vec![certificate.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(|error| error.to_string())?;
        let mut tls = tls;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            tls: Arc::new(tls),
            ca_pem,
        })
    }

    /// The CA of the client certificate, for a node's `clientCAFile`.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// `GET https://host:port{path_and_query}`; the error text is what kube-apiserver reports
    /// when the kubelet cannot be reached.
    pub async fn get(
        &self,
        host: &str,
        port: u16,
        path_and_query: &str,
    ) -> Result<http::Response<Incoming>, String> {
        self.request(http::Method::GET, host, port, path_and_query, Bytes::new())
            .await
    }

    /// `method https://host:port{path_and_query}` with `body`.
    pub async fn request(
        &self,
        method: http::Method,
        host: &str,
        port: u16,
        path_and_query: &str,
        body: Bytes,
    ) -> Result<http::Response<Incoming>, String> {
        let url = format!("https://{}{path_and_query}", host_port(host, port));
        let fail = |error: &dyn std::fmt::Display| format!("Get \"{url}\": {error}");
        let tls = self
            .connect(host, port)
            .await
            .map_err(|error| fail(&error))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|error| fail(&error))?;
        tokio::spawn(connection);
        let request = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(http::header::HOST, host_port(host, port))
            .body(Full::new(body))
            .map_err(|error| fail(&error))?;
        sender
            .send_request(request)
            .await
            .map_err(|error| fail(&error))
    }
}

impl KubeletClient {
    /// TLS to `host:port` with the client certificate; the error says what failed, as Go's
    /// dialer does (`dial tcp host:port: …`).
    async fn connect(
        &self,
        host: &str,
        port: u16,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|error| format!("dial tcp {}: {error}", host_port(host, port)))?;
        // Go's dialer sets TCP_NODELAY: a relayed stream's small frames go out at once.
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(host.to_owned()).map_err(|error| error.to_string())?;
        tokio_rustls::TlsConnector::from(Arc::clone(&self.tls))
            .connect(name, tcp)
            .await
            .map_err(|error| error.to_string())
    }

    /// An upgrade request (`method`, `headers` as given) to `https://host:port{path_and_query}`,
    /// over a connection of its own, as kube-apiserver's upgrade-aware proxy dials the
    /// kubelet; the error is the dial's (`dial tcp host:port: …`), for the caller to word as
    /// its counterpart in kube-apiserver does.
    pub async fn upgrade(
        &self,
        method: http::Method,
        host: &str,
        port: u16,
        path_and_query: &str,
        headers: &http::HeaderMap,
    ) -> Result<Upgrade, String> {
        let dialing = |error: &dyn std::fmt::Display| error.to_string();
        let tls = self
            .connect(host, port)
            .await
            .map_err(|error| dialing(&error))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|error| dialing(&error))?;
        tokio::spawn(connection.with_upgrades());
        let mut request = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .body(Full::new(Bytes::new()))
            .map_err(|error| dialing(&error))?;
        *request.headers_mut() = headers.clone();
        request.headers_mut().insert(
            http::header::HOST,
            http::HeaderValue::from_str(&host_port(host, port)).map_err(|error| dialing(&error))?,
        );
        let mut answer = sender
            .send_request(request)
            .await
            .map_err(|error| dialing(&error))?;
        if answer.status() == http::StatusCode::SWITCHING_PROTOCOLS {
            let headers = answer.headers().clone();
            let io = hyper::upgrade::on(&mut answer)
                .await
                .map_err(|error| dialing(&error))?;
            return Ok(Upgrade::Switched { headers, io });
        }
        let (parts, body) = answer.into_parts();
        let body = http_body_util::BodyExt::collect(body)
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        Ok(Upgrade::Refused {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// The kubelet's answer to an upgrade request.
pub enum Upgrade {
    /// 101: the connection, now the protocol's, and the answer's headers.
    Switched {
        headers: http::HeaderMap,
        io: hyper::upgrade::Upgraded,
    },
    /// Any other answer, whole.
    Refused {
        status: http::StatusCode,
        headers: http::HeaderMap,
        body: Bytes,
    },
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Where kube-apiserver dials `node`: its first address of the preferred types, and the
/// kubelet port it reports; the error kube-apiserver gives when none matches.
pub fn kubelet_endpoint(node: &Value, preferred: &[String]) -> Result<(String, u16), String> {
    let addresses = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let address = preferred.iter().find_map(|kind| {
        addresses
            .iter()
            .find(|address| address["type"].as_str() == Some(kind.as_str()))
            .and_then(|address| address["address"].as_str())
    });
    let Some(address) = address else {
        let known: Vec<String> = addresses
            .iter()
            .map(|address| {
                format!(
                    "{{{} {}}}",
                    address["type"].as_str().unwrap_or(""),
                    address["address"].as_str().unwrap_or("")
                )
            })
            .collect();
        return Err(format!(
            "no preferred addresses found; known addresses: [{}]",
            known.join(" ")
        ));
    };
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|port| u16::try_from(port).ok())
        .filter(|port| *port > 0)
        .unwrap_or(10250);
    Ok((address.to_owned(), port))
}

/// Accepts any serving certificate, as kube-apiserver without a kubelet CA does; the
/// handshake's signatures are still checked.
#[derive(Debug)]
struct Unverified(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn preferred(kinds: &[&str]) -> Vec<String> {
        kinds.iter().map(|kind| (*kind).to_owned()).collect()
    }

    #[test]
    fn the_first_address_of_the_preferred_types_and_the_reported_port() {
        let node = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10350}}}});
        let defaults: Vec<String> = preferred(DEFAULT_PREFERRED_ADDRESS_TYPES);
        assert_eq!(kubelet_endpoint(&node, &defaults), Ok(("n1".into(), 10350)));
        assert_eq!(
            kubelet_endpoint(&node, &preferred(&["InternalIP", "Hostname"])),
            Ok(("10.0.0.1".into(), 10350))
        );
        let bare = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(kubelet_endpoint(&bare, &defaults), Ok(("n1".into(), 10250)));
        assert_eq!(
            kubelet_endpoint(&bare, &preferred(&["ExternalIP"])),
            Err("no preferred addresses found; known addresses: [{Hostname n1}]".into())
        );
    }
}
