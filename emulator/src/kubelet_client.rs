//! How the emulator reaches a node's kubelet API, as kube-apiserver does: HTTPS to the Node's
//! address of the preferred types (`--kubelet-preferred-address-types`, default
//! `Hostname, InternalDNS, InternalIP, ExternalDNS, ExternalIP`) on the port of
//! `status.daemonEndpoints.kubeletEndpoint` (10250 when unset), without verifying the serving
//! certificate (no `--kubelet-certificate-authority`), presenting a client certificate of its
//! cluster CA: `CN=kube-apiserver-kubelet-client, O=system:masters`, as kubeadm issues it. A node
//! that should accept it names [`KubeletClient::ca_pem`] as its `clientCAFile`. Where
//! kube-apiserver dials only the first such address, the emulator tries the next when one
//! cannot be dialed (a `Hostname` nothing resolves, say), and last loopback when asked to (a
//! standalone node, in the same process, serves there).

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
        endpoint: &KubeletEndpoint,
        path_and_query: &str,
    ) -> Result<http::Response<Incoming>, String> {
        self.request(http::Method::GET, endpoint, path_and_query, Bytes::new())
            .await
    }

    /// `method https://host:port{path_and_query}` with `body`.
    pub async fn request(
        &self,
        method: http::Method,
        endpoint: &KubeletEndpoint,
        path_and_query: &str,
        body: Bytes,
    ) -> Result<http::Response<Incoming>, String> {
        let url = format!(
            "https://{}{path_and_query}",
            host_port(endpoint.first_host(), endpoint.port)
        );
        let fail = |error: &dyn std::fmt::Display| format!("Get \"{url}\": {error}");
        let (tls, host) = self.connect(endpoint).await.map_err(|error| fail(&error))?;
        let port = endpoint.port;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|error| fail(&error))?;
        tokio::spawn(connection);
        let request = http::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(http::header::HOST, host_port(&host, port))
            .body(Full::new(body))
            .map_err(|error| fail(&error))?;
        sender
            .send_request(request)
            .await
            .map_err(|error| fail(&error))
    }
}

impl KubeletClient {
    /// TLS to the first of `endpoint`'s hosts that can be dialed, and that host; the error
    /// says what failed for each, as Go's dialer does (`dial tcp host:port: …`).
    async fn connect(
        &self,
        endpoint: &KubeletEndpoint,
    ) -> Result<
        (
            tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
            String,
        ),
        String,
    > {
        if endpoint.hosts.is_empty() {
            return Err("no address to dial".to_owned());
        }
        let mut failures = Vec::new();
        for host in &endpoint.hosts {
            match self.connect_to(host, endpoint.port).await {
                Ok(tls) => return Ok((tls, host.clone())),
                Err(error) => failures.push(error),
            }
        }
        Err(failures.join("; "))
    }

