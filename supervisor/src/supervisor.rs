//! The supervisor of one node's actors. It starts each child from its spec, learns of every
//! instance's end from the exit guards, finds hung instances by a periodic look at their busy
//! marks (nothing is sent to them), and restarts with backoff until a child exceeds its restart
//! intensity; then it escalates: every child is stopped and the escalation is published for
//! the daemon to exit on.

use std::{
    sync::{Arc, atomic::Ordering::Relaxed, mpsc as blocking},
    time::{Duration, SystemTime},
};

use actix::{Actor, AsyncContext, Context, SpawnHandle, StreamHandler};
use futures::channel::mpsc;
use tokio::{
    sync::{oneshot, watch},
    time::Instant,
};

#[cfg(test)]
mod blocked_thread_tests;
#[cfg(test)]
mod liveness_tests;
#[cfg(test)]
mod paused_tests;
mod requests;

pub use requests::KillAccepted;
pub(crate) use requests::{DebugState, Kill, Shutdown};

use crate::{
    arbiters::{ArbiterPool, Arbiters, SharedArbiters},
    backoff::{BackoffPolicy, RestartBackoff},
    child::{ChildRuntime, ChildState, ChildStatus, Failure, InstanceStart, RestartPolicy},
    control::{Control, KillMode},
    guard::{ChildExit, InstanceEnd},
    hang_check::{HangWatch, HungInstance},
    intensity::{IntensityPolicy, RestartIntensity},
    liveness::BusyMarks,
    snapshot::format_time,
};

/// How a supervisor watches and restarts its children. Mirrors `supervision` in the config.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// The node these actors work for; shown in logs and the debug endpoint.
    pub node: String,
    pub backoff: BackoffPolicy,
    pub intensity: IntensityPolicy,
    /// An instance busy in one poll (a handler, a timer, its factory) this long is declared hung.
    pub liveness_timeout: Duration,
    /// How often the supervisor looks at its instances' busy marks: a hang is declared within
    /// `liveness_timeout` plus this. A look reads one atomic per instance and wakes no actor.
    /// Supervisors on one shared pool are looked at together, every period of the first one
    /// placed on it.
    pub liveness_interval: Duration,
    /// Threads the children run on; `None` gives each child its own.
    pub arbiters: Option<usize>,
    /// A pool shared with other supervisors (a fleet of nodes in one process); when set,
    /// `arbiters` is ignored and this supervisor never stops the pool's threads.
    pub shared_arbiters: Option<SharedArbiters>,
    /// Run every child on the supervisor's own arbiter, for tests on paused tokio time (a
    /// paused clock is per runtime: a child on another thread would not see it). A hang then
    /// blocks the supervisor too, so only stops and panics can be supervised this way.
    pub same_thread: bool,
}

impl SupervisorConfig {
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            backoff: BackoffPolicy::default(),
            intensity: IntensityPolicy::default(),
            liveness_timeout: Duration::from_secs(1),
            liveness_interval: Duration::from_millis(500),
            arbiters: None,
            shared_arbiters: None,
            same_thread: false,
        }
    }
}

/// Why the supervisor gave up: the child that exceeded its restart intensity and its last failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    pub node: String,
    pub child: String,
    pub restarts: u64,
    pub last_failure: String,
    pub max_restarts: u32,
    pub window: Duration,
}

impl std::fmt::Display for Escalation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "actor {:?} on node {:?} exceeded its restart intensity ({} restarts within {:?}) after {} restarts; last failure: {}",
            self.child, self.node, self.max_restarts, self.window, self.restarts, self.last_failure
        )
    }
}

/// The instance of a child that is (or is about to be) running.
struct Instance {
    generation: u64,
    arbiter: u64,
    started: Instant,
    control: mpsc::UnboundedSender<Control>,
    kill_requested: Option<KillMode>,
    /// Lets go of a thread blocked by an injected hang once the instance is fenced off.
    hang_release: Option<blocking::Sender<()>>,
}

struct Slot {
    runtime: Box<dyn ChildRuntime>,
    backoff: RestartBackoff,
    intensity: RestartIntensity,
    generation: u64,
    instance: Option<Instance>,
    pending_restart: Option<SpawnHandle>,
}

/// The supervisor actor. Build it with [`Supervisor::builder`].
pub struct Supervisor {
    config: SupervisorConfig,
    slots: Vec<Slot>,
    pool: Arbiters,
    /// The running instances, as the hang check (this supervisor's, or its shared pool's)
    /// looks at them.
    hang_watch: Arc<HangWatch>,
    exits: mpsc::UnboundedSender<ChildExit>,
    exit_stream: Option<mpsc::UnboundedReceiver<ChildExit>>,
    escalation: watch::Sender<Option<Escalation>>,
    shutdown_waiters: Vec<oneshot::Sender<()>>,
    shutting_down: bool,
}

/// Collects children, then starts the supervisor.
pub struct SupervisorBuilder {
    config: SupervisorConfig,
    children: Vec<Box<dyn ChildRuntime>>,
    drains: Vec<crate::Drain>,
}

