//! PodLifecycleActor: watches the pods bound to this node (`spec.nodeName=<node>`), drives the
//! lifecycle provider with what the watch says, with evictions and with one timer set to the
//! provider's next due time (none while nothing is due: a node without pods is never woken),
//! and delivers the provider's updates to StatusManagerActor in order. Undelivered updates wait
//! in the shared state, not in the instance: a full mailbox delays them, a restart keeps them.

use std::{sync::Arc, time::Duration};

use actix::{Actor, AsyncContext, Context, Handler, Message, SpawnHandle, StreamHandler};

use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::{Mailbox, SendError, SupervisedActor};
use serde_json::json;

use super::provider::{Outgoing, PodLifecycleState, PodUpdate, ProviderFault};
use crate::{
    clock::{self, WallClock},
    messages::{PodGone, PodObserved, SetContainerReadiness, SetPodStatus, StopPod, TerminatePod},
    ports::{PodApi, PodEvent, PodSource, PodWatchEvent},
    prober::ProberFeedback,
    runtime_probe::UpdatePodCidr,
    status_manager::StatusManagerActor,
    volume_manager::PodVolumesChanged,
};

/// How soon a delivery blocked by a full mailbox is tried again.
const RETRY_FULL: Duration = Duration::from_millis(20);

#[derive(Debug, Clone)]
pub struct PodLifecycleSettings {
    pub node_name: String,
}

pub struct PodLifecycleActor {
    settings: PodLifecycleSettings,
    api: Arc<dyn PodApi>,
    /// The node's pod source; `None`: a watch of the API of its own.
    source: Option<Arc<dyn PodSource>>,
    state: Arc<PodLifecycleState>,
    status_manager: Mailbox<StatusManagerActor>,
    watch_events: u64,
    delivered: u64,
    retry_scheduled: bool,
    /// The timer set to the provider's next due time, if anything is due.
    wakeup: Option<SpawnHandle>,
    /// Times the provider was ticked, for the debug view.
    ticks: u64,
    /// Wall time for API timestamps and the debug view.
    wall_clock: WallClock,
}

/// Whether the message went, and if not, the item back and whether the mailbox is closed.
type Delivery = Result<(), (Outgoing, bool)>;

fn returned<M>(error: SendError<M>, back: impl FnOnce(M) -> Outgoing) -> (Outgoing, bool) {
    match error {
        SendError::Full(message) => (back(message), false),
        SendError::Closed(message) => (back(message), true),
    }
}

impl PodLifecycleActor {
    /// Reads wall time from `clock` (tests: one that follows tokio's paused clock).
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }
}

impl PodLifecycleActor {
    pub fn new(
        settings: PodLifecycleSettings,
        api: Arc<dyn PodApi>,
        state: Arc<PodLifecycleState>,
        status_manager: Mailbox<StatusManagerActor>,
    ) -> Self {
        Self {
            wall_clock: clock::system(),
            settings,
            api,
            source: None,
            state,
            status_manager,
            watch_events: 0,
            delivered: 0,
            retry_scheduled: false,
            wakeup: None,
            ticks: 0,
        }
    }

    /// Follows the node's pod source instead of a watch of its own.
    #[must_use]
    pub fn with_pod_source(mut self, source: Arc<dyn PodSource>) -> Self {
        self.source = Some(source);
        self
    }

