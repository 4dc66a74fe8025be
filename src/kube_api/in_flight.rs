//! A bound on a client's requests in flight, for a fleet in one process: over HTTP/1 each
//! request in flight holds a pooled connection and its buffers, so 10,000 nodes registering
//! and reporting at once opened thousands of connections (and kept the heap's peak, which the
//! allocator does not give back). Requests past the bound wait their turn in order.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{BoxError, Service};

/// Holds at most `permits` requests of the client it wraps in flight at once (each attempt,
/// until its response head arrives: a watch's long body holds none).
#[derive(Clone)]
pub struct InFlightLayer(Arc<Semaphore>);

impl InFlightLayer {
    pub fn new(permits: usize) -> Self {
        Self(Arc::new(Semaphore::new(permits.max(1))))
    }
}

impl<S> tower::Layer<S> for InFlightLayer {
    type Service = InFlight<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlight {
            inner,
            permits: Arc::clone(&self.0),
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
    permits: Arc<Semaphore>,
    waiting: Option<Acquiring>,
    permit: Option<OwnedSemaphorePermit>,
}

impl<S, Request> Service<Request> for InFlight<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while self.permit.is_none() {
            let permits = &self.permits;
            let waiting = self.waiting.get_or_insert_with(|| {
                let permits = Arc::clone(permits);
                Box::pin(async move { permits.acquire_owned().await.ok() })
            });
            let permit = ready!(waiting.as_mut().poll(context));
            self.waiting = None;
            // The semaphore is never closed; a `None` here would only ask again.
            self.permit = permit;
        }
        self.inner.poll_ready(context).map_err(Into::into)
    }

    /// The request runs in a task of its own on the runtime that calls this (the client's
    /// buffer worker), with its place: the caller only awaits the answer. A caller whose
    /// thread is blocked (a hung actor on a fleet's shared arbiter) would otherwise keep its
    /// places until it runs again, and enough of them would stall every node's Lease.
    fn call(&mut self, request: Request) -> Self::Future {
        let permit = self.permit.take();
        let response = self.inner.call(request);
        let running = tokio::spawn(async move {
            let response = response.await.map_err(Into::into);
            drop(permit);
            response
        });
        Box::pin(async move { running.await.map_err(BoxError::from)? })
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use tower::ServiceExt;

    use super::*;

    /// Counts the calls in flight at once, each answering after a while.
    #[derive(Clone, Default)]
    struct Slow {
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl Service<u32> for Slow {
        type Response = u32;
        type Error = BoxError;
        type Future = BoxFuture<'static, Result<u32, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: u32) -> Self::Future {
            let (now, most) = (Arc::clone(&self.now), Arc::clone(&self.most));
            Box::pin(async move {
                let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(in_flight, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(request)
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_the_bound_is_in_flight_and_every_request_is_answered() {
        let slow = Slow::default();
        // As the client stacks it: behind a buffer, whose worker readies it for each request.
        let service = tower::buffer::Buffer::new(
            tower::Layer::layer(&InFlightLayer::new(3), slow.clone()),
            64,
        );
        let answers = futures::future::join_all((0..20).map(|n| service.clone().oneshot(n))).await;
        let answers: Vec<u32> = answers.into_iter().map(Result::unwrap).collect();
        assert_eq!(answers, (0..20).collect::<Vec<_>>());
        assert_eq!(slow.most.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_never_polls_its_answer_does_not_keep_its_place() {
        let slow = Slow::default();
        let service = tower::buffer::Buffer::new(
            tower::Layer::layer(&InFlightLayer::new(1), slow.clone()),
            64,
        );
        // As a blocked thread's request: called, its answer never awaited.
        let mut stuck = service.clone();
        stuck.ready().await.unwrap();
        let _never_polled = stuck.call(1);
        let answer = tokio::time::timeout(Duration::from_secs(5), service.clone().oneshot(2))
            .await
            .expect("the one place comes back once the first request is answered");
        assert_eq!(answer.unwrap(), 2);
    }
}
