//! A bound on a client's requests in flight, for a fleet in one process: over HTTP/1 each
//! request in flight holds a pooled connection and its buffers, so 10,000 nodes registering
//! and reporting at once opened thousands of connections (and kept the heap's peak, which the
//! allocator does not give back). Requests past the bound wait their turn in order.
//!
//! A request's place is held until its answer has been read whole (a watch's, whose body
//! never ends, until its head). hyper hands a body over as a slice of its connection's read
//! buffer (8 KiB at least) and returns the connection to the pool as soon as the body is in
//! that buffer: an answer waiting for its caller, whose thread is busy with other nodes, kept
//! the whole buffer. With the place given back at the head, a 200-node fleet starting 2,000
//! pods had answered far more requests than its callers had read: at the heap's peak 2,908
//! read buffers (22.7 MiB of its 111) were alive for about 140 connections. The body is now
//! read in the request's own task and copied into an allocation of its length, and the header
//! values, slices of the same buffer, are copied too: 149 buffers at the peak (1.2 MiB)
//! (`bench/heaptrack-peak.py`; with the body alone copied, 1,600). A client without a bound
//! (one node's) hands its answers on as they come.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use bytes::Bytes;
use futures::{FutureExt, TryFutureExt, future::BoxFuture};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Body;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{BoxError, Service};

use super::metrics::query_flag;

/// An answer as the layer hands it on: read whole, or (a watch's, a followed log's, or any
/// answer of a client without a bound) as it streams.
pub type Answer<B> = Either<Full<Bytes>, B>;

/// Holds at most `permits` requests of the client it wraps in flight at once (each attempt,
/// until its answer is read: a watch's long body holds none). Without a bound it only hands
/// answers on as they stream.
#[derive(Clone)]
pub struct InFlightLayer(Option<Arc<Semaphore>>);

impl InFlightLayer {
    pub fn new(permits: Option<usize>) -> Self {
        Self(permits.map(|permits| Arc::new(Semaphore::new(permits.max(1)))))
    }
}

impl<S> tower::Layer<S> for InFlightLayer {
    type Service = InFlight<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlight {
            inner,
            permits: self.0.clone(),
            waiting: None,
            permit: None,
        }
    }
}

/// A place being waited for.
type Acquiring = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// Ready once it holds a place; the call takes the place into its response future. The
/// client's buffer in front of it is the queue of the requests waiting their turn.
pub struct InFlight<S> {
    inner: S,
    permits: Option<Arc<Semaphore>>,
    waiting: Option<Acquiring>,
    permit: Option<OwnedSemaphorePermit>,
}

impl<S, B, R> Service<http::Request<B>> for InFlight<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Error: Into<BoxError> + 'static,
    S::Future: Send + 'static,
    R: Body<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    type Response = http::Response<Answer<R>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(permits) = &self.permits {
            while self.permit.is_none() {
                let waiting = self.waiting.get_or_insert_with(|| {
                    let permits = Arc::clone(permits);
                    Box::pin(async move { permits.acquire_owned().await.ok() })
                });
                let permit = ready!(waiting.as_mut().poll(context));
                self.waiting = None;
                // The semaphore is never closed; a `None` here would only ask again.
                self.permit = permit;
            }
        }
        self.inner.poll_ready(context).map_err(Into::into)
    }

    /// The request runs in a task of its own on the runtime that calls this (the client's
    /// buffer worker), with its place: the caller only awaits the answer. A caller whose
    /// thread is blocked (a hung actor on a fleet's shared arbiter) would otherwise keep its
    /// places until it runs again, and enough of them would stall every node's Lease.
    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let streams = streams(request.uri());
        let response = self.inner.call(request);
        let Some(permit) = self.permit.take() else {
            return response
                .map_ok(|response| response.map(Either::Right))
                .map_err(Into::into)
                .boxed();
        };
        let running = tokio::spawn(async move {
            let response = response.await.map_err(Into::into)?;
            if streams {
                drop(permit);
                return Ok(response.map(Either::Right));
            }
            let (mut head, body) = response.into_parts();
            let whole = read_whole(body).await;
            drop(permit);
            head.headers = copied(&head.headers);
            Ok(http::Response::from_parts(
                head,
                Either::Left(Full::new(whole?)),
            ))
        });
        Box::pin(async move { running.await.map_err(BoxError::from)? })
    }
}

