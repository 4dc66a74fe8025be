//! kube-controller-manager's writers of Nodes: the node-lifecycle controller, which every
//! monitor period marks silent nodes' conditions Unknown (recording `NodeNotReady` and marking
//! their pods not ready), and, on every Node change, the taint manager (condition taints) and
//! the TTL controller (the TTL annotation). It writes through the store with the same rules as
//! API clients, so watchers see its writes as they would a real control plane's. The
//! attach/detach controller (`attach_detach`, `attach_loop`) runs as its own task.

mod attach_detach;
pub(crate) mod attach_loop;
mod health;
mod taints;
mod ttl;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use crate::api::StoredKind;
use crate::api::resource::{CORE_EVENTS, NODES, PODS};
use crate::config::LifecycleConfig;
use crate::store::{EventType, ObjectKey, Store, meta_str};
use health::NodeHealth;

/// Runs the controllers until `shutdown` flips: health monitoring when `config.enabled`, the
/// taint manager and TTL controller on every Node change when `node_controllers`.
pub async fn run(
    store: Arc<Store>,
    config: LifecycleConfig,
    node_controllers: bool,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let monitoring = config.enabled;
    let mut controller = Controller {
        store,
        config,
        health: HashMap::new(),
        ttl: ttl::Ttl::default(),
    };
    let subscription = match controller.store.subscribe(StoredKind::Node, None) {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::error!(error = %e, "node controllers could not watch nodes");
            return;
        }
    };
    let mut changes = subscription.receiver;
    if node_controllers {
        for existing in &subscription.initial {
            controller.on_node_change(meta_str(&existing.object, "name"), SystemTime::now());
        }
    }
    let mut ticker = tokio::time::interval(controller.config.monitor_period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(monitoring, node_controllers, monitor_period = ?controller.config.monitor_period, grace_period = ?controller.config.grace_period, "node controllers started");
    loop {
        tokio::select! {
            _ = ticker.tick(), if monitoring => controller.monitor(Instant::now(), SystemTime::now()),
            change = changes.recv() => match change {
                Ok(change) if node_controllers && change.kind == StoredKind::Node && change.event_type != EventType::Deleted => {
                    controller.on_node_change(meta_str(&change.object, "name"), SystemTime::now());
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

struct Controller {
    store: Arc<Store>,
    config: LifecycleConfig,
    health: HashMap<String, NodeHealth>,
    ttl: ttl::Ttl,
}

impl Controller {
    /// What the taint manager and the TTL controller do when a Node is added or changed.
    fn on_node_change(&mut self, name: &str, wall: SystemTime) {
        self.reconcile_taints(name, wall);
        self.annotate_ttl(name);
    }

    /// Sets the TTL annotation the cluster size calls for (the TTL controller's PATCH).
    fn annotate_ttl(&mut self, name: &str) {
        let ttl = self.ttl.desired(self.store.count(StoredKind::Node));
        self.rewrite_node(name, "set the TTL annotation", |node| {
            ttl::annotate(node, ttl);
        });
    }

    /// Writes what `change` makes of Node `name` (nothing when it changes nothing); a Node
    /// deleted meanwhile is no error.
    fn rewrite_node(&self, name: &str, what: &str, change: impl FnOnce(&mut Value)) {
        let key = ObjectKey::new("", name);
        let result = self.store.update(&NODES, &key, None, |current| {
            let mut node = current.clone();
            change(&mut node);
            Ok(node)
        });
        match result {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => tracing::warn!(node = name, error = %e, "could not {what}"),
        }
    }

    /// One `monitorNodeHealth` pass over every node.
    fn monitor(&mut self, now: Instant, wall: SystemTime) {
        let (nodes, _) = self.store.list(StoredKind::Node, None, |_| true);
        // A set, not a scan per entry: at 10,000 nodes the scan was 10^8 comparisons a pass.
        {
            let present: HashSet<&str> = nodes.iter().map(|node| meta_str(node, "name")).collect();
            self.health
                .retain(|name, _| present.contains(name.as_str()));
        }
        for node in nodes {
            let name = meta_str(&node, "name").to_string();
            let lease = self.store.get(
                StoredKind::Lease,
                &ObjectKey::new("kube-node-lease", name.as_str()),
            );
            let health = NodeHealth::observe(self.health.get(&name), &node, lease.as_deref(), now);
            let stale = health.is_stale(
                &node,
                now,
                self.config.grace_period,
                self.config.startup_grace_period,
            );
            self.health.insert(name.clone(), health);
            if stale {
                self.mark_unknown(&name, wall);
            }
            self.reconcile_taints(&name, wall);
        }
    }

    fn mark_unknown(&self, name: &str, wall: SystemTime) {
        let key = ObjectKey::new("", name);
        let mut ready_changed = false;
        let was_ready = self
            .store
            .get(StoredKind::Node, &key)
            .is_some_and(|n| taints::condition_status(&n, "Ready") == Some("True"));
        let result = self.store.update(&NODES, &key, Some("status"), |current| {
            let mut node = current.clone();
            ready_changed = health::mark_unknown(&mut node, wall);
            Ok(if ready_changed { node } else { current.clone() })
        });
        match result {
            Ok(_) if ready_changed => {
                tracing::info!(
                    node = name,
                    "node stopped posting status; conditions set to Unknown"
                );
                if was_ready {
                    self.record_not_ready(name, wall);
                    self.mark_pods_not_ready(name, wall);
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(node = name, error = %e, "could not mark node Unknown"),
        }
    }

    fn reconcile_taints(&self, name: &str, wall: SystemTime) {
        self.rewrite_node(name, "reconcile node taints", |node| {
            taints::reconcile(node, wall);
        });
    }

    /// The `NodeNotReady` event (`Node <name> status is now: NodeNotReady`).
    fn record_not_ready(&self, name: &str, wall: SystemTime) {
        let at = crate::time::format_time(wall);
        let event = json!({
            "metadata": {"generateName": format!("{name}."), "namespace": "default"},
            "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": name, "uid": name},
            "reason": "NodeNotReady", "message": format!("Node {name} status is now: NodeNotReady"),
            "type": "Normal", "source": {"component": "node-controller"},
            "firstTimestamp": at, "lastTimestamp": at, "count": 1, "reportingComponent": "node-controller",
        });
        if let Err(e) = self.store.create(&CORE_EVENTS, event, wall) {
            tracing::warn!(node = name, error = %e, "could not record NodeNotReady event");
        }
    }

    /// `MarkPodsNotReady`: the Ready condition of every pod bound to the node becomes False.
    fn mark_pods_not_ready(&self, name: &str, wall: SystemTime) {
        let (pods, _) = self.store.list(StoredKind::Pod, None, |p| {
            p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(name)
        });
        for pod in pods {
            let key = ObjectKey::new(meta_str(&pod, "namespace"), meta_str(&pod, "name"));
            let result = self.store.update(&PODS, &key, Some("status"), |current| {
                let mut next = current.clone();
                if let Some(conditions) = next
                    .pointer_mut("/status/conditions")
                    .and_then(Value::as_array_mut)
                {
                    for c in conditions
                        .iter_mut()
                        .filter(|c| c["type"] == "Ready" && c["status"] != "False")
                    {
                        c["status"] = "False".into();
                        c["lastTransitionTime"] = crate::time::format_time(wall).into();
                    }
                }
                Ok(next)
            });
            if let Err(e) = result {
                tracing::warn!(node = name, pod = key.name, error = %e, "could not mark pod not ready");
            }
        }
    }
}