    fn deliver(&self, item: Outgoing) -> Delivery {
        let mailbox = &self.status_manager;
        match item {
            Outgoing::Observed(pod) => mailbox
                .try_send(PodObserved { pod })
                .map_err(|e| returned(e, |m| Outgoing::Observed(m.pod))),
            Outgoing::Gone(uid) => mailbox
                .try_send(PodGone { uid })
                .map_err(|e| returned(e, |m| Outgoing::Gone(m.uid))),
            Outgoing::Update(PodUpdate::Status { pod, status }) => mailbox
                .try_send(SetPodStatus {
                    pod,
                    status: *status,
                })
                .map_err(|e| {
                    returned(e, |m| {
                        Outgoing::Update(PodUpdate::Status {
                            pod: m.pod,
                            status: Box::new(m.status),
                        })
                    })
                }),
            Outgoing::Update(PodUpdate::Readiness {
                pod_uid,
                container_id,
                ready,
            }) => mailbox
                .try_send(SetContainerReadiness {
                    pod_uid,
                    container_id,
                    ready,
                })
                .map_err(|e| {
                    returned(e, |m| {
                        Outgoing::Update(PodUpdate::Readiness {
                            pod_uid: m.pod_uid,
                            container_id: m.container_id,
                            ready: m.ready,
                        })
                    })
                }),
            Outgoing::Update(PodUpdate::Event { pod, event }) => {
                self.record_event(&pod, event);
                Ok(())
            }
            Outgoing::Update(PodUpdate::Terminated { pod }) => {
                mailbox.try_send(TerminatePod { pod }).map_err(|e| {
                    returned(e, |m| {
                        Outgoing::Update(PodUpdate::Terminated { pod: m.pod })
                    })
                })
            }
        }
    }

    /// Records a provider's Event (under the API's event rate limit; a failure loses only it).
    fn record_event(&self, pod: &Pod, event: PodEvent) {
        let reason = event.reason.clone();
        let request = self.api.record_pod_event(pod, event);
        actix::spawn(async move {
            if let Err(error) = request.await {
                tracing::debug!(%error, %reason, "cannot record a pod event");
            }
        });
    }

    /// Delivers what is queued, in order, until the mailbox is full (then tries again soon).
    fn drain(&mut self, ctx: &mut Context<Self>) {
        loop {
            let Some(item) = self.state.outbox().pop_front() else {
                return;
            };
            match self.deliver(item) {
                Ok(()) => self.delivered += 1,
                Err((item, closed)) => {
                    self.state.outbox().push_front(item);
                    if closed {
                        tracing::warn!("StatusManager's mailbox is closed; pod updates wait");
                    } else if !self.retry_scheduled {
                        self.retry_scheduled = true;
                        ctx.run_later(RETRY_FULL, |actor, ctx| {
                            actor.retry_scheduled = false;
                            actor.drain(ctx);
                        });
                    }
                    return;
                }
            }
        }
    }

    fn queue_updates(&self, updates: Vec<PodUpdate>) {
        self.state.queue(updates.into_iter().map(Outgoing::Update));
    }

    /// What follows every event and tick: the updates delivered, and the one timer set
    /// again to the provider's next due time (or cleared: nothing is due).
    fn settle(&mut self, ctx: &mut Context<Self>) {
        self.drain(ctx);
        if let Some(timer) = self.wakeup.take() {
            ctx.cancel_future(timer);
        }
        let Some(due) = self.state.provider().next_wakeup() else {
            return;
        };
        // On tokio's clock: the wait is measured with the same wall clock the provider was
        // given its times by, so paused-time tests see it too.
        let wait = clock::wait_until((self.wall_clock)(), due);
        self.wakeup = Some(ctx.run_later(wait, |actor, ctx| {
            actor.wakeup = None;
            actor.ticks += 1;
            let updates = actor.state.provider().tick((actor.wall_clock)());
            actor.queue_updates(updates);
            actor.settle(ctx);
        }));
    }
}

/// The provider has updates waiting (sent by its update sink, from any thread).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
struct ProviderUpdates;

impl Handler<ProviderUpdates> for PodLifecycleActor {
    type Result = ();

    fn handle(&mut self, _: ProviderUpdates, ctx: &mut Context<Self>) {
        let updates = self.state.provider().tick((self.wall_clock)());
        self.queue_updates(updates);
        self.settle(ctx);
    }
}

