//! `staticPodURL`, as the kubelet's HTTP source (`kl/config/http.go`): a GET every
//! `httpCheckFrequency` (after the previous one ended) with `staticPodURLHeader`'s headers, 10 s
//! for the whole exchange, the body read up to 10 MiB. A body that is a Pod or a PodList
//! replaces the source's pods; the same body as last time changes nothing; an empty body
//! empties the source (and is an error); anything else — no answer, a status other than 200,
//! a body that does not parse or holds a pod the kubelet refuses — is an error that keeps the
//! pods there are. `https` is verified against the host's trusted roots, as Go's default
//! client does (`SSL_CERT_FILE` and `SSL_CERT_DIR` honoured).

use std::{
    future::poll_fn,
    pin::Pin,
    sync::{Arc, OnceLock},
    time::Duration,
};

use http::{HeaderName, HeaderValue, Request, Uri, header};
use hyper::body::{Body, Incoming};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use rustls::{ClientConfig, RootCertStore, pki_types::ServerName};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
};
use tokio_rustls::TlsConnector;

use super::{
    files::first_of_each_name,
    manifest::{MAX_MANIFEST_BYTES, ManifestError, url_pods},
};

/// The kubelet's client timeout for the whole request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Go's `http.Client` follows at most this many redirects.
const MAX_REDIRECTS: usize = 10;
/// Failures logged at warning level before the message drops to debug (the kubelet's 3).
const LOUD_FAILURES: u32 = 3;

/// What `staticPodURL` is read with.
#[derive(Debug, Clone)]
pub struct UrlSource {
    pub url: String,
    /// `staticPodURLHeader`: every value of each name is sent.
    pub headers: Vec<(String, String)>,
    /// `httpCheckFrequency`.
    pub period: Duration,
    /// The TLS client for `https`; `None`: the host's trusted roots, loaded at the first
    /// `https` read.
    pub tls: Option<Arc<ClientConfig>>,
}

/// Why a read of the URL gave no pods. Each is tried again at the next period.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("Get \"{url}\": {source}")]
    Get {
        url: String,
        #[source]
        source: GetError,
    },
    #[error(
        "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )]
    Timeout { url: String },
    #[error("{url}: the read limit is reached")]
    TooLarge { url: String },
    /// Go's `resp.Status`, such as `404 Not Found`.
    #[error("{url}: {status}")]
    Status { url: String, status: String },
    #[error("zero-length data received from {url}")]
    Empty { url: String },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

