//! NodeStatusActor: registers the Node, then computes its status on every input change and
//! every `nodeStatusUpdateFrequency` (jitter 0.04), and PATCHes it when it changed or a report
//! is due. Its inputs (the latest RuntimeHealth and PressureChanged) live in a store the
//! factory hands to every instance, so a restarted instance does not forget that the runtime
//! was healthy and post a NotReady blip. A Node deleted under it is registered again.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use actix::{Actor, ActorFutureExt, AsyncContext, Context, Handler, StreamHandler, WrapFuture};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use nodepulse_supervisor::{Kept, Recipient, SupervisedActor};
use serde_json::Value;
use tokio::time::Instant;

use super::{
    NodeView,
    registration::{RegistrationSettings, initial_node},
    report::{ReportClock, tick_phase},
    setters::StatusSettings,
    sync::{Registered, StatusJob, SyncOutcome, register, sync_status},
};
use crate::{
    clock::{self, WallClock},
    messages::{NodeRegistered, NodeVolumeFacts, PressureChanged, RuntimeHealth, VolumesInUse},
    ports::{
        ApiRecovered, HealthChecks, MachineFacts, NodeApi, NodeEvent, NodeWatchEvent,
        warn_unless_unreachable,
    },
    runtime_probe::UpdatePodCidr,
};

/// Jitter of the status loop: the wait is `frequency × (1 + U[0, 0.04))`.
const UPDATE_JITTER: f64 = 0.04;

/// How NodeStatusActor is configured.
#[derive(Debug, Clone)]
pub struct NodeStatusSettings {
    pub node_name: String,
    pub register_node: bool,
    pub registration: Arc<RegistrationSettings>,
    pub status: Arc<StatusSettings>,
    pub update_frequency: Duration,
    pub report_frequency: Duration,
    /// How long the first sync waits for the first RuntimeHealth, as the kubelet probes the
    /// runtime once before its first status sync (so a restart does not post NotReady first).
    /// `None` when no runtime probe feeds this actor.
    pub first_runtime_wait: Option<Duration>,
    /// Start the periodic computation at a random point of its period (nodes of a fleet,
    /// started together, then compute and report out of step); else one period after start.
    pub random_tick_phase: bool,
}

/// What outlives an instance (handed to every generation in a [`Kept`]): the latest inputs,
/// the registered Node, the boot ID last reported and whether the process has announced itself.
#[derive(Debug, Default, Clone)]
pub struct NodeStatusMemory {
    /// The Node as the API server last returned it (the instance's `node`, the same
    /// allocation): a restarted instance goes on syncing its status instead of registering
    /// again, which would wait out the registration's backoff (up to 7 s) after an outage.
    node: Option<Arc<Node>>,
    runtime: Option<RuntimeHealth>,
    pressure: Option<PressureChanged>,
    boot_id: Option<String>,
    announced: bool,
    /// The volume manager's `volumesInUse`; `None` until its reconciler synced.
    volumes_in_use: Option<Vec<String>>,
    /// The facts last handed to the volume manager.
    volume_facts: Option<NodeVolumeFacts>,
}

