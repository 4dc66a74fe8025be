//! A counting TCP proxy between nodepulse and its API server: every byte each way, and every
//! request by verb and resource, so the bench can say what one node costs on the wire. It
//! parses only the request heads (client → server) to count them; bytes are forwarded as they
//! come, unchanged.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// What went through the proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Requests by `"<VERB> <resource>"`, e.g. `"PATCH leases"`, `"WATCH pods"`.
    pub requests: BTreeMap<String, u64>,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
}

impl Traffic {
    /// What happened since `earlier`.
    pub fn since(&self, earlier: &Traffic) -> Traffic {
        let requests = self
            .requests
            .iter()
            .map(|(kind, count)| {
                (
                    kind.clone(),
                    count - earlier.requests.get(kind).copied().unwrap_or(0),
                )
            })
            .filter(|(_, count)| *count > 0)
            .collect();
        Traffic {
            requests,
            bytes_to_server: self.bytes_to_server - earlier.bytes_to_server,
            bytes_to_client: self.bytes_to_client - earlier.bytes_to_client,
        }
    }
}

pub type Counter = Arc<Mutex<Traffic>>;

/// `PATCH /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1` → `PATCH leases`;
/// `GET /api/v1/pods?watch=true&…` → `WATCH pods`; subresources are kept (`nodes/status`).
pub fn classify(request_line: &str) -> String {
    let mut parts = request_line.split_whitespace();
    let (verb, target) = (parts.next().unwrap_or("?"), parts.next().unwrap_or("/"));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // Skip `api/v1` or `apis/<group>/<version>`, then `namespaces/<ns>` when followed by more.
    let mut rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => &segments,
    };
    if rest.first() == Some(&"namespaces") && rest.len() > 2 {
        rest = &rest[2..];
    }
    let resource = match rest {
        [] => path.to_owned(),
        [resource] | [resource, _] => (*resource).to_owned(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    };
    let watch = query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1");
    format!("{} {resource}", if watch { "WATCH" } else { verb })
}

/// Counts the requests whose heads (and bodies, by Content-Length) are complete in `buffer`,
/// removing them from it.
fn count_requests(buffer: &mut Vec<u8>, counter: &Counter) {
    loop {
        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
            return;
        };
        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        if buffer.len() < end + 4 + length {
            return;
        }
        let kind = classify(head.lines().next().unwrap_or_default());
        *counter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests
            .entry(kind)
            .or_default() += 1;
        buffer.drain(..end + 4 + length);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    counter: Counter,
    to_server: bool,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut pending = Vec::new();
    while let Ok(read) = from.read(&mut chunk).await {
        if read == 0 || to.write_all(&chunk[..read]).await.is_err() {
            break;
        }
        {
            let mut traffic = counter.lock().unwrap_or_else(PoisonError::into_inner);
            if to_server {
                traffic.bytes_to_server += read as u64;
            } else {
                traffic.bytes_to_client += read as u64;
            }
        }
        if to_server {
            pending.extend_from_slice(&chunk[..read]);
            count_requests(&mut pending, &counter);
        }
    }
    let _ = to.shutdown().await;
}

/// Listens on a free local port and forwards every connection to `upstream`.
pub async fn start(upstream: SocketAddr) -> std::io::Result<(SocketAddr, Counter)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let counter = Counter::default();
    let accepted = Arc::clone(&counter);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(upstream).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::spawn(pipe(client_read, server_write, Arc::clone(&accepted), true));
            tokio::spawn(pipe(
                server_read,
                client_write,
                Arc::clone(&accepted),
                false,
            ));
        }
    });
    Ok((address, counter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classified_by_verb_and_resource() {
        let cases = [
            (
                "PATCH /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1 HTTP/1.1",
                "PATCH leases",
            ),
            (
                "PATCH /api/v1/nodes/n1/status HTTP/1.1",
                "PATCH nodes/status",
            ),
            (
                "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true HTTP/1.1",
                "WATCH pods",
            ),
            (
                "GET /api/v1/nodes?fieldSelector=metadata.name%3Dn1 HTTP/1.1",
                "GET nodes",
            ),
            (
                "POST /api/v1/namespaces/default/events HTTP/1.1",
                "POST events",
            ),
            (
                "PATCH /api/v1/namespaces/default/pods/web/status HTTP/1.1",
                "PATCH pods/status",
            ),
        ];
        for (line, kind) in cases {
            assert_eq!(classify(line), kind, "{line}");
        }
    }

    #[test]
    fn pipelined_and_split_requests_are_each_counted_once() {
        let counter = Counter::default();
        let mut buffer = b"PUT /api/v1/nodes/a HTTP/1.1\r\nContent-Length: 4\r\n\r\n{}\r\nGET /api/v1/nodes/a HTTP/1.1\r\n\r\nPATCH /api/v1/no".to_vec();
        count_requests(&mut buffer, &counter);
        buffer.extend_from_slice(b"des/a/status HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}");
        count_requests(&mut buffer, &counter);
        let requests = counter.lock().unwrap().requests.clone();
        assert_eq!(requests["PUT nodes"], 1);
        assert_eq!(requests["GET nodes"], 1);
        assert_eq!(requests["PATCH nodes/status"], 1);
        assert!(buffer.is_empty());
    }
}