/// Why one GET had no answer, in the words of Go's client where it has some.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    #[error("{0}")]
    Uri(#[source] http::uri::InvalidUri),
    #[error("unsupported protocol scheme {0:?}")]
    Scheme(String),
    #[error("no Host in request URL")]
    NoHost,
    #[error("dial tcp {host}:{port}: {source}")]
    Dial {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    ServerName(#[source] rustls::pki_types::InvalidDnsNameError),
    #[error(transparent)]
    HostRoots(#[from] HostRootsError),
    #[error("tls: {0}")]
    Tls(#[source] std::io::Error),
    #[error("{0}")]
    Request(#[source] http::Error),
    #[error("{0}")]
    Http(#[source] hyper::Error),
    #[error("refused a redirect from https to plain http")]
    RedirectToPlainHttp,
    #[error("stopped after {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
}

/// Why the host's trusted roots are not usable; kept for every later `https` read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostRootsError {
    /// None parsed; the first error reading them, if any.
    #[error("tls: no trusted root certificates on this host ({})", .0.as_deref().unwrap_or("none found"))]
    NoRoots(Option<String>),
    #[error("tls: {0}")]
    Config(#[source] rustls::Error),
}

/// What one read means for the source's pods.
#[derive(Debug)]
pub enum Read {
    /// The source's pods are these now.
    Pods(Vec<Pod>),
    /// The same body as last time: nothing changed.
    Unchanged,
}

/// The body last read, so an unchanged one is not parsed again, and the failures in a row.
#[derive(Debug, Default)]
pub struct UrlState {
    last_body: Option<Vec<u8>>,
    failures: u32,
}

impl UrlState {
    /// Takes in one GET's outcome (its body, or why there is none): the pods it gives, and
    /// the error to log. Only an empty body gives pods (none) and an error at once.
    pub fn take(
        &mut self,
        fetched: Result<Vec<u8>, UrlError>,
        url: &str,
        node: &str,
    ) -> (Option<Read>, Option<UrlError>) {
        let body = match fetched {
            Ok(body) => body,
            Err(error) => return (None, Some(error)),
        };
        if body.is_empty() {
            // The kubelet keeps the last body here, so the same body served again afterwards
            // would leave the source empty until it changes; it is forgotten instead.
            self.last_body = None;
            let error = UrlError::Empty {
                url: url.to_owned(),
            };
            return (Some(Read::Pods(Vec::new())), Some(error));
        }
        if self.last_body.as_deref() == Some(body.as_slice()) {
            return (Some(Read::Unchanged), None);
        }
        self.last_body = Some(body);
        let parsed = url_pods(self.last_body.as_deref().unwrap_or_default(), url, node);
        match parsed {
            Ok(pods) => {
                let pods = pods.into_iter().map(|pod| (pod, url.to_owned()));
                (Some(Read::Pods(first_of_each_name(pods, "http"))), None)
            }
            Err(error) => (None, Some(error.into())),
        }
    }

    /// Logs a read's error as the kubelet does: the first three loudly, then quietly; and
    /// says so when reading works again.
    pub fn log(&mut self, error: Option<&UrlError>) {
        match error {
            Some(error) => {
                if self.failures < LOUD_FAILURES {
                    tracing::warn!(%error, "Failed to read pods from URL");
                } else if self.failures == LOUD_FAILURES {
                    tracing::warn!(%error, "Failed to read pods from URL. Dropping verbosity of this message to debug");
                } else {
                    tracing::debug!(%error, "Failed to read pods from URL");
                }
                self.failures = self.failures.saturating_add(1);
            }
            None if self.failures > 0 => {
                tracing::info!("Successfully read pods from URL");
                self.failures = 0;
            }
            None => {}
        }
    }
}

/// One GET of the source's URL, redirects followed as Go's client does (at most 10, the
/// credentials not sent to another domain), except from `https` to plain `http`, which is
/// refused; the body whatever the status (checked after it was read, as the kubelet).
pub async fn fetch(source: &UrlSource) -> Result<Vec<u8>, UrlError> {
    let url = source.url.clone();
    match tokio::time::timeout(REQUEST_TIMEOUT, follow(source)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(UrlError::Timeout { url }),
    }
}

/// Headers Go's client leaves out of a redirect to another domain (`shouldCopyHeaderOnRedirect`).
const SENSITIVE_HEADERS: [&str; 4] = ["authorization", "www-authenticate", "cookie", "cookie2"];

async fn follow(source: &UrlSource) -> Result<Vec<u8>, UrlError> {
    let mut url = source.url.clone();
    let mut initial_host = None;
    // Once dropped, the credentials stay dropped, even back on the first host (Go since 1.23.5).
    let mut credentials = true;
    for _ in 0..=MAX_REDIRECTS {
        let get_error = |source: GetError| UrlError::Get {
            url: url.clone(),
            source,
        };
        let uri: Uri = url.parse().map_err(|e| get_error(GetError::Uri(e)))?;
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let first_host = initial_host.get_or_insert_with(|| host.clone());
        credentials &= is_domain_or_subdomain(&host, first_host);
        let (status, location, body) = get(source, &uri, credentials).await.map_err(get_error)?;
        let next = location.filter(|_| matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308));
        if let Some(next) = next {
            url = redirect_target(&uri, &next);
            let plain = url
                .get(..5)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http:"));
            if uri.scheme_str() == Some("https") && plain {
                return Err(UrlError::Get {
                    url,
                    source: GetError::RedirectToPlainHttp,
                });
            }
            continue;
        }
        let body = body.ok_or_else(|| UrlError::TooLarge {
            url: source.url.clone(),
        })?;
        if status != http::StatusCode::OK {
            return Err(UrlError::Status {
                url: source.url.clone(),
                status: status_text(status),
            });
        }
        return Ok(body);
    }
    Err(UrlError::Get {
        url,
        source: GetError::TooManyRedirects,
    })
}

/// Go's `isDomainOrSubdomain`: `sub` is `parent` or ends in `.parent`; an IPv6 address only
/// matches itself.
fn is_domain_or_subdomain(sub: &str, parent: &str) -> bool {
    sub == parent
        || (!sub.contains([':', '%'])
            && sub
                .strip_suffix(parent)
                .is_some_and(|head| head.ends_with('.')))
}

/// Go's `resp.Status`: the code and its reason phrase.
fn status_text(status: http::StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// A `Location` as a full URL (a path is on the same server).
fn redirect_target(from: &Uri, location: &str) -> String {
    if location.starts_with('/') && !location.starts_with("//") {
        let authority = from.authority().map_or("", |a| a.as_str());
        return format!(
            "{}://{authority}{location}",
            from.scheme_str().unwrap_or("http")
        );
    }
    location.to_owned()
}

/// The status, a redirect's `Location`, and the body (`None`: past 10 MiB).
type Answer = (http::StatusCode, Option<String>, Option<Vec<u8>>);

/// One GET of `uri`; the configured credentials sent only if `credentials`.
async fn get(source: &UrlSource, uri: &Uri, credentials: bool) -> Result<Answer, GetError> {
    let tls = match uri.scheme_str() {
        Some("http") => None,
        Some("https") => Some(match &source.tls {
            Some(config) => Arc::clone(config),
            None => host_roots()?,
        }),
        other => return Err(GetError::Scheme(other.unwrap_or_default().to_owned())),
    };
    let host = uri.host().ok_or(GetError::NoHost)?;
    let host = host.trim_matches(['[', ']']);
    let port = uri
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|source| GetError::Dial {
            host: host.to_owned(),
            port,
            source,
        })?;
    let Some(tls) = tls else {
        return exchange(source, uri, credentials, stream).await;
    };
    let name = ServerName::try_from(host.to_owned()).map_err(GetError::ServerName)?;
    let stream = TlsConnector::from(tls)
        .connect(name, stream)
        .await
        .map_err(GetError::Tls)?;
    exchange(source, uri, credentials, stream).await
}

/// The host's trusted roots as Go's default client finds them, read once: a failure to read
/// them is every `https` read's error, where Go would fail each handshake.
fn host_roots() -> Result<Arc<ClientConfig>, HostRootsError> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, HostRootsError>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found.errors.first().map(ToString::to_string);
                return Err(HostRootsError::NoRoots(why));
            }
            client_config(roots).map_err(HostRootsError::Config)
        })
        .clone()
}

/// A TLS client trusting `roots`, on the ring provider the rest of nodepulse uses.
fn client_config(roots: RootCertStore) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// One request over `stream` (plain or TLS) and its answer.
async fn exchange<S>(
    source: &UrlSource,
    uri: &Uri,
    credentials: bool,
    stream: S,
) -> Result<Answer, GetError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let request = request(source, uri, credentials).map_err(GetError::Request)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(GetError::Http)?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await.map_err(GetError::Http)?;
    let status = response.status();
    let location = (response.headers().get(header::LOCATION))
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = read_at_most(response.into_body())
        .await
        .map_err(GetError::Http)?;
    Ok((status, location, body))
}

