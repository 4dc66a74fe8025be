//! The `grpc` probe: `grpc.health.v1.Health/Check` over plaintext HTTP/2 with the kubelet's
//! user agent, the whole probe bounded by the timeout, and `pkg/probe/grpc`'s texts. The two
//! messages are written by hand with prost's derives, as `cri/src/client/proto` does (no protoc).

use std::time::Duration;

use http::uri::PathAndQuery;
use nodepulse_actors::{go_duration::go_duration, ports::ProbeOutcome};
use tonic::{Code, transport::Endpoint};

use super::http::USER_AGENT;

const CHECK: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckRequest { string service = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    pub service: String,
}

/// `HealthCheckResponse { ServingStatus status = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct HealthCheckResponse {
    #[prost(enumeration = "ServingStatus", tag = "1")]
    pub status: i32,
}

/// `HealthCheckResponse.ServingStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

impl ServingStatus {
    fn proto_name(status: i32) -> String {
        match Self::try_from(status) {
            Ok(Self::Unknown) => "UNKNOWN".into(),
            Ok(Self::Serving) => "SERVING".into(),
            Ok(Self::NotServing) => "NOT_SERVING".into(),
            Ok(Self::ServiceUnknown) => "SERVICE_UNKNOWN".into(),
            Err(_) => status.to_string(),
        }
    }
}

pub async fn probe(
    host: &str,
    port: u16,
    service: Option<&str>,
    timeout: Duration,
) -> ProbeOutcome {
    let address = super::http::authority(host, port);
    let within = go_duration(timeout);
    let endpoint = match Endpoint::from_shared(format!("http://{address}")) {
        Ok(endpoint) => endpoint.connect_timeout(timeout),
        Err(error) => {
            return ProbeOutcome::Failure(format!(
                "error: failed to connect service at {address:?}: {error}"
            ));
        }
    };
    let endpoint = match endpoint.user_agent(USER_AGENT) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            return ProbeOutcome::Failure(format!(
                "error: failed to connect service at {address:?}: {error}"
            ));
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let channel = match tokio::time::timeout_at(deadline, endpoint.connect()).await {
        Ok(Ok(channel)) => channel,
        Ok(Err(error)) => {
            return ProbeOutcome::Failure(format!(
                "error: failed to connect service at {address:?}: {error}"
            ));
        }
        Err(_) => {
            return ProbeOutcome::Failure(format!(
                "timeout: failed to connect service {address:?} within {within}: context deadline exceeded"
            ));
        }
    };
    let mut grpc = tonic::client::Grpc::new(channel);
    let request = HealthCheckRequest {
        service: service.unwrap_or_default().to_owned(),
    };
    let call = async {
        grpc.ready()
            .await
            .map_err(|error| tonic::Status::unavailable(error.to_string()))?;
        let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::new();
        grpc.unary(
            tonic::Request::new(request),
            PathAndQuery::from_static(CHECK),
            codec,
        )
        .await
    };
    match tokio::time::timeout_at(deadline, call).await {
        Err(_) => ProbeOutcome::Failure(format!(
            "timeout: health rpc did not complete within {within}"
        )),
        Ok(Err(status)) => match status.code() {
            Code::Unimplemented => ProbeOutcome::Failure(format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                status.message()
            )),
            Code::DeadlineExceeded => ProbeOutcome::Failure(format!(
                "timeout: health rpc did not complete within {within}"
            )),
            _ => ProbeOutcome::Failure(format!("error: health rpc probe failed: {status}")),
        },
        Ok(Ok(response)) => match response.into_inner().status {
            status if status == ServingStatus::Serving as i32 => {
                ProbeOutcome::Success("service healthy".into())
            }
            status => ProbeOutcome::Failure(format!(
                "service unhealthy (responded with {:?})",
                ServingStatus::proto_name(status)
            )),
        },
    }
}