/// Whether the answer to a request to `uri` streams for as long as it is read: a watch, or a
/// followed log.
fn streams(uri: &http::Uri) -> bool {
    query_flag(uri, "watch") || query_flag(uri, "follow")
}

/// The headers, each value copied: hyper's are slices of the read buffer too, and kept it
/// as long as the answer waited for its caller.
fn copied(headers: &http::HeaderMap) -> http::HeaderMap {
    headers
        .iter()
        .map(|(name, value)| {
            let mut copy =
                http::HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
            copy.set_sensitive(value.is_sensitive());
            (name.clone(), copy)
        })
        .collect()
}

/// The body in one allocation of its length, holding nothing of the connection's buffer.
async fn read_whole<R>(body: R) -> Result<Bytes, BoxError>
where
    R: Body<Data = Bytes>,
    R::Error: Into<BoxError>,
{
    let read = body.collect().await.map_err(Into::into)?.to_bytes();
    // One chunk (every answer that came in one read) is a slice of the read buffer: copied
    // out. Several were joined into a copy of their length, copied once more here.
    Ok(Bytes::from(read.to_vec()))
}

#[cfg(test)]
mod tests {
    use std::{
        convert::Infallible,
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use http_body_util::{StreamBody, combinators::UnsyncBoxBody};
    use hyper::body::Frame;
    use tower::ServiceExt;

    use super::*;

    type TestBody = UnsyncBoxBody<Bytes, Infallible>;

    fn whole(data: Bytes) -> TestBody {
        Full::new(data).boxed_unsync()
    }

    /// A body that ends when `end` fires (or its sender is dropped).
    fn ends_on(end: futures::channel::oneshot::Receiver<()>) -> TestBody {
        let last = end.map(|_| Ok(Frame::data(Bytes::from_static(b"end"))));
        StreamBody::new(futures::stream::once(last)).boxed_unsync()
    }

    fn get(uri: &str) -> http::Request<()> {
        http::Request::get(uri).body(()).expect("a request")
    }

    async fn text(response: http::Response<Answer<TestBody>>) -> String {
        let read = response.into_body().collect().await.expect("a body");
        String::from_utf8(read.to_bytes().to_vec()).expect("text")
    }

    /// Counts the calls made and in flight at once, each answering after a while with its
    /// path, or with the body `bodies` hands out when it has one left.
    #[derive(Clone, Default)]
    struct Slow {
        calls: Arc<AtomicUsize>,
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        bodies: Arc<std::sync::Mutex<Vec<TestBody>>>,
        /// An `Audit-Id` header to answer with, as hyper parses one: a slice of its buffer.
        audit_id: Arc<std::sync::Mutex<Option<Bytes>>>,
    }

    impl Service<http::Request<()>> for Slow {
        type Response = http::Response<TestBody>;
        type Error = BoxError;
        type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<()>) -> Self::Future {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let (now, most) = (Arc::clone(&self.now), Arc::clone(&self.most));
            let body = self.bodies.lock().expect("bodies").pop();
            let path = request.uri().path().to_owned();
            let audit_id = self.audit_id.lock().expect("audit id").clone();
            Box::pin(async move {
                let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(in_flight, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                let mut answer =
                    http::Response::new(body.unwrap_or_else(|| whole(Bytes::from(path))));
                if let Some(id) = audit_id {
                    let id = http::HeaderValue::from_maybe_shared(id).expect("a header value");
                    answer.headers_mut().insert("audit-id", id);
                }
                Ok(answer)
            })
        }
    }

    type Answered = BoxFuture<'static, Result<http::Response<Answer<TestBody>>, BoxError>>;

    /// As the client stacks it: behind a buffer, whose worker readies it for each request.
    fn bounded(permits: usize, slow: &Slow) -> tower::buffer::Buffer<http::Request<()>, Answered> {
        tower::buffer::Buffer::new(
            tower::Layer::layer(&InFlightLayer::new(Some(permits)), slow.clone()),
            64,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_the_bound_is_in_flight_and_every_request_is_answered() {
        let slow = Slow::default();
        let service = bounded(3, &slow);
        let answers = futures::future::join_all(
            (0..20).map(|n| service.clone().oneshot(get(&format!("/{n}")))),
        )
        .await;
        let mut texts = Vec::new();
        for answer in answers {
            texts.push(text(answer.expect("an answer")).await);
        }
        assert_eq!(texts, (0..20).map(|n| format!("/{n}")).collect::<Vec<_>>());
        assert_eq!(slow.most.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_never_polls_its_answer_does_not_keep_its_place() {
        let slow = Slow::default();
        let service = bounded(1, &slow);
        // As a blocked thread's request: called, its answer never awaited.
        let mut stuck = service.clone();
        stuck.ready().await.unwrap();
        let _never_polled = stuck.call(get("/stuck"));
        let answer =
            tokio::time::timeout(Duration::from_secs(5), service.clone().oneshot(get("/2")))
                .await
                .expect("the one place comes back once the first request is answered");
        assert_eq!(text(answer.unwrap()).await, "/2");
    }

    #[tokio::test(start_paused = true)]
    async fn the_place_is_held_until_the_body_is_read_and_a_watch_gives_it_back_at_its_head() {
        let slow = Slow::default();
        let service = bounded(1, &slow);
        let (end_first, first_ends) = futures::channel::oneshot::channel();
        slow.bodies.lock().unwrap().push(ends_on(first_ends));
        let first = tokio::spawn(service.clone().oneshot(get("/slow-body")));
        let second = tokio::spawn(service.clone().oneshot(get("/next")));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            slow.calls.load(Ordering::SeqCst),
            1,
            "the second request waits while the first answer's body is still coming"
        );
        end_first.send(()).unwrap();
        assert_eq!(text(first.await.unwrap().unwrap()).await, "end");
        assert_eq!(text(second.await.unwrap().unwrap()).await, "/next");

        // A watch's body never ends: its place comes back with its head.
        let (_never, watch_never_ends) = futures::channel::oneshot::channel();
        slow.bodies.lock().unwrap().push(ends_on(watch_never_ends));
        let watch = service
            .clone()
            .oneshot(get(
                "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true",
            ))
            .await
            .expect("the watch's head");
        let after = tokio::time::timeout(
            Duration::from_secs(5),
            service.clone().oneshot(get("/after")),
        )
        .await
        .expect("a request beside the open watch");
        assert_eq!(text(after.unwrap()).await, "/after");
        drop(watch);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_copied_out_of_the_connections_read_buffer_headers_and_body() {
        let slow = Slow::default();
        let read_buffer = Bytes::from(vec![b'x'; 8192]);
        slow.bodies
            .lock()
            .unwrap()
            .push(whole(read_buffer.slice(..100)));
        *slow.audit_id.lock().unwrap() = Some(read_buffer.slice(100..136));
        let answer = bounded(1, &slow).oneshot(get("/pod")).await.unwrap();
        let buffer = read_buffer.as_ptr_range();
        let audit_id = answer.headers().get("audit-id").expect("the header, kept");
        assert_eq!(audit_id.as_bytes(), &read_buffer[100..136]);
        assert!(
            !buffer.contains(&audit_id.as_bytes().as_ptr()),
            "the headers hold no part of the buffer they were read into"
        );
        let read = answer.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(read.len(), 100);
        assert!(
            !buffer.contains(&read.as_ptr()),
            "the body holds no part of the buffer it was read into"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_bound_answers_stream_as_they_come() {
        let slow = Slow::default();
        let (end, ends) = futures::channel::oneshot::channel();
        slow.bodies.lock().unwrap().push(ends_on(ends));
        let unbounded = tower::Layer::layer(&InFlightLayer::new(None), slow.clone());
        let answer = unbounded
            .oneshot(get("/pod"))
            .await
            .expect("the head, before the body ends");
        assert!(matches!(answer.body(), Either::Right(_)));
        end.send(()).unwrap();
        assert_eq!(text(answer).await, "end");
    }

    #[test]
    fn watches_and_followed_logs_are_the_answers_that_stream() {
        let streams_at = |uri: &str| streams(&uri.parse().expect("a uri"));
        assert!(streams_at(
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=true"
        ));
        assert!(streams_at("/api/v1/pods?watch=1&resourceVersion=7"));
        assert!(streams_at("/api/v1/namespaces/d/pods/p/log?follow=true"));
        assert!(!streams_at("/api/v1/pods?watch=false"));
        assert!(!streams_at("/api/v1/namespaces/d/pods/p?resourceVersion=0"));
        assert!(!streams_at("/api/v1/nodes/n1"));
    }
}