impl Supervisor {
    pub fn builder(config: SupervisorConfig) -> SupervisorBuilder {
        SupervisorBuilder {
            config,
            children: Vec::new(),
            drains: Vec::new(),
        }
    }
}

impl SupervisorBuilder {
    /// Adds a child; children start in the order they are added.
    #[must_use]
    pub fn child<A: crate::SupervisedActor>(mut self, spec: crate::ChildSpec<A>) -> Self {
        self.children
            .push(Box::new(crate::child::TypedChild::new(spec)));
        self
    }

    /// Adds work to finish at shutdown before the children stop (see [`crate::Drain`]).
    #[must_use]
    pub fn drain_on_shutdown(mut self, drain: crate::Drain) -> Self {
        self.drains.push(drain);
        self
    }

    /// Starts the supervisor and its children. Must be called inside a running actix `System`.
    pub fn start(self) -> crate::SupervisorHandle {
        crate::panic_capture::install();
        let statuses: Vec<Arc<ChildStatus>> = self
            .children
            .iter()
            .map(|child| Arc::clone(child.status()))
            .collect();
        let (exits, exit_stream) = mpsc::unbounded();
        let (escalation, escalation_watch) = watch::channel(None);
        let pool = match &self.config.shared_arbiters {
            _ if self.config.same_thread => Arbiters::Current,
            Some(shared) => Arbiters::Shared(shared.clone()),
            None => Arbiters::Private(ArbiterPool::new(
                self.config.arbiters.unwrap_or(self.children.len()),
            )),
        };
        let intensity = self.config.intensity;
        let slots = self
            .children
            .into_iter()
            .map(|runtime| Slot {
                runtime,
                backoff: RestartBackoff::default(),
                intensity: RestartIntensity::new(intensity),
                generation: 0,
                instance: None,
                pending_restart: None,
            })
            .collect();
        let node = self.config.node.clone();
        let restart_limit = self.config.backoff.max + self.config.liveness_timeout;
        let supervisor = Supervisor {
            hang_watch: Arc::new(HangWatch::new(self.config.liveness_timeout)),
            config: self.config,
            slots,
            pool,
            exits,
            exit_stream: Some(exit_stream),
            escalation,
            shutdown_waiters: Vec::new(),
            shutting_down: false,
        };
        crate::SupervisorHandle::new(
            supervisor.start(),
            node,
            statuses,
            escalation_watch,
            restart_limit,
            self.drains,
        )
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Some(exits) = self.exit_stream.take() {
            ctx.add_stream(exits);
        }
        for index in 0..self.slots.len() {
            self.start_child(index);
        }
        let period = self.config.liveness_interval;
        if let Arbiters::Shared(shared) = &self.pool {
            let tell = ctx.address().recipient();
            shared.check().register(&self.hang_watch, tell, period);
        } else {
            ctx.run_interval(period, |supervisor, ctx| {
                for hung in supervisor.hang_watch.check(Instant::now()) {
                    supervisor.declare_hung(hung, ctx);
                }
            });
        }
    }
}

impl Supervisor {
    fn start_child(&mut self, index: usize) {
        let node = self.config.node.clone();
        let (arbiter_id, arbiter) = self.pool.place();
        let slot = &mut self.slots[index];
        slot.pending_restart = None;
        slot.generation += 1;
        // futures' channel allocates per message and frees on receipt; tokio's holds 32-slot
        // blocks: ~1.6 KiB an instance, a tenth of a fleet node's memory.
        let (control, control_receiver) = mpsc::unbounded();
        let marks = BusyMarks {
            instance: Arc::default(),
            thread: self.pool.thread_mark(arbiter_id),
        };
        self.hang_watch.watch(index, slot.generation, marks.clone());
        slot.instance = Some(Instance {
            generation: slot.generation,
            arbiter: arbiter_id,
            started: Instant::now(),
            control,
            kill_requested: None,
            hang_release: None,
        });
        let status = slot.runtime.status();
        status.set_state(ChildState::Starting);
        {
            let mut detail = status.detail();
            detail.backoff_until = None;
            detail.liveness = Some(Arc::clone(&marks.instance));
        }
        tracing::info!(node = %node, actor = %status.name, generation = slot.generation, "starting actor");
        slot.runtime.start(InstanceStart {
            child: index,
            generation: slot.generation,
            arbiter_id,
            arbiter,
            control: control_receiver,
            exits: self.exits.clone(),
            node,
            marks,
        });
    }

    /// Gives up on an instance the hang check found busy in one poll (or idle on a blocked
    /// thread) for `liveness_timeout`; a poll that long means its thread is blocked (a handler
    /// that awaits is not busy: it returned `Pending`). A report about an instance that has
    /// already ended or been replaced changes nothing.
    fn declare_hung(&mut self, hung: HungInstance, ctx: &mut Context<Self>) {
        let index = hung.child;
        let current = self.slots.get(index).is_some_and(|slot| {
            slot.instance
                .as_ref()
                .is_some_and(|instance| instance.generation == hung.generation)
        });
        if !current {
            return;
        }
        let Some(instance) = self.slots[index].instance.take() else {
            return;
        };
        self.pool.retire(instance.arbiter);
        self.slots[index].runtime.fence_off();
        // Dropping the release (and the control line) lets an injected hang return and the
        // fenced instance stop; a truly stuck thread stays on its retired arbiter.
        drop(instance.hang_release);
        let end = InstanceEnd::Hung(hung.reason);
        self.after_instance_ended(index, instance.started, &end, ctx);
    }

