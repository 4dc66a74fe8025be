//! The two byte-level ways kube-apiserver passes an upgraded stream to the kubelet: its
//! upgrade-aware proxy (the client's WebSocket request sent on as it is, the kubelet's 101
//! handed back, bytes copied both ways), and the port-forward tunnel (`TunnelingHandler`:
//! the client's WebSocket `SPDY/3.1+portforward.k8s.io` accepted once the kubelet has
//! accepted a SPDY upgrade, and the SPDY bytes carried in binary messages).

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::websocket::{self, Message};

/// The kubelet's bytes as a response body, until it closes.
fn body_of(
    reader: impl AsyncRead + Unpin + 'static,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold(reader, |mut reader| async move {
        let mut buffer = vec![0u8; 32 * 1024];
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => None,
            Ok(read) => {
                buffer.truncate(read);
                Some((Ok(Bytes::from(buffer)), reader))
            }
        }
    })
}

/// A channel's frames as a response body, until every sender is gone.
pub fn body_from(
    receiver: mpsc::UnboundedReceiver<Bytes>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|frame| (Ok(frame), receiver))
    })
}

/// A 101 answer with `headers` (but `Connection`, which actix writes) and `body`.
fn switching(
    headers: &http::HeaderMap,
    body: impl Stream<Item = Result<Bytes, std::io::Error>> + 'static,
) -> HttpResponse {
    let mut response = HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS);
    response.upgrade("websocket");
    for (name, value) in headers {
        if name != http::header::CONNECTION && name != http::header::UPGRADE {
            response.append_header((name.as_str(), value.as_bytes()));
        }
    }
    response.streaming(body)
}

/// The kubelet's refusal, relayed as it is.
pub fn refused(status: http::StatusCode, headers: &http::HeaderMap, body: Bytes) -> HttpResponse {
    let mut response = HttpResponse::build(
        StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY),
    );
    for (name, value) in headers {
        if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
            response.append_header((name.as_str(), value.as_bytes()));
        }
    }
    response.body(body)
}

/// The upgrade-aware proxy's splice once the kubelet answered 101: `client` (the bytes after
/// the client's request head) to the kubelet, the kubelet's bytes as the answer's body.
pub fn splice<S, E>(
    client: S,
    headers: &http::HeaderMap,
    io: hyper::upgrade::Upgraded,
) -> HttpResponse
where
    S: Stream<Item = Result<Bytes, E>> + Unpin + 'static,
{
    let (reader, mut writer) = tokio::io::split(hyper_util::rt::TokioIo::new(io));
    actix_web::rt::spawn(async move {
        let mut client = client;
        while let Some(Ok(chunk)) = client.next().await {
            if writer.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // The client is gone: the kubelet sees the end and closes its side, which ends the
        // body.
        let _ = writer.shutdown().await;
    });
    switching(headers, body_of(reader))
}

/// The tunnel once the kubelet accepted the SPDY upgrade: the client's WebSocket accepted
/// with `SPDY/3.1+<the kubelet's protocol>`, binary messages' payloads to the kubelet, its
/// bytes back as binary messages, a close frame when it closes.
pub fn tunnel<S, E>(
    client: S,
    accept: &str,
    kubelet: &http::HeaderMap,
    io: hyper::upgrade::Upgraded,
) -> HttpResponse
where
    S: Stream<Item = Result<Bytes, E>> + Unpin + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(hyper_util::rt::TokioIo::new(io));
    let (out, frames) = mpsc::unbounded_channel();
    let pong = out.clone();
    actix_web::rt::spawn(async move {
        let mut client = websocket::Reader::new(client);
        loop {
            match client.next().await {
                Message::Binary(data) => {
                    if writer.write_all(&data).await.is_err() {
                        break;
                    }
                }
                Message::Ping(data) => {
                    let _ = pong.send(websocket::frame(websocket::PONG, &data));
                }
                Message::Close => break,
            }
        }
        let _ = writer.shutdown().await;
    });
    actix_web::rt::spawn(async move {
        let mut buffer = vec![0u8; 32 * 1024];
        while let Ok(read @ 1..) = reader.read(&mut buffer).await {
            if out
                .send(websocket::frame(websocket::BINARY, &buffer[..read]))
                .is_err()
            {
                return;
            }
        }
        let _ = out.send(websocket::frame(websocket::CLOSE, &1000u16.to_be_bytes()));
    });
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "sec-websocket-accept",
        http::HeaderValue::from_str(accept).unwrap_or(http::HeaderValue::from_static("")),
    );
    if let Some(protocol) = kubelet
        .get("x-stream-protocol-version")
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|protocol| !protocol.is_empty())
        && let Ok(value) = http::HeaderValue::from_str(&format!("SPDY/3.1+{protocol}"))
    {
        headers.insert("sec-websocket-protocol", value);
    }
    switching(&headers, body_from(frames))
}
