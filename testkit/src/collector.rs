//! A supervised stand-in for NodeStatusActor: it keeps every message of one type it receives,
//! with the time it arrived, in a store the test reads.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use actix::{Actor, Context, Handler, Message};
use nodepulse_supervisor::{
    ChildSpec, Recipient, Supervisor, SupervisorBuilder, SupervisorConfig, mailbox,
};

/// What a [`Collector`] received, shared with the test.
pub struct Received<M>(Arc<Mutex<Vec<(Instant, M)>>>);

impl<M> Clone for Received<M> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<M: Clone> Received<M> {
    pub fn all(&self) -> Vec<(Instant, M)> {
        self.0.lock().map(|all| all.clone()).unwrap_or_default()
    }

    pub fn last(&self) -> Option<M> {
        self.all().pop().map(|(_, message)| message)
    }

    /// The first message received at or after `since` that satisfies `condition`.
    pub fn first_since(
        &self,
        since: Instant,
        condition: impl Fn(&M) -> bool,
    ) -> Option<(Instant, M)> {
        self.all()
            .into_iter()
            .find(|(at, message)| *at >= since && condition(message))
    }
}

pub struct Collector<M: Unpin + 'static> {
    received: Received<M>,
}

impl<M: Unpin + 'static> Actor for Collector<M> {
    type Context = Context<Self>;
}

impl<M: Unpin + 'static> nodepulse_supervisor::SupervisedActor for Collector<M> {}

impl<M> Handler<M> for Collector<M>
where
    M: Message<Result = ()> + Unpin + Send + 'static,
{
    type Result = ();

    fn handle(&mut self, message: M, _: &mut Context<Self>) {
        if let Ok(mut all) = self.received.0.lock() {
            all.push((Instant::now(), message));
        }
    }
}

/// Adds a collector of `M` named `name` to `builder`; returns its recipient and store.
pub fn collector<M>(
    builder: SupervisorBuilder,
    name: &str,
) -> (SupervisorBuilder, Recipient<M>, Received<M>)
where
    M: Message<Result = ()> + Unpin + Send + 'static,
{
    let received = Received(Arc::new(Mutex::new(Vec::new())));
    let (address, inbox) = mailbox::<Collector<M>>(1024);
    let store = received.clone();
    let builder = builder.child(ChildSpec::new(name, inbox, move || Collector {
        received: store.clone(),
    }));
    (builder, address.recipient::<M>(), received)
}

/// A supervisor configured for tests: quick restarts, a short liveness timeout.
pub fn test_supervisor(node: &str) -> SupervisorBuilder {
    let mut config = SupervisorConfig::new(node);
    config.backoff.initial = Duration::from_millis(50);
    config.liveness_timeout = Duration::from_secs(2);
    config.liveness_interval = Duration::from_millis(100);
    Supervisor::builder(config)
}
