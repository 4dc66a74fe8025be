//! Static pods (the kubelet's file and HTTP sources and mirror pods): the manifests in
//! `staticPodPath` and at `staticPodURL` are more streams of the node's one pod source,
//! beside the API watch, which no longer hands on mirror pods (never run); a task per node
//! keeps each static pod's mirror pod in the API. None needs the API server to be up for what
//! already runs to keep running: the sources never call it, and the mirror task only retries.

mod files;
mod manifest;
mod mirror;
mod snapshot;
mod url;

use std::{path::PathBuf, sync::Arc, time::Duration};

use futures::{
    StreamExt,
    channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded},
    stream::BoxStream,
};
use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::{config_source::is_mirror_pod, messages::PodObserved, ports::PodWatchEvent};
use nodepulse_supervisor::Recipient;
use tokio::{task::AbortHandle, time::MissedTickBehavior};

use self::{files::fingerprint, mirror::MirrorPlan, snapshot::StaticPodSet};
use super::ApiPorts;

pub use files::{PathError, read_static_pods};
pub use manifest::{ManifestError, static_pod, url_pods};
pub use url::{UrlError, UrlSource};

/// How often the path is looked at for a change between two full reads (the kubelet's
/// inotify; no inotify crate is in the tree, and a stat of a few files a second costs nothing).
const CHANGE_POLL: Duration = Duration::from_secs(1);
/// How often mirror pods are reconciled when nothing changed (the kubelet's housekeeping).
const MIRROR_ROUND: Duration = Duration::from_secs(2);

/// The static pod sources of one node.
pub struct StaticPodSource {
    /// `staticPodPath`, read again every `fileCheckFrequency`.
    pub path: Option<(PathBuf, Duration)>,
    /// `staticPodURL`.
    pub url: Option<UrlSource>,
    pub node: String,
    /// Where the mirror pods are reported as the API has them: StatusManager, which compares
    /// a static pod's status with its mirror's (a re-created mirror starts without one).
    pub status_manager: Recipient<PodObserved>,
}

/// One static source's latest pods, tagged with the source's place among them.
type Snapshot = (usize, Vec<Pod>);

/// The node's pod streams: the API watch, without mirror pods, and one stream per static pod
/// source; and the tasks that follow them, to stop with the pod source.
pub fn pod_streams(
    api: &Arc<dyn ApiPorts>,
    node: &str,
    source: Option<StaticPodSource>,
) -> (Vec<BoxStream<'static, PodWatchEvent>>, Vec<AbortHandle>) {
    let watch = api.watch_pods(node);
    let Some(source) = source.filter(|s| s.path.is_some() || s.url.is_some()) else {
        return (vec![without_mirror_pods(watch, None)], Vec::new());
    };
    let (mirror_events, mirror_watch) = unbounded();
    let (snapshots, read) = unbounded();
    let mut streams = vec![without_mirror_pods(watch, Some(mirror_events))];
    let mut tasks = Vec::new();
    let mut follower = |index| {
        let (events, stream) = unbounded();
        streams.push(stream.boxed());
        Follower::new(index, events, snapshots.clone())
    };
    if let Some((path, period)) = source.path.clone() {
        let follower = follower(tasks.len());
        let node = source.node.clone();
        tasks.push(tokio::spawn(follow_files(path, period, node, follower)).abort_handle());
    }
    if let Some(url) = source.url.clone() {
        let follower = follower(tasks.len());
        let node = source.node.clone();
        tasks.push(tokio::spawn(follow_url(url, node, follower)).abort_handle());
    }
    let sources = tasks.len();
    let mirrors = keep_mirrors(
        Arc::clone(api),
        (source.node, source.status_manager),
        (sources, read),
        mirror_watch,
    );
    tasks.push(tokio::spawn(mirrors).abort_handle());
    (streams, tasks)
}

/// What a static source hands on after each read: its pods' changes (`Listed` after the
/// first read) to the pod source, and all its pods to the mirror task.
struct Follower {
    index: usize,
    set: StaticPodSet,
    listed: bool,
    events: UnboundedSender<PodWatchEvent>,
    snapshots: UnboundedSender<Snapshot>,
}

impl Follower {
    fn new(
        index: usize,
        events: UnboundedSender<PodWatchEvent>,
        snapshots: UnboundedSender<Snapshot>,
    ) -> Self {
        Self {
            index,
            set: StaticPodSet::default(),
            listed: false,
            events,
            snapshots,
        }
    }

    /// The source's pods are `pods` now; `false` once nobody listens.
    fn publish(&mut self, pods: Vec<Pod>) -> bool {
        let mut changes = self.set.replace(pods, jiff::Timestamp::now());
        if !self.listed {
            changes.push(PodWatchEvent::Listed);
            self.listed = true;
        }
        for change in changes {
            if self.events.unbounded_send(change).is_err() {
                return false;
            }
        }
        let pods = self.set.pods().cloned().collect();
        let _ = self.snapshots.unbounded_send((self.index, pods));
        true
    }
}