/// The GET with the configured headers (the credentials among them only if `credentials`)
/// and Go's `User-Agent` unless one is given.
fn request(
    source: &UrlSource,
    uri: &Uri,
    credentials: bool,
) -> Result<Request<String>, http::Error> {
    let mut builder = Request::get(uri.path_and_query().map_or("/", |p| p.as_str()));
    let headers = builder.headers_mut().expect("a fresh builder has headers");
    for (name, value) in &source.headers {
        if !credentials && SENSITIVE_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            continue;
        }
        headers.append(
            HeaderName::try_from(name.as_str())?,
            HeaderValue::try_from(value.as_str())?,
        );
    }
    if !headers.contains_key(header::HOST) {
        let authority = uri.authority().map_or("", |a| a.as_str());
        headers.insert(header::HOST, HeaderValue::try_from(authority)?);
    }
    if !headers.contains_key(header::USER_AGENT) {
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static("Go-http-client/1.1"),
        );
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    builder.body(String::new())
}

/// The body, or `None` when it is longer than [`MAX_MANIFEST_BYTES`] (`utilio.ReadAtMost`).
async fn read_at_most(mut body: Incoming) -> hyper::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame?.into_data() {
            bytes.extend_from_slice(&data);
            if bytes.len() > MAX_MANIFEST_BYTES {
                return Ok(None);
            }
        }
    }
    Ok(Some(bytes))
}

#[cfg(test)]
#[path = "url_tests.rs"]
mod tests;