    /// Decides what follows the end of a child's current instance.
    fn after_instance_ended(
        &mut self,
        index: usize,
        started: Instant,
        end: &InstanceEnd,
        ctx: &mut Context<Self>,
    ) {
        let (reason, failed) = (end.to_string(), end.is_failure());
        let node = self.config.node.clone();
        let slot = &mut self.slots[index];
        let status = Arc::clone(slot.runtime.status());
        {
            let mut detail = status.detail();
            detail.last_failure = Some(Failure {
                at: format_time(SystemTime::now()),
                reason: reason.clone(),
                restart_delay_seconds: None,
            });
            detail.down_since = Some(Instant::now());
        }
        if self.shutting_down || status.state() == ChildState::Escalated {
            status.set_state(ChildState::Stopped);
            self.answer_shutdown_if_done();
            return;
        }
        let restart = match slot.runtime.restart_policy() {
            RestartPolicy::Permanent => true,
            RestartPolicy::Transient => failed,
            RestartPolicy::Temporary => false,
        };
        if !restart {
            tracing::info!(node = %node, actor = %status.name, %reason, "actor ended and is not restarted");
            status.set_state(ChildState::Stopped);
            slot.runtime.close_mailbox();
            return;
        }
        if !slot.intensity.admit_restart() {
            let escalation = Escalation {
                node,
                child: status.name.clone(),
                restarts: status.restarts.load(Relaxed),
                last_failure: reason,
                max_restarts: self.config.intensity.max_restarts.get(),
                window: self.config.intensity.window,
            };
            self.escalate(&escalation, index);
            return;
        }
        let delay = slot.backoff.next_delay(
            &self.config.backoff,
            started.elapsed(),
            rand::random::<f64>(),
        );
        status.restarts.fetch_add(1, Relaxed);
        status.set_state(ChildState::Backoff);
        {
            let mut detail = status.detail();
            detail.backoff_until = Some(SystemTime::now() + delay);
            if let Some(failure) = detail.last_failure.as_mut() {
                failure.restart_delay_seconds = Some(delay.as_secs_f64());
            }
        }
        tracing::warn!(node = %node, actor = %status.name, %reason, delay = ?delay, "actor ended; restarting after backoff");
        let generation = slot.generation;
        slot.pending_restart = Some(ctx.run_later(delay, move |supervisor, _| {
            let still_waiting = supervisor.slots[index].generation == generation
                && supervisor.slots[index].instance.is_none()
                && !supervisor.shutting_down;
            if still_waiting {
                supervisor.start_child(index);
            }
        }));
    }

    fn escalate(&mut self, escalation: &Escalation, culprit: usize) {
        tracing::error!(node = %escalation.node, actor = %escalation.child, "{escalation}; stopping every actor of the node");
        for (index, slot) in self.slots.iter_mut().enumerate() {
            let status = slot.runtime.status();
            status.set_state(if index == culprit {
                ChildState::Escalated
            } else {
                ChildState::Stopped
            });
            slot.runtime.fence_off();
            slot.runtime.close_mailbox();
            // Dropping the instance drops its control line, which stops it.
            slot.instance = None;
            self.hang_watch.unwatch(index);
        }
        let _ = self.escalation.send(Some(escalation.clone()));
    }

    fn answer_shutdown_if_done(&mut self) {
        if self.slots.iter().all(|slot| slot.instance.is_none()) {
            for waiter in self.shutdown_waiters.drain(..) {
                let _ = waiter.send(());
            }
            self.pool.stop_owned();
        }
    }
}

/// From the shared pool's hang check.
impl actix::Handler<HungInstance> for Supervisor {
    type Result = ();

    fn handle(&mut self, hung: HungInstance, ctx: &mut Context<Self>) {
        self.declare_hung(hung, ctx);
    }
}

impl StreamHandler<ChildExit> for Supervisor {
    fn handle(&mut self, exit: ChildExit, ctx: &mut Context<Self>) {
        self.pool.release(exit.arbiter);
        let slot = &mut self.slots[exit.child];
        let current = slot
            .instance
            .as_ref()
            .is_some_and(|instance| instance.generation == exit.generation);
        if !current {
            return; // An instance already given up on (hung, or replaced): nothing to decide.
        }
        let Some(instance) = slot.instance.take() else {
            return;
        };
        self.hang_watch.unwatch(exit.child);
        slot.runtime.fence_off();
        let end = InstanceEnd::of(exit.cause, instance.kill_requested);
        self.after_instance_ended(exit.child, instance.started, &end, ctx);
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}
