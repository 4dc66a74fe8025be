//! The `httpGet` probe as the kubelet's `pkg/probe/http`: one GET per probe on a fresh
//! connection (no keep-alive, no proxy, no compression; not the kubelet's 1 s SO_LINGER,
//! which would block a runtime thread on close), redirects followed only to the same
//! host and at most 10 times, 200–399 a success, the body read capped at 10 KiB.

use std::{future::poll_fn, pin::Pin, time::Duration};

use http::{HeaderName, HeaderValue, Request, Uri, header};
use hyper::body::{Body, Incoming};
use hyper_util::rt::TokioIo;
use nodepulse_actors::ports::{HTTP_STATUS_FAILURE, ProbeOutcome};
use tokio::net::TcpStream;

/// The kubelet's `User-Agent` (`kube-probe/<major>.<minor>` of the version it follows).
pub const USER_AGENT: &str = "kube-probe/1.36";
/// How much of a response body a probe reads (`maxRespBodyLength`).
pub const MAX_BODY_BYTES: usize = 10 * 1024;
/// Go's `http.Client` default redirect limit, which the kubelet keeps.
const MAX_REDIRECTS: usize = 10;

/// One httpGet probe to `url`; TLS is the caller's (`https` goes through [`super::tls`]).
pub struct HttpProbe<'a> {
    pub scheme: &'a str,
    pub host: &'a str,
    pub port: u16,
    pub path: &'a str,
    pub headers: &'a [(String, String)],
}

/// Runs the probe, the whole exchange (redirects included) bounded by `timeout`.
pub async fn probe(spec: &HttpProbe<'_>, timeout: Duration) -> ProbeOutcome {
    let path = if spec.path.starts_with('/') {
        spec.path.to_owned()
    } else {
        format!("/{}", spec.path)
    };
    let url = format!(
        "{}://{}{path}",
        spec.scheme,
        authority(spec.host, spec.port)
    );
    match tokio::time::timeout(timeout, follow(spec, url.clone())).await {
        Ok(outcome) => outcome,
        Err(_) => ProbeOutcome::Failure(format!(
            "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

/// `host:port`, an IPv6 address bracketed.
pub(super) fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

async fn follow(spec: &HttpProbe<'_>, mut url: String) -> ProbeOutcome {
    for _ in 0..=MAX_REDIRECTS {
        let uri: Uri = match url.parse() {
            Ok(uri) => uri,
            Err(error) => return ProbeOutcome::Failure(format!("parse \"{url}\": {error}")),
        };
        let (status, location, body) = match get(spec, &uri).await {
            Ok(answer) => answer,
            Err(error) => return ProbeOutcome::Failure(format!("Get \"{url}\": {error}")),
        };
        // Go's client follows a redirect only with a Location; the kubelet's CheckRedirect then
        // allows it only to the same host.
        let next = location.filter(|_| matches!(status, 301 | 302 | 303 | 307 | 308));
        if let Some(next) = next.and_then(|location| same_host(&uri, &location)) {
            url = next;
            continue;
        }
        return match status {
            200..=299 => ProbeOutcome::Success(body),
            300..=399 => {
                ProbeOutcome::Warning(format!("Probe terminated redirects, Response body: {body}"))
            }
            _ => ProbeOutcome::Failure(format!("{HTTP_STATUS_FAILURE}{status}")),
        };
    }
    ProbeOutcome::Failure(format!(
        "Get \"{url}\": stopped after {MAX_REDIRECTS} redirects"
    ))
}

/// The redirect target as a full URL when it stays on `from`'s host, else `None`.
fn same_host(from: &Uri, location: &str) -> Option<String> {
    let authority = from.authority()?.as_str();
    if location.starts_with('/') && !location.starts_with("//") {
        return Some(format!("{}://{authority}{location}", from.scheme_str()?));
    }
    let target: Uri = location.parse().ok()?;
    (target.host()? == from.host()?).then(|| location.to_owned())
}

/// One GET: the status, the `Location` header and the body's first 10 KiB.
async fn get(
    spec: &HttpProbe<'_>,
    uri: &Uri,
) -> Result<(u16, Option<String>, String), Box<dyn std::error::Error + Send + Sync>> {
    let host = uri.host().ok_or("missing host")?.trim_matches(['[', ']']);
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let stream = TcpStream::connect((host, port)).await?;
    let request = request(spec, uri)?;
    let response = if uri.scheme_str() == Some("https") {
        let stream = super::tls::connect_unverified(stream, host).await?;
        send(TokioIo::new(stream), request).await?
    } else {
        send(TokioIo::new(stream), request).await?
    };
    let status = response.status().as_u16();
    let location = (response.headers().get(header::LOCATION))
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = read_capped(response.into_body()).await?;
    Ok((status, location, body))
}

async fn send<Io>(io: Io, request: Request<String>) -> hyper::Result<http::Response<Incoming>>
where
    Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}

/// The request with the kubelet's headers: the spec's, then `User-Agent` and `Accept: */*`
/// unless given (an explicitly empty `Accept` is dropped), `Host` honoured.
fn request(spec: &HttpProbe<'_>, uri: &Uri) -> Result<Request<String>, http::Error> {
    let mut builder = Request::get(uri.path_and_query().map_or("/", |p| p.as_str()));
    let given = |name: &HeaderName| {
        spec.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name.as_str()))
    };
    let headers = builder.headers_mut().expect("a fresh builder has headers");
    for (name, value) in spec.headers {
        let is_empty_accept = name.eq_ignore_ascii_case("accept") && value.is_empty();
        if !is_empty_accept {
            headers.append(
                HeaderName::try_from(name.as_str())?,
                HeaderValue::try_from(value.as_str())?,
            );
        }
    }
    if !given(&header::HOST) {
        let authority = uri.authority().map_or(spec.host, |a| a.as_str());
        headers.insert(header::HOST, HeaderValue::try_from(authority)?);
    }
    if !given(&header::USER_AGENT) {
        headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
    }
    if !given(&header::ACCEPT) {
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    builder.body(String::new())
}

/// The body up to [`MAX_BODY_BYTES`], the rest left unread.
async fn read_capped(mut body: Incoming) -> hyper::Result<String> {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_BODY_BYTES {
        let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await else {
            break;
        };
        if let Ok(data) = frame?.into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    bytes.truncate(MAX_BODY_BYTES);
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
