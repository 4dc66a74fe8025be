//! Watching a node from the control plane's side while a test attacks it: a background poller
//! that reads the Node and its Lease every 100 ms and records how far the Lease's renewTime lags
//! behind the clock and every moment the Node looked wrong (a condition Unknown or different from
//! when watching began, or the unreachable taint). Conditions a test changes on purpose are
//! named as varying: they are left out of that comparison and their flips are recorded instead.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Node};
use kube::Api;

const POLL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Observed {
    /// When each poll saw the Lease, and how old its renewTime was then.
    lags: Vec<(Instant, Duration)>,
    /// Moments the Node looked wrong, with what was wrong.
    wrong: Vec<(Instant, String)>,
    polls: usize,
    /// Polls whose API reads failed (the API itself may be faulted on purpose).
    failed_polls: usize,
    /// The varying conditions' statuses at the last poll that saw the Node.
    varying: BTreeMap<String, String>,
    /// When a varying condition was first seen with a new status: (when, type, status).
    flips: Vec<(Instant, String, String)>,
}

impl Observed {
    /// Records one poll's reads of the Node and the Lease.
    fn note(
        &mut self,
        node: kube::Result<Option<Node>>,
        lease: kube::Result<Option<Lease>>,
        expected: &BTreeMap<String, String>,
    ) {
        let now = Instant::now();
        self.polls += 1;
        let (Ok(node), Ok(lease)) = (node, lease) else {
            self.failed_polls += 1;
            return;
        };
        match lease.and_then(|lease| lease.spec?.renew_time) {
            Some(renew) => {
                let lag = SystemTime::now()
                    .duration_since(SystemTime::from(renew.0))
                    .unwrap_or_default();
                self.lags.push((now, lag));
            }
            None => self.wrong.push((now, "no Lease".to_owned())),
        }
        let Some(node) = node else {
            self.wrong.push((now, "no Node".to_owned()));
            return;
        };
        let mut seen = conditions(&node);
        for (kind, last) in &mut self.varying {
            let status = seen.remove(kind).unwrap_or_default();
            if status != *last {
                self.flips.push((now, kind.clone(), status.clone()));
                *last = status;
            }
        }
        if seen != *expected {
            self.wrong.push((now, format!("conditions {seen:?}")));
        }
        if unreachable(&node) {
            self.wrong.push((now, "unreachable taint".to_owned()));
        }
    }
}

/// The condition statuses of `node` by type.
pub fn conditions(node: &Node) -> BTreeMap<String, String> {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .map(|conditions| {
            conditions
                .iter()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `node` carries the node-lifecycle controller's unreachable taint.
pub fn unreachable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .is_some_and(|taints| {
            taints
                .iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable")
        })
}

/// Polls one node until dropped.
pub struct NodeObserver {
    observed: Arc<Mutex<Observed>>,
    stop: Arc<AtomicBool>,
    /// The condition statuses when watching began; every later poll must see the same.
    pub baseline: BTreeMap<String, String>,
}

impl NodeObserver {
    /// Starts watching `name`, which must already be Ready=True with a Lease.
    pub async fn start(client: &kube::Client, name: &str) -> Self {
        Self::start_varying(client, name, &[]).await
    }

    /// [`NodeObserver::start`], with the conditions `varying` allowed to change: their flips
    /// are recorded (see [`NodeObserver::flips_since`]) instead of counting as wrong.
    pub async fn start_varying(client: &kube::Client, name: &str, varying: &[&str]) -> Self {
        let nodes = Api::<Node>::all(client.clone());
        let leases = Api::<Lease>::namespaced(client.clone(), "kube-node-lease");
        let node = nodes.get(name).await.expect("the node exists");
        let mut baseline = conditions(&node);
        assert_eq!(
            baseline.get("Ready").map(String::as_str),
            Some("True"),
            "watching begins on a Ready node: {baseline:?}"
        );
        let varying = varying
            .iter()
            .map(|kind| {
                let status = baseline.remove(*kind).unwrap_or_default();
                ((*kind).to_owned(), status)
            })
            .collect();
        let observed = Arc::new(Mutex::new(Observed {
            varying,
            ..Observed::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stopped, expected, name) = (
            Arc::clone(&observed),
            Arc::clone(&stop),
            baseline.clone(),
            name.to_owned(),
        );
        actix_rt::spawn(async move {
            while !stopped.load(Ordering::Relaxed) {
                let (node, lease) = tokio::join!(nodes.get_opt(&name), leases.get_opt(&name));
                if let Ok(mut record) = shared.lock() {
                    record.note(node, lease, &expected);
                }
                tokio::time::sleep(POLL).await;
            }
        });
        Self {
            observed,
            stop,
            baseline,
        }
    }

    fn with<T>(&self, read: impl FnOnce(&Observed) -> T) -> T {
        read(&self.observed.lock().expect("observations"))
    }

    /// The worst renewTime lag seen by polls since `since`.
    pub fn worst_lag_since(&self, since: Instant) -> Duration {
        self.with(|o| {
            o.lags
                .iter()
                .filter(|(at, _)| *at >= since)
                .map(|(_, lag)| *lag)
                .max()
                .unwrap_or_default()
        })
    }

    /// Polls that saw the Lease since `since`.
    pub fn lease_polls_since(&self, since: Instant) -> usize {
        self.with(|o| o.lags.iter().filter(|(at, _)| *at >= since).count())
    }

    /// Everything wrong seen since `since`, oldest first.
    pub fn wrong_since(&self, since: Instant) -> Vec<String> {
        self.with(|o| {
            o.wrong
                .iter()
                .filter(|(at, _)| *at >= since)
                .map(|(at, what)| format!("{:?} after: {what}", at.duration_since(since)))
                .collect()
        })
    }

    /// The flips of varying condition `kind` seen since `since`, oldest first: when each new
    /// status was first seen, and the status.
    #[allow(dead_code)] // Read by tests/heavy/chaos.rs, which shares this module.
    pub fn flips_since(&self, kind: &str, since: Instant) -> Vec<(Instant, String)> {
        self.with(|o| {
            o.flips
                .iter()
                .filter(|(at, flipped, _)| *at >= since && flipped == kind)
                .map(|(at, _, status)| (*at, status.clone()))
                .collect()
        })
    }

    /// The status of varying condition `kind` at the last poll that saw the Node.
    #[allow(dead_code)] // Read by tests/heavy/chaos.rs, which shares this module.
    pub fn varying_status(&self, kind: &str) -> Option<String> {
        self.with(|o| o.varying.get(kind).cloned())
    }

    pub fn polls(&self) -> (usize, usize) {
        self.with(|o| (o.polls, o.failed_polls))
    }
}

impl Drop for NodeObserver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
