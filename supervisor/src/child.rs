//! A supervised child: how to build it (its spec) and what everyone may read about it (its
//! status). The spec's factory is called for every new instance; the inbox outlives them all.

use std::{
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU8, AtomicU64, Ordering::Relaxed},
    },
    time::SystemTime,
};

use actix::{Actor, Context, dev::ArbiterHandle};
use futures::channel::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

use crate::{
    SupervisedActor,
    control::{self, Control},
    guard::{ChildExit, ExitGuard},
    inbox::Inbox,
    liveness::{BusyMarks, Liveness, Watched},
    stats::MailboxStats,
};

/// When a child that ended is started again, as in OTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    /// Always restarted.
    #[default]
    Permanent,
    /// Restarted only when it failed (panicked, hung or was killed), not when it stopped itself.
    Transient,
    /// Never restarted.
    Temporary,
}

/// Everything needed to start (and restart) one child actor.
pub struct ChildSpec<A: Actor> {
    pub(crate) name: String,
    pub(crate) restart: RestartPolicy,
    pub(crate) inbox: Inbox<A>,
    pub(crate) factory: Arc<dyn Fn() -> A + Send + Sync>,
}

impl<A: SupervisedActor> ChildSpec<A> {
    /// A permanent child named `name`, fed from `inbox`, built by `factory` at every start.
    /// State that must survive a restart belongs in something the factory captures, not in
    /// the actor itself.
    pub fn new(
        name: impl Into<String>,
        inbox: Inbox<A>,
        factory: impl Fn() -> A + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            restart: RestartPolicy::Permanent,
            inbox,
            factory: Arc::new(factory),
        }
    }

    #[must_use]
    pub fn restart(mut self, policy: RestartPolicy) -> Self {
        self.restart = policy;
        self
    }
}

/// The lifecycle state of a child, as the debug endpoint shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum ChildState {
    Starting = 0,
    Running = 1,
    Backoff = 2,
    Stopped = 3,
    Escalated = 4,
}

impl ChildState {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::Starting,
            1 => Self::Running,
            2 => Self::Backoff,
            3 => Self::Stopped,
            _ => Self::Escalated,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Backoff => "backoff",
            Self::Stopped => "stopped",
            Self::Escalated => "escalated",
        }
    }
}

/// Why an instance ended, with when, and how long the supervisor waited before restarting it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub at: String,
    pub reason: String,
    /// The backoff chosen after this failure; absent when the child was not restarted.
    pub restart_delay_seconds: Option<f64>,
}

/// The rarely written part of a child's status: touched on starts and failures only.
#[derive(Debug, Default)]
pub(crate) struct StatusDetail {
    pub last_failure: Option<Failure>,
    pub backoff_until: Option<SystemTime>,
    /// Since when no instance has been running; `None` while one is.
    pub down_since: Option<Instant>,
    /// The busy mark of the latest instance started.
    pub liveness: Option<Arc<Liveness>>,
}

/// What the supervisor and the debug endpoint share about one child.
pub(crate) struct ChildStatus {
    pub name: String,
    state: AtomicU8,
    pub restarts: AtomicU64,
    detail: Mutex<StatusDetail>,
    pub stats: Arc<MailboxStats>,
    depth: Box<dyn Fn() -> usize + Send + Sync>,
}

impl ChildStatus {
    pub fn state(&self) -> ChildState {
        ChildState::from_u8(self.state.load(Relaxed))
    }

    pub fn set_state(&self, state: ChildState) {
        self.state.store(state as u8, Relaxed);
    }

    pub fn depth(&self) -> usize {
        (self.depth)()
    }

    pub fn detail(&self) -> MutexGuard<'_, StatusDetail> {
        // The detail holds plain data; a panic while it was held cannot leave it half-written
        // in a way that matters more than losing the debug view.
        self.detail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the supervisor needs from a child without knowing its actor type.
pub(crate) trait ChildRuntime: Send {
    fn status(&self) -> &Arc<ChildStatus>;
    fn restart_policy(&self) -> RestartPolicy;
    /// Starts instance `generation` on `arbiter`; it reports its end through `exits`.
    fn start(&self, start: InstanceStart);
    /// Keeps every instance, present or late, from receiving.
    fn fence_off(&self);
    /// Refuses further sends for good.
    fn close_mailbox(&self);
}

pub(crate) struct InstanceStart {
    pub child: usize,
    pub generation: u64,
    pub arbiter_id: u64,
    pub arbiter: ArbiterHandle,
    pub control: mpsc::UnboundedReceiver<Control>,
    pub exits: mpsc::UnboundedSender<ChildExit>,
    pub node: String,
    /// The instance's and its thread's busy marks, read by the supervisor's hang check.
    pub marks: BusyMarks,
}

pub(crate) struct TypedChild<A: Actor> {
    spec: ChildSpec<A>,
    status: Arc<ChildStatus>,
}

impl<A: SupervisedActor> TypedChild<A> {
    pub(crate) fn new(spec: ChildSpec<A>) -> Self {
        let depth_inbox = spec.inbox.clone();
        let status = Arc::new(ChildStatus {
            name: spec.name.clone(),
            state: AtomicU8::new(ChildState::Starting as u8),
            restarts: AtomicU64::new(0),
            detail: Mutex::new(StatusDetail::default()),
            stats: Arc::clone(spec.inbox.stats()),
            depth: Box::new(move || depth_inbox.depth()),
        });
        Self { spec, status }
    }
}

impl<A: SupervisedActor> ChildRuntime for TypedChild<A> {
    fn status(&self) -> &Arc<ChildStatus> {
        &self.status
    }

    fn restart_policy(&self) -> RestartPolicy {
        self.spec.restart
    }

    fn start(&self, start: InstanceStart) {
        let inbox = self.spec.inbox.clone();
        let factory = Arc::clone(&self.spec.factory);
        let status = Arc::clone(&self.status);
        let name = self.spec.name.clone();
        inbox.fence.admit(start.generation);
        let arbiter = start.arbiter.clone();
        // actix's own start_in_arbiter, but with the whole context future inside the actor's
        // span: handlers, spawned futures and timers all log with `node` and `actor`.
        arbiter.spawn_fn(move || {
            let span = tracing::info_span!("actor", node = %start.node, actor = %name, generation = start.generation);
            let mut ctx = Context::new();
            // Armed before the factory runs, so a panicking factory is reported like any panic.
            let guard = ExitGuard {
                child: start.child,
                generation: start.generation,
                arbiter: start.arbiter_id,
                exits: start.exits,
            };
            // A factory that blocks is a hang like any other; one that panics is a panic.
            let actor = start.marks.run(|| span.in_scope(|| factory()));
            control::attach(&mut ctx, start.control, guard, inbox.fence.clone(), start.generation);
            inbox.attach(&mut ctx, start.generation);
            if inbox.fence.admits(start.generation) {
                status.set_state(ChildState::Running);
                status.detail().down_since = None;
            }
            // Every handler, timer and control request runs inside one poll of this task.
            let task = Watched {
                inner: Box::pin(ctx.into_future(actor)),
                marks: start.marks,
            };
            actix_rt::spawn(task.instrument(span));
        });
    }

    fn fence_off(&self) {
        self.spec.inbox.fence.close();
    }

    fn close_mailbox(&self) {
        self.spec.inbox.close();
    }
}