impl Actor for PodLifecycleActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.add_stream(match &self.source {
            Some(source) => source.subscribe(),
            None => self.api.watch_pods(&self.settings.node_name),
        });
        let address = ctx.address();
        self.state
            .provider()
            .set_update_sink(Arc::new(move || address.do_send(ProviderUpdates)));
        // What a predecessor had not delivered goes first; what came due meanwhile follows.
        self.settle(ctx);
    }
}

impl StreamHandler<PodWatchEvent> for PodLifecycleActor {
    fn handle(&mut self, event: PodWatchEvent, ctx: &mut Context<Self>) {
        self.watch_events += 1;
        match event {
            PodWatchEvent::Applied(pod) => {
                let updates = self.state.provider().pod_applied(&pod, (self.wall_clock)());
                self.state.queue([Outgoing::Observed(pod)]);
                self.queue_updates(updates);
            }
            PodWatchEvent::Deleted(pod) => {
                self.state.provider().pod_deleted(&pod.pod());
                if let Some(uid) = pod.uid() {
                    self.state.queue([Outgoing::Gone(uid.to_owned())]);
                }
            }
            PodWatchEvent::Listed => self.state.provider().pods_listed(),
        }
        self.settle(ctx);
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        tracing::warn!("the watch on this node's pods ended");
    }
}

impl Handler<UpdatePodCidr> for PodLifecycleActor {
    type Result = bool;

    fn handle(&mut self, UpdatePodCidr(cidrs): UpdatePodCidr, ctx: &mut Context<Self>) -> bool {
        let updates = self
            .state
            .provider()
            .set_pod_cidrs(&cidrs, (self.wall_clock)());
        self.queue_updates(updates);
        self.settle(ctx);
        true
    }
}

impl Handler<StopPod> for PodLifecycleActor {
    type Result = ();

    fn handle(&mut self, stop: StopPod, ctx: &mut Context<Self>) {
        let updates = self.state.provider().stop_pod(&stop, (self.wall_clock)());
        self.queue_updates(updates);
        self.settle(ctx);
    }
}

/// Fault injection into the provider's own tasks (the CRI engine's pod workers and PLEG), as
/// the supervisor's kill modes are for actors: whether the provider has such tasks.
#[derive(Debug, Clone, Message)]
#[rtype(result = "bool")]
pub struct InjectProviderFault(pub ProviderFault);

impl Handler<InjectProviderFault> for PodLifecycleActor {
    type Result = bool;

    fn handle(
        &mut self,
        InjectProviderFault(fault): InjectProviderFault,
        _: &mut Context<Self>,
    ) -> bool {
        self.state.provider().inject_fault(fault)
    }
}

/// A pod waiting for its volumes may start now (or learn why not).
impl Handler<PodVolumesChanged> for PodLifecycleActor {
    type Result = ();

    fn handle(&mut self, changed: PodVolumesChanged, ctx: &mut Context<Self>) {
        let updates = self
            .state
            .provider()
            .volumes_changed(&changed.pod_uid, (self.wall_clock)());
        self.queue_updates(updates);
        self.drain(ctx);
    }
}

/// What the prober published: the provider kills, records or re-reports as it says.
impl Handler<ProberFeedback> for PodLifecycleActor {
    type Result = ();

    fn handle(&mut self, ProberFeedback(output): ProberFeedback, ctx: &mut Context<Self>) {
        let updates = (self.state.provider()).prober_output(&output, (self.wall_clock)());
        self.queue_updates(updates);
        self.settle(ctx);
    }
}

impl SupervisedActor for PodLifecycleActor {
    fn debug_state(&self) -> serde_json::Value {
        json!({
            "node": self.settings.node_name,
            "watchEvents": self.watch_events,
            "delivered": self.delivered,
            "ticks": self.ticks,
            "nextWakeup": self.state.provider().next_wakeup().map(|due| due.to_string()),
            "undelivered": self.state.outbox().len(),
            "provider": self.state.provider().debug_state(),
        })
    }
}