pub struct NodeStatusActor {
    settings: NodeStatusSettings,
    api: Arc<dyn NodeApi>,
    machine: Arc<dyn MachineFacts>,
    memory: Kept<NodeStatusMemory>,
    lease: Option<Recipient<NodeRegistered>>,
    /// Where a changed `spec.podCIDRs` is pushed (the runtime probe, which hands it to the
    /// runtime with CRI UpdateRuntimeConfig, and the pods' provider).
    pod_cidr: Option<Recipient<UpdatePodCidr>>,
    /// Where `volumesAttached` and allocatable are handed (the volume manager).
    volumes: Option<Recipient<NodeVolumeFacts>>,
    /// Where the Node is shared with the pods' provider (admission).
    node_view: Option<Arc<NodeView>>,
    /// The runtime-state health checks the node's parts registered (the PLEG's); Ready is
    /// False while one is unhealthy.
    health_checks: Option<Arc<HealthChecks>>,
    /// The pod CIDRs last pushed to the runtime, as the kubelet's `runtimeState.cidr`.
    last_pod_cidr: Option<String>,
    /// A pod CIDR change forces the next status PATCH.
    force_report: bool,
    /// The Node as the API server last returned it; `None` until registered. The same
    /// allocation as the `NodeView` share: one copy of the Node, not two.
    node: Option<Arc<Node>>,
    report: ReportClock,
    busy: bool,
    again: bool,
    /// The watch saw no Node (deleted, or a list taken before the registration landed): the
    /// next sync reads the Node instead of trusting the cached one, and registers again only
    /// when it is gone.
    read_node: bool,
    last_computed: Option<Node>,
    /// The last PATCH body, as sent (text: a JSON tree of it took several times the bytes,
    /// kept on every node of a fleet only for `/debug/node`).
    last_sent: Option<(Timestamp, String)>,
    last_sync: Option<(Timestamp, String)>,
    field_changed_at: BTreeMap<String, Timestamp>,
    wall_clock: WallClock,
}

impl NodeStatusActor {
    pub fn new(
        settings: NodeStatusSettings,
        api: Arc<dyn NodeApi>,
        machine: Arc<dyn MachineFacts>,
        memory: Kept<NodeStatusMemory>,
        lease: Option<Recipient<NodeRegistered>>,
        pod_cidr: Option<Recipient<UpdatePodCidr>>,
    ) -> Self {
        let node = memory.read(|memory| memory.node.clone());
        Self {
            settings,
            api,
            machine,
            memory,
            lease,
            pod_cidr,
            volumes: None,
            node_view: None,
            health_checks: None,
            last_pod_cidr: None,
            force_report: false,
            node,
            report: ReportClock::default(),
            busy: false,
            again: false,
            read_node: false,
            last_computed: None,
            last_sent: None,
            last_sync: None,
            field_changed_at: BTreeMap::new(),
            wall_clock: clock::system(),
        }
    }

    /// Hands `status.volumesAttached` and `status.allocatable` to `volumes` whenever they change.
    #[must_use]
    pub fn with_volume_manager(mut self, volumes: Recipient<NodeVolumeFacts>) -> Self {
        self.volumes = Some(volumes);
        self
    }

    /// Shares the Node the API server returned (the pods' admission reads it), and tells the
    /// volume manager what it says about volumes.
    fn observe_node(&mut self, node: Arc<Node>) {
        if let Some(view) = &self.node_view {
            view.share(Some(Arc::clone(&node)));
        }
        self.observe_volumes(&node);
        self.keep_node(Some(node));
    }

    /// The Node as the API server last returned it (`None`: to be registered), kept for the
    /// next instance too.
    fn keep_node(&mut self, node: Option<Arc<Node>>) {
        self.memory.update(|memory| memory.node.clone_from(&node));
        self.node = node;
    }

    /// Shares the Node as it would be registered (the kubelet's `initialNode`: the default
    /// labels, `nodeLabels`, `registerWithTaints` and every status setter), which static pods
    /// are admitted against until the API server has the Node.
    fn share_initial_node(&self) {
        let Some(view) = &self.node_view else {
            return;
        };
        let job = self.job();
        let (node, _, _) = job.compute(&initial_node(&job.node_name, &job.registration));
        view.set_initial(node);
    }

    /// Shares every Node the API server returns through `view`.
    #[must_use]
    pub fn with_node_view(mut self, view: Arc<NodeView>) -> Self {
        self.node_view = Some(view);
        self
    }

    /// Asks `checks` at every status computation, as the kubelet's runtime state does.
    #[must_use]
    pub fn with_health_checks(mut self, checks: Arc<HealthChecks>) -> Self {
        self.health_checks = Some(checks);
        self
    }

    /// The health checks' errors at `now`.
    fn health_errors(&self, now: Instant) -> Vec<String> {
        self.health_checks
            .as_ref()
            .map(|checks| checks.errors(now))
            .unwrap_or_default()
    }