/// The API watch with mirror pods taken out (a mirror pod is never run, `IsMirrorPod`), handed
/// to `mirrors` instead, with each `Listed`.
fn without_mirror_pods(
    watch: BoxStream<'static, PodWatchEvent>,
    mirrors: Option<UnboundedSender<PodWatchEvent>>,
) -> BoxStream<'static, PodWatchEvent> {
    watch
        .filter_map(move |event| {
            let mirror = match &event {
                PodWatchEvent::Applied(pod) | PodWatchEvent::Deleted(pod) => {
                    is_mirror_pod(&pod.pod())
                }
                PodWatchEvent::Listed => false,
            };
            if let Some(mirrors) = &mirrors
                && (mirror || event == PodWatchEvent::Listed)
            {
                let _ = mirrors.unbounded_send(event.clone());
            }
            futures::future::ready((!mirror).then_some(event))
        })
        .boxed()
}

/// Reads the path at once, again on a change and every `period`.
async fn follow_files(path: PathBuf, period: Duration, node: String, mut follower: Follower) {
    tracing::info!(path = %path.display(), "Watching path");
    let mut poll = tokio::time::interval(CHANGE_POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let (mut stamp, mut last_read) = (None, None::<tokio::time::Instant>);
    loop {
        poll.tick().await;
        let (path, node) = (path.clone(), node.clone());
        let due = last_read.is_none_or(|at| at.elapsed() >= period);
        let known = stamp.clone();
        let Ok((now_stamp, read)) = tokio::task::spawn_blocking(move || {
            let now_stamp = fingerprint(&path);
            let changed = known.as_ref() != Some(&now_stamp);
            (
                now_stamp,
                (due || changed).then(|| read_static_pods(&path, &node)),
            )
        })
        .await
        else {
            continue;
        };
        stamp = Some(now_stamp);
        let Some(read) = read else {
            continue;
        };
        last_read = Some(tokio::time::Instant::now());
        match read {
            Ok(pods) => {
                if !follower.publish(pods) {
                    return;
                }
            }
            Err(error) => tracing::warn!(%error, "Unable to read config path"),
        }
    }
}

/// Reads the URL at once and `period` after each read ended (the kubelet's `wait.Until`).
async fn follow_url(source: UrlSource, node: String, mut follower: Follower) {
    tracing::info!(url = %source.url, "Watching URL");
    let mut state = url::UrlState::default();
    loop {
        let fetched = url::fetch(&source).await;
        let (read, error) = state.take(fetched, &source.url, &node);
        state.log(error.as_ref());
        if let Some(url::Read::Pods(pods)) = read
            && !follower.publish(pods)
        {
            return;
        }
        tokio::time::sleep(source.period).await;
    }
}

/// Keeps the mirror pods as the static pods and the API's mirror pods say, on every change
/// and every round; a failed call is tried again on the next round.
async fn keep_mirrors(
    api: Arc<dyn ApiPorts>,
    (node, status_manager): (String, Recipient<PodObserved>),
    (sources, mut snapshots): (usize, UnboundedReceiver<Snapshot>),
    mut mirrors: UnboundedReceiver<PodWatchEvent>,
) {
    let observe = |plan: &mut MirrorPlan, event: PodWatchEvent| {
        if let PodWatchEvent::Applied(pod) = &event
            && plan.mirrors_a_static_pod(&pod.pod())
            && let Err(error) = status_manager.try_send(PodObserved { pod: pod.clone() })
        {
            tracing::debug!(%error, "StatusManager not told of a mirror pod; its batch pass is");
        }
        plan.observe(event);
    };
    let mut plan = MirrorPlan::default();
    // Each source's latest pods; `None` until it read once (its mirrors are no orphans yet).
    let mut latest: Vec<Option<Vec<Pod>>> = vec![None; sources];
    let mut take = |plan: &mut MirrorPlan, (index, pods): Snapshot| {
        latest[index] = Some(pods);
        let all_read = latest.iter().all(Option::is_some);
        plan.set_static_pods(latest.iter().flatten().flatten(), all_read);
    };
    let mut round = tokio::time::interval(MIRROR_ROUND);
    round.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut unreachable = false;
    loop {
        tokio::select! {
            snapshot = snapshots.next() => match snapshot {
                Some(snapshot) => take(&mut plan, snapshot),
                None => return,
            },
            event = mirrors.next() => match event {
                Some(event) => observe(&mut plan, event),
                None => return,
            },
            _ = round.tick() => {}
        }
        while let Ok(snapshot) = snapshots.try_recv() {
            take(&mut plan, snapshot);
        }
        while let Ok(event) = mirrors.try_recv() {
            observe(&mut plan, event);
        }
        let actions = plan.actions();
        if actions.is_empty() {
            continue;
        }
        match plan.act(&*api, &node, actions).await {
            Ok(()) => unreachable = false,
            Err(error) if error.is_unreachable() => {
                if !unreachable {
                    tracing::warn!(%error, "mirror pods wait for the API server");
                }
                unreachable = true;
            }
            Err(error @ mirror::MirrorError::NodeNotRegistered) => tracing::debug!(%error),
            Err(error) => tracing::warn!(%error, "mirror pods not reconciled; tried again in 2 s"),
        }
    }
}
