//! The `tcpSocket` probe: a connection to host:port within the timeout is a success (closed
//! at once); the dial error's text is the failure, as the kubelet's `pkg/probe/tcp`.

use std::time::Duration;

use nodepulse_actors::ports::ProbeOutcome;
use tokio::net::TcpStream;

pub async fn probe(host: &str, port: u16, timeout: Duration) -> ProbeOutcome {
    let address = super::http::authority(host, port);
    match tokio::time::timeout(timeout, TcpStream::connect(address.as_str())).await {
        Ok(Ok(stream)) => {
            drop(stream);
            ProbeOutcome::Success(String::new())
        }
        // Go prints the errno's text alone ("connection refused"), not Rust's "(os error 111)".
        Ok(Err(error)) => {
            ProbeOutcome::Failure(format!("dial tcp {address}: connect: {}", error.kind()))
        }
        Err(_) => ProbeOutcome::Failure(format!("dial tcp {address}: i/o timeout")),
    }
}
