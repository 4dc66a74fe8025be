//! The grpc probe against a health server on 127.0.0.1 (tonic's codec under hyper's HTTP/2
//! server, as the test CSI plugin serves): serving, not serving, unimplemented, a slow answer
//! past the timeout and a refused connection, each with `pkg/probe/grpc`'s text.

use std::{convert::Infallible, time::Duration};

use hyper_util::rt::{TokioExecutor, TokioIo};
use nodepulse_actors::ports::ProbeOutcome;
use tokio::net::TcpListener;
use tonic::Status;

use super::grpc::{self, HealthCheckRequest, HealthCheckResponse, ServingStatus};

/// Serves `grpc.health.v1.Health/Check`: service "" serving, "down" not serving, "slow"
/// answers after 5 s, anything else Unimplemented as a server without the health service.
async fn serve_health() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|request| async move {
                    let check = tower::service_fn(
                        |request: tonic::Request<HealthCheckRequest>| async move {
                            let status = match request.into_inner().service.as_str() {
                                "" => ServingStatus::Serving,
                                "down" => ServingStatus::NotServing,
                                "slow" => {
                                    tokio::time::sleep(Duration::from_secs(5)).await;
                                    ServingStatus::Serving
                                }
                                _ => {
                                    return Err(Status::unimplemented(
                                        "unknown service grpc.health.v1.Health",
                                    ));
                                }
                            };
                            Ok(tonic::Response::new(HealthCheckResponse {
                                status: status as i32,
                            }))
                        },
                    );
                    let codec =
                        tonic_prost::ProstCodec::<HealthCheckResponse, HealthCheckRequest>::new();
                    let answer = tonic::server::Grpc::new(codec).unary(check, request).await;
                    Ok::<_, Infallible>(answer)
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    port
}

async fn check(port: u16, service: Option<&str>, timeout: Duration) -> ProbeOutcome {
    grpc::probe("127.0.0.1", port, service, timeout).await
}

#[tokio::test]
async fn grpc_probe_reads_the_health_status() {
    let port = serve_health().await;
    let second = Duration::from_secs(5);
    assert_eq!(
        check(port, None, second).await,
        ProbeOutcome::Success("service healthy".into())
    );
    let unhealthy = "service unhealthy (responded with \"NOT_SERVING\")".to_owned();
    assert_eq!(
        check(port, Some("down"), second).await,
        ProbeOutcome::Failure(unhealthy)
    );
    let unimplemented = "error: this server does not implement the grpc health protocol \
                         (grpc.health.v1.Health): unknown service grpc.health.v1.Health";
    assert_eq!(
        check(port, Some("other"), second).await,
        ProbeOutcome::Failure(unimplemented.into())
    );
}

#[tokio::test]
async fn grpc_probe_times_out_and_reports_a_refused_connection() {
    let port = serve_health().await;
    let slow = check(port, Some("slow"), Duration::from_millis(300)).await;
    let ProbeOutcome::Failure(text) = slow else {
        panic!("timeout")
    };
    assert!(
        text.starts_with("timeout: health rpc did not complete within "),
        "{text}"
    );
    let closed = super::tests::closed_port().await;
    let ProbeOutcome::Failure(text) = check(closed, None, Duration::from_secs(5)).await else {
        panic!()
    };
    let prefix = format!("error: failed to connect service at \"127.0.0.1:{closed}\": ");
    assert!(text.starts_with(&prefix), "{text}");
}