    /// Tells the volume manager what the Node says about volumes, when it changed.
    fn observe_volumes(&mut self, node: &Node) {
        let Some(volumes) = &self.volumes else {
            return;
        };
        let status = node.status.as_ref();
        let facts = NodeVolumeFacts {
            volumes_attached: status
                .and_then(|s| s.volumes_attached.as_ref())
                .map(|attached| attached.iter().map(|v| v.name.clone()).collect())
                .unwrap_or_default(),
            allocatable: status
                .and_then(|s| s.allocatable.as_ref())
                .map(|allocatable| {
                    allocatable
                        .iter()
                        .filter_map(|(name, q)| {
                            crate::quantity::parse_quantity(&q.0)
                                .ok()
                                .map(|v| (name.clone(), v))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        if self.memory.get().volume_facts.as_ref() == Some(&facts) {
            return;
        }
        if volumes.try_send(facts.clone()).is_ok() {
            self.memory
                .update(|memory| memory.volume_facts = Some(facts));
        }
    }

    /// Reads API timestamps from `clock` instead of the system's wall clock.
    #[must_use]
    pub fn with_wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = clock;
        self
    }

    fn job(&self) -> StatusJob {
        let remembered = self.memory.get();
        let now_instant = Instant::now();
        StatusJob {
            node_name: self.settings.node_name.clone(),
            machine: self.machine.read(),
            status: Arc::clone(&self.settings.status),
            registration: Arc::clone(&self.settings.registration),
            runtime: remembered.runtime,
            pressure: remembered.pressure,
            previous_boot_id: remembered.boot_id,
            volumes_in_use: remembered.volumes_in_use,
            now: (self.wall_clock)(),
            health: self.health_errors(now_instant),
            now_instant,
        }
    }

    /// Starts a sync unless one is running; then it runs once more when this one ends.
    fn sync(&mut self, ctx: &mut Context<Self>) {
        if self.busy {
            self.again = true;
            return;
        }
        self.busy = true;
        let api = Arc::clone(&self.api);
        match self.node.clone() {
            None => {
                ctx.spawn(register(api, self.job()).into_actor(self).map(
                    |registered, actor, ctx| {
                        actor.registered(registered);
                        actor.finish(ctx, true);
                        if let Some(node) = actor.node.clone() {
                            actor.observe_pod_cidr(&node, ctx);
                        }
                    },
                ));
            }
            Some(cached) => {
                // Cleared only once a report lands, so a failed sync keeps forcing.
                let force = self.force_report;
                let cached = (!std::mem::take(&mut self.read_node)).then_some(cached);
                let outcome = sync_status(
                    api,
                    self.job(),
                    cached,
                    self.report.clone(),
                    self.settings.report_frequency,
                    force,
                );
                ctx.spawn(outcome.into_actor(self).map(|outcome, actor, ctx| {
                    actor.synced(outcome);
                    actor.finish(ctx, false);
                }));
            }
        }
    }

    fn finish(&mut self, ctx: &mut Context<Self>, run_again: bool) {
        self.busy = false;
        if run_again || std::mem::take(&mut self.again) {
            self.sync(ctx);
        }
    }

    /// Pushes a changed `spec.podCIDRs` to the runtime once and forces the next status PATCH,
    /// as the kubelet's updatePodCIDR does (a failed push still forces it).
    fn observe_pod_cidr(&mut self, node: &Node, ctx: &mut Context<Self>) {
        let spec = node.spec.as_ref();
        let cidrs = spec
            .and_then(|spec| spec.pod_cidrs.clone())
            .filter(|cidrs| !cidrs.is_empty())
            .or_else(|| {
                spec.and_then(|spec| spec.pod_cidr.clone())
                    .map(|cidr| vec![cidr])
            })
            .map(|cidrs| cidrs.join(","));
        let Some(cidrs) = cidrs.filter(|cidrs| self.last_pod_cidr.as_ref() != Some(cidrs)) else {
            return;
        };
        tracing::info!(pod_cidr = %cidrs, "the Node's pod CIDR changed; pushing it to the runtime");
        if let Some(sink) = &self.pod_cidr
            && let Err(error) = sink.try_send(UpdatePodCidr(cidrs.clone()))
        {
            tracing::warn!(%error, "cannot hand the pod CIDR to the runtime probe");
        }
        self.last_pod_cidr = Some(cidrs);
        self.force_report = true;
        self.sync(ctx);
    }

    fn registered(&mut self, registered: Registered) {
        let uid = registered.node.metadata.uid.clone().unwrap_or_default();
        let mut events = registered.events;
        let remembered = self.memory.get();
        if !remembered.announced {
            events.insert(
                0,
                NodeEvent::normal("Starting", "Starting nodepulse.".to_owned()),
            );
        } else if !registered.adopted {
            tracing::warn!(node = %self.settings.node_name, "the Node had been deleted; registered it again");
            events.push(NodeEvent::warning(
                "NodeReregistered",
                format!(
                    "Node {} was deleted from the API server; nodepulse registered it again",
                    self.settings.node_name
                ),
            ));
        }
        self.memory.update(|memory| memory.announced = true);
        self.observe_node(Arc::new(registered.node));
        self.record(events);
        if let Some(lease) = &self.lease
            && let Err(error) = lease.try_send(NodeRegistered { uid })
        {
            tracing::warn!(%error, "cannot tell the lease actor the Node's UID");
        }
    }

    fn synced(&mut self, outcome: SyncOutcome) {
        let now = (self.wall_clock)();
        match outcome {
            SyncOutcome::Patched {
                node,
                computed,
                patch,
                changed,
                events,
            } => {
                self.force_report = false;
                self.report.reported(
                    changed,
                    Instant::now(),
                    self.settings.report_frequency,
                    rand::random::<f64>(),
                );
                let boot_id = node
                    .status
                    .as_ref()
                    .and_then(|status| status.node_info.as_ref())
                    .map(|info| info.boot_id.clone());
                self.memory.update(|memory| memory.boot_id = boot_id);
                self.note_computed(*computed, now);
                self.observe_node(Arc::from(node));
                self.last_sent = Some((now, patch.to_string()));
                self.last_sync = Some((
                    now,
                    if changed {
                        "patched: status changed"
                    } else {
                        "patched: report due"
                    }
                    .to_owned(),
                ));
                self.record(events);
            }
            SyncOutcome::UpToDate { computed } => {
                self.force_report = false;
                self.report.reported(
                    false,
                    Instant::now(),
                    self.settings.report_frequency,
                    rand::random::<f64>(),
                );
                self.note_computed(*computed, now);
                self.last_sync = Some((
                    now,
                    "unchanged: the server already has this status".to_owned(),
                ));
            }
            SyncOutcome::NotDue { computed } => {
                self.note_computed(*computed, now);
                self.last_sync = Some((now, "unchanged: nothing sent".to_owned()));
            }
            SyncOutcome::NodeMissing => {
                tracing::warn!(node = %self.settings.node_name, "the Node is gone from the API server; registering it again");
                self.keep_node(None);
                self.last_sync = Some((now, "node missing: registering again".to_owned()));
                self.again = true;
            }
            SyncOutcome::Failed(error) => {
                warn_unless_unreachable!(self.api.recovery(), %error, retryable = error.is_retryable(), "node status sync failed");
                self.last_sync = Some((now, format!("failed: {error}")));
            }
        }
    }

    fn note_computed(&mut self, mut computed: Node, now: Timestamp) {
        // The common case, every tick of every node: nothing but the conditions' heartbeats
        // moved. Told apart without turning both statuses into JSON trees.
        if let Some(last) = self.last_computed.as_mut()
            && same_but_conditions(last, &mut computed)
        {
            self.last_computed = Some(computed);
            return;
        }
        let fields = |node: &Node| serde_json::to_value(&node.status).unwrap_or(Value::Null);
        let new = fields(&computed);
        let old = self
            .last_computed
            .as_ref()
            .map(fields)
            .unwrap_or(Value::Null);
        if let Some(new_fields) = new.as_object() {
            for (field, value) in new_fields {
                if field != "conditions" && old.get(field) != Some(value) {
                    self.field_changed_at.insert(field.clone(), now);
                }
            }
        }
        self.last_computed = Some(computed);
    }

    fn record(&self, events: Vec<NodeEvent>) {
        for event in events {
            let request = self
                .api
                .record_event(&self.settings.node_name, event.clone());
            let recovery = self.api.recovery();
            actix::spawn(async move {
                if let Err(error) = request.await {
                    warn_unless_unreachable!(recovery, %error, reason = %event.reason, "cannot record node event");
                }
            });
        }
    }

    fn schedule_tick(&self, ctx: &mut Context<Self>) {
        let wait = self
            .settings
            .update_frequency
            .mul_f64(1.0 + UPDATE_JITTER * rand::random::<f64>());
        ctx.run_later(wait, |actor, ctx| {
            actor.sync(ctx);
            actor.schedule_tick(ctx);
        });
    }
}

impl Actor for NodeStatusActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.share_initial_node();
        ctx.add_stream(self.api.watch_node(&self.settings.node_name));
        ctx.add_stream(self.api.recovery().stream());
        if self.settings.register_node {
            match self
                .settings
                .first_runtime_wait
                .filter(|_| self.memory.get().runtime.is_none())
            {
                // The first RuntimeHealth starts the sync; this is the fallback.
                Some(wait) => {
                    ctx.run_later(wait, |actor, ctx| {
                        if actor.node.is_none() {
                            actor.sync(ctx);
                        }
                    });
                }
                None => self.sync(ctx),
            }
        }
        if self.settings.random_tick_phase {
            let phase = tick_phase(self.settings.update_frequency, rand::random::<f64>());
            ctx.run_later(phase, |actor, ctx| {
                actor.sync(ctx);
                actor.schedule_tick(ctx);
            });
        } else {
            self.schedule_tick(ctx);
        }
    }
}

/// A status PATCH that failed during an outage waits for the next tick; the API server's
/// return syncs at once (a sync with nothing due sends nothing).
impl StreamHandler<ApiRecovered> for NodeStatusActor {
    fn handle(&mut self, _: ApiRecovered, ctx: &mut Context<Self>) {
        if self.node.is_some() {
            self.sync(ctx);
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {}
}

/// The watch on the Node keeps the cached copy fresh (the base of the next status diff) and
/// notices a deletion, which the status loop alone would not while nothing changes.
impl StreamHandler<NodeWatchEvent> for NodeStatusActor {
    fn handle(&mut self, event: NodeWatchEvent, ctx: &mut Context<Self>) {
        match event {
            NodeWatchEvent::Present(node) => {
                if self.node.is_some() {
                    self.observe_pod_cidr(&node, ctx);
                    self.observe_node(Arc::from(node));
                }
            }
            NodeWatchEvent::Deleted => {
                // Deleted, or listed before the registration under way landed (the watch
                // starts with it): which, the Node read by the next sync tells. Its answer
                // also settles a registration or PATCH under way, which may bring back the
                // Node from before a deletion.
                let known = self.node.is_some() || self.busy;
                if known && self.settings.register_node {
                    tracing::info!(node = %self.settings.node_name, "the Node watch sees no Node; reading it");
                    self.read_node = true;
                    self.sync(ctx);
                }
            }
        }
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        tracing::warn!(
            "the watch on the Node ended; deletions are noticed by the status loop only"
        );
    }
}

/// Whether two computed Nodes' statuses are equal in every field but `conditions` (which
/// `fieldChangedAt` does not track); both are left as they were.
fn same_but_conditions(last: &mut Node, computed: &mut Node) -> bool {
    let (Some(last), Some(computed)) = (last.status.as_mut(), computed.status.as_mut()) else {
        return last.status.is_none() && computed.status.is_none();
    };
    let (last_conditions, computed_conditions) =
        (last.conditions.take(), computed.conditions.take());
    let same = last == computed;
    last.conditions = last_conditions;
    computed.conditions = computed_conditions;
    same
}

/// The parts of a runtime observation the status depends on (the probe time moves on every
/// probe; only whether there ever was one matters here, staleness is judged on the tick).
fn runtime_view(
    health: &RuntimeHealth,
) -> (bool, Option<&String>, Option<&String>, Option<&String>) {
    (
        health.last_successful_probe.is_some(),
        health.runtime_error.as_ref(),
        health.network_error.as_ref(),
        health.runtime_version.as_ref(),
    )
}

impl Handler<RuntimeHealth> for NodeStatusActor {
    type Result = ();

    fn handle(&mut self, health: RuntimeHealth, ctx: &mut Context<Self>) {
        let previous = self.memory.get().runtime;
        let changed = previous.as_ref().map(runtime_view) != Some(runtime_view(&health));
        self.memory.update(|memory| memory.runtime = Some(health));
        if changed && self.settings.register_node {
            self.sync(ctx);
        }
    }
}

impl Handler<PressureChanged> for NodeStatusActor {
    type Result = ();

    fn handle(&mut self, pressure: PressureChanged, ctx: &mut Context<Self>) {
        let flags = |p: &PressureChanged| (p.memory_pressure, p.disk_pressure, p.pid_pressure);
        let changed = self.memory.get().pressure.as_ref().map(flags) != Some(flags(&pressure));
        self.memory
            .update(|memory| memory.pressure = Some(pressure));
        if changed && self.settings.register_node {
            self.sync(ctx);
        }
    }
}

/// The kubelet's setter reads the volume manager when the status is computed; here the list
/// arrives when it changes and a changed list is synced at once.
impl Handler<VolumesInUse> for NodeStatusActor {
    type Result = ();

    fn handle(&mut self, VolumesInUse(in_use): VolumesInUse, ctx: &mut Context<Self>) {
        let changed = self.memory.get().volumes_in_use != in_use;
        self.memory.update(|memory| memory.volumes_in_use = in_use);
        if changed && self.settings.register_node && self.node.is_some() {
            self.sync(ctx);
        }
    }
}

impl SupervisedActor for NodeStatusActor {
    fn debug_state(&self) -> Value {
        super::debug::describe(self.debug_view())
    }
}

impl NodeStatusActor {
    fn debug_view(&self) -> super::debug::DebugView<'_> {
        super::debug::DebugView {
            node_name: &self.settings.node_name,
            registered: self.node.as_deref(),
            last_computed: self.last_computed.as_ref(),
            last_sent: self.last_sent.as_ref(),
            last_sync: self.last_sync.as_ref(),
            field_changed_at: &self.field_changed_at,
            remembered_runtime: self.memory.get().runtime,
            remembered_pressure: self.memory.get().pressure,
            volumes_in_use: self.memory.get().volumes_in_use,
            volume_facts: self.memory.get().volume_facts,
            last_report: self.report.last_report(),
            status: &self.settings.status,
            health: self.health_errors(Instant::now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::core::v1::{NodeCondition, NodeStatus},
        apimachinery::pkg::api::resource::Quantity,
    };

    use super::*;

    fn node(pods: &str, heartbeat: &str) -> Node {
        Node {
            status: Some(NodeStatus {
                capacity: Some([("pods".to_owned(), Quantity(pods.to_owned()))].into()),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".to_owned(),
                    status: "True".to_owned(),
                    message: Some(heartbeat.to_owned()),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn statuses_apart_only_in_conditions_are_the_same_and_are_left_whole() {
        let (mut last, mut computed) = (node("110", "a"), node("110", "b"));
        assert!(same_but_conditions(&mut last, &mut computed));
        assert_eq!((last, computed), (node("110", "a"), node("110", "b")));
        let (mut last, mut computed) = (node("110", "a"), node("220", "a"));
        assert!(!same_but_conditions(&mut last, &mut computed));
        assert_eq!(computed, node("220", "a"), "conditions put back");
        assert!(!same_but_conditions(
            &mut Node::default(),
            &mut node("110", "a")
        ));
        assert!(same_but_conditions(
            &mut Node::default(),
            &mut Node::default()
        ));
    }
}