    /// TLS to `host:port` with the client certificate.
    async fn connect_to(
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

    /// An upgrade request (`method`, `headers` as given) to `https://host:port{path_and_query}`
    /// over a connection of its own, as kube-apiserver's upgrade-aware proxy dials the
    /// kubelet; the error is the dial's (`dial tcp host:port: …`), for the caller to word as
    /// its counterpart in kube-apiserver does.
    pub async fn upgrade(
        &self,
        method: http::Method,
        endpoint: &KubeletEndpoint,
        path_and_query: &str,
        headers: &http::HeaderMap,
    ) -> Result<Upgrade, String> {
        let dialing = |error: &dyn std::fmt::Display| error.to_string();
        let (tls, host) = self.connect(endpoint).await?;
        let port = endpoint.port;
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
            http::HeaderValue::from_str(&host_port(&host, port))
                .map_err(|error| dialing(&error))?,
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

/// Which of a Node's addresses the emulator dials (kube-apiserver's
/// `--kubelet-preferred-address-types`), and whether loopback is tried last.
#[derive(Debug, Clone)]
pub struct KubeletAddresses {
    pub preferred: Vec<String>,
    pub loopback_fallback: bool,
}

/// Where a node's kubelet API is: the hosts to dial, in order, and its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletEndpoint {
    pub hosts: Vec<String>,
    pub port: u16,
}

impl KubeletEndpoint {
    /// The host kube-apiserver would dial, for messages.
    pub fn first_host(&self) -> &str {
        self.hosts.first().map_or("", String::as_str)
    }
}

impl KubeletAddresses {
    /// Where to dial `node`: its addresses of the preferred types, in that order (then
    /// loopback, when set), and the kubelet port it reports; the error kube-apiserver gives
    /// when none matches.
    pub fn endpoint(&self, node: &Value) -> Result<KubeletEndpoint, String> {
        let addresses = node
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut hosts: Vec<String> = Vec::new();
        for kind in &self.preferred {
            for address in &addresses {
                if address["type"].as_str() == Some(kind.as_str())
                    && let Some(host) = address["address"].as_str()
                    && !hosts.iter().any(|known| known == host)
                {
                    hosts.push(host.to_owned());
                }
            }
        }
        if hosts.is_empty() && !self.loopback_fallback {
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
        }
        if self.loopback_fallback && !hosts.iter().any(|host| host == "127.0.0.1") {
            hosts.push("127.0.0.1".to_owned());
        }
        let port = node
            .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
            .and_then(Value::as_u64)
            .and_then(|port| u16::try_from(port).ok())
            .filter(|port| *port > 0)
            .unwrap_or(10250);
        Ok(KubeletEndpoint { hosts, port })
    }
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

    fn addresses(kinds: &[&str], loopback_fallback: bool) -> KubeletAddresses {
        KubeletAddresses {
            preferred: kinds.iter().map(|kind| (*kind).to_owned()).collect(),
            loopback_fallback,
        }
    }

    fn endpoint(hosts: &[&str], port: u16) -> Result<KubeletEndpoint, String> {
        Ok(KubeletEndpoint {
            hosts: hosts.iter().map(|host| (*host).to_owned()).collect(),
            port,
        })
    }

    #[test]
    fn the_addresses_of_the_preferred_types_in_order_and_the_reported_port() {
        let node = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10350}}}});
        let defaults = addresses(DEFAULT_PREFERRED_ADDRESS_TYPES, false);
        assert_eq!(
            defaults.endpoint(&node),
            endpoint(&["n1", "10.0.0.1"], 10350)
        );
        assert_eq!(
            addresses(&["InternalIP", "Hostname"], false).endpoint(&node),
            endpoint(&["10.0.0.1", "n1"], 10350)
        );
        assert_eq!(
            addresses(DEFAULT_PREFERRED_ADDRESS_TYPES, true).endpoint(&node),
            endpoint(&["n1", "10.0.0.1", "127.0.0.1"], 10350),
            "standalone: loopback last"
        );
        let bare = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(defaults.endpoint(&bare), endpoint(&["n1"], 10250));
        assert_eq!(
            addresses(&["ExternalIP"], false).endpoint(&bare),
            Err("no preferred addresses found; known addresses: [{Hostname n1}]".into())
        );
        assert_eq!(
            addresses(&["ExternalIP"], true).endpoint(&bare),
            endpoint(&["127.0.0.1"], 10250)
        );
    }

    #[tokio::test]
    async fn an_address_that_cannot_be_dialed_gives_way_to_the_next() {
        let ca = ClusterCa::generate(SystemTime::now()).expect("a CA");
        let client = KubeletClient::from_ca(&ca, SystemTime::now()).expect("a client");
        let refused = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = refused.local_addr().expect("address").port();
        drop(refused);
        let nowhere = KubeletEndpoint {
            hosts: vec!["unresolvable.invalid".into(), "127.0.0.1".into()],
            port,
        };
        let error = client
            .get(&nowhere, "/healthz")
            .await
            .expect_err("nothing listens");
        assert!(
            error.starts_with(&format!(
                "Get \"https://unresolvable.invalid:{port}/healthz\": dial tcp unresolvable.invalid:{port}: "
            )) && error.contains(&format!("; dial tcp 127.0.0.1:{port}: ")),
            "each address tried, in order: {error}"
        );
    }
}
