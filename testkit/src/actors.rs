//! Actors written for the tests. `Recorder` keeps what it receives in a store that outlives its
//! instances, the way a real actor keeps state that must survive a restart.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use actix::{Actor, ActorContext, Context, Handler, Message};
use nodepulse_supervisor::SupervisedActor;
use serde_json::json;

/// What every `Recorder` instance of one child shares.
#[derive(Clone, Default)]
pub struct RecorderStore {
    pub received: Arc<Mutex<Vec<u64>>>,
    pub instances: Arc<AtomicU64>,
}

impl RecorderStore {
    pub fn received(&self) -> Vec<u64> {
        self.received
            .lock()
            .map(|received| received.clone())
            .unwrap_or_default()
    }

    pub fn instances(&self) -> u64 {
        self.instances.load(Ordering::SeqCst)
    }

    /// The factory a `ChildSpec` calls at every (re)start.
    pub fn factory(&self) -> impl Fn() -> Recorder + Send + Sync + 'static {
        let store = self.clone();
        move || Recorder {
            instance: store.instances.fetch_add(1, Ordering::SeqCst) + 1,
            store: store.clone(),
        }
    }
}

pub struct Recorder {
    pub instance: u64,
    pub store: RecorderStore,
}

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl SupervisedActor for Recorder {
    fn debug_state(&self) -> serde_json::Value {
        json!({ "instance": self.instance, "recorded": self.store.received().len() })
    }
}

/// Appends its number to the store.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Record(pub u64);

impl Handler<Record> for Recorder {
    type Result = ();

    fn handle(&mut self, Record(value): Record, _: &mut Context<Self>) {
        if let Ok(mut received) = self.store.received.lock() {
            received.push(value);
        }
    }
}

/// Answers how many numbers were recorded so far.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Count;

impl Handler<Count> for Recorder {
    type Result = usize;

    fn handle(&mut self, _: Count, _: &mut Context<Self>) -> usize {
        self.store.received().len()
    }
}

/// Makes the handler panic, as a bug would.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Explode;

impl Handler<Explode> for Recorder {
    type Result = ();

    fn handle(&mut self, _: Explode, _: &mut Context<Self>) {
        panic!("boom: the test asked this handler to panic");
    }
}

/// Makes the actor stop itself, as a finished piece of work would.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopYourself;

impl Handler<StopYourself> for Recorder {
    type Result = ();

    fn handle(&mut self, _: StopYourself, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
