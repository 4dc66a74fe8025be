//! The CRI client's event stream against a small CRI fake that serves `GetContainerEvents`
//! only (hyper's HTTP/2 server under tonic's codec): events arrive decoded, with their pod's
//! UID, as the fake sends them; a runtime without the call (containerd 1.6) is Unimplemented;
//! a stream the runtime ends ends.

use std::{
    convert::Infallible,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{StreamExt, stream::BoxStream};
use hyper_util::rt::{TokioExecutor, TokioIo};
use nodepulse_actors::ports::{ContainerEvent, ContainerRuntime, ContainerRuntimeError};
use tokio::{net::UnixListener, sync::mpsc, task::JoinHandle};
use tonic::Status;

use super::super::{CriClient, proto};

pub(in crate::client) type Events = mpsc::UnboundedReceiver<proto::ContainerEventResponse>;
type EventStream = BoxStream<'static, Result<proto::ContainerEventResponse, Status>>;

/// A runtime on `path` whose GetContainerEvents streams what `events` receives (every other
/// call, and this one when `events` is `None`, is Unimplemented).
pub(in crate::client) fn serve(path: &Path, events: Option<Events>) -> JoinHandle<()> {
    let listener = UnixListener::bind(path).expect("bind");
    let events = Arc::new(Mutex::new(events));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let events = Arc::clone(&events);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: http::Request<_>| {
                    let events = events.lock().expect("events").take();
                    async move {
                        let answer = match events {
                            Some(events)
                                if request.uri().path() == proto::paths::GET_CONTAINER_EVENTS =>
                            {
                                stream_events(events, request).await
                            }
                            _ => Status::unimplemented("unknown method").into_http(),
                        };
                        Ok::<_, Infallible>(answer)
                    }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

async fn stream_events(
    events: Events,
    request: http::Request<hyper::body::Incoming>,
) -> http::Response<tonic::body::Body> {
    let mut events = Some(events);
    let service = tower::service_fn(move |_: tonic::Request<proto::GetEventsRequest>| {
        let stream: EventStream = match events.take() {
            Some(events) => futures::stream::unfold(events, |mut events| async move {
                let event = events.recv().await?;
                Some((Ok(event), events))
            })
            .boxed(),
            None => futures::stream::empty().boxed(),
        };
        std::future::ready(Ok::<_, Status>(tonic::Response::new(stream)))
    });
    tonic::server::Grpc::new(tonic_prost::ProstCodec::<
        proto::ContainerEventResponse,
        proto::GetEventsRequest,
    >::new())
    .server_streaming(service, request)
    .await
}

fn event(
    container: &str,
    uid: &str,
    kind: proto::ContainerEventType,
) -> proto::ContainerEventResponse {
    proto::ContainerEventResponse {
        container_id: container.to_owned(),
        container_event_type: kind as i32,
        created_at: 1,
        pod_sandbox_status: Some(proto::PodSandboxStatus {
            id: "sandbox-1".to_owned(),
            metadata: Some(proto::PodSandboxMetadata {
                name: "web".to_owned(),
                uid: uid.to_owned(),
                namespace: "default".to_owned(),
                attempt: 0,
            }),
            ..proto::PodSandboxStatus::default()
        }),
    }
}

fn client(dir: &Path) -> CriClient {
    let endpoint = format!("unix://{}", dir.join("cri.sock").display());
    CriClient::new(&endpoint, Duration::from_secs(5)).expect("endpoint")
}

#[tokio::test]
async fn events_arrive_as_the_runtime_sends_them_until_it_ends_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let (send, receive) = mpsc::unbounded_channel();
    let server = serve(&dir.path().join("cri.sock"), Some(receive));
    let mut events = client(dir.path())
        .container_events()
        .await
        .expect("subscribed");
    send.send(event(
        "c1",
        "u1",
        proto::ContainerEventType::ContainerStartedEvent,
    ))
    .unwrap();
    send.send(event(
        "c1",
        "u1",
        proto::ContainerEventType::ContainerStoppedEvent,
    ))
    .unwrap();
    let expected = ContainerEvent {
        container_id: "c1".to_owned(),
        pod_uid: Some("u1".to_owned()),
    };
    for _ in 0..2 {
        let next = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
        assert_eq!(next.expect("in time").expect("an event").unwrap(), expected);
    }
    drop(send);
    let end = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
    assert!(
        end.expect("in time").is_none(),
        "the stream ends with the runtime's"
    );
    server.abort();
}

#[tokio::test]
async fn a_runtime_without_the_event_stream_answers_unimplemented() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("cri.sock"), None);
    let answer = client(dir.path()).container_events().await;
    assert!(
        matches!(
            answer,
            Err(ContainerRuntimeError::Unimplemented {
                method: "GetContainerEvents"
            })
        ),
        "{:?}",
        answer.err()
    );
    server.abort();
}
