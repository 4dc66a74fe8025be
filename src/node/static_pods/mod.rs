//! Static pods (the kubelet's file source and mirror pods): the manifests in `staticPodPath`
//! are one more stream of the node's one pod source, beside the API watch, which no longer
//! hands on mirror pods (never run); a task per node keeps each static pod's mirror pod in the
//! API. Neither needs the API server to be up for what already runs to keep running: the
//! file source never calls it, and the mirror task only retries.

mod files;
mod manifest;
mod mirror;
mod snapshot;

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
pub use manifest::{ManifestError, static_pod};

/// How often the path is looked at for a change between two full reads (the kubelet's
/// inotify; no inotify crate is in the tree, and a stat of a few files a second costs nothing).
const CHANGE_POLL: Duration = Duration::from_secs(1);
/// How often mirror pods are reconciled when nothing changed (the kubelet's housekeeping).
const MIRROR_ROUND: Duration = Duration::from_secs(2);

/// The static pod source of one node.
pub struct StaticPodSource {
    pub path: PathBuf,
    pub node: String,
    /// `fileCheckFrequency`.
    pub period: Duration,
    /// Where the mirror pods are reported as the API has them: StatusManager, which compares
    /// a static pod's status with its mirror's (a re-created mirror starts without one).
    pub status_manager: Recipient<PodObserved>,
}

/// The node's pod streams: the API watch, without mirror pods, and (with a static pod
/// source) the manifests' pods; and the tasks that follow them, to stop with the pod source.
pub fn pod_streams(
    api: &Arc<dyn ApiPorts>,
    node: &str,
    source: Option<StaticPodSource>,
) -> (Vec<BoxStream<'static, PodWatchEvent>>, Vec<AbortHandle>) {
    let watch = api.watch_pods(node);
    let Some(source) = source else {
        return (vec![without_mirror_pods(watch, None)], Vec::new());
    };
    let (mirror_events, mirror_watch) = unbounded();
    let (events, static_pods) = unbounded();
    let (snapshots, read) = unbounded();
    let (node, status_manager) = (source.node.clone(), source.status_manager.clone());
    let files = tokio::spawn(follow_files(source, events, snapshots)).abort_handle();
    let mirrors = tokio::spawn(keep_mirrors(
        Arc::clone(api),
        (node, status_manager),
        read,
        mirror_watch,
    ))
    .abort_handle();
    (
        vec![
            without_mirror_pods(watch, Some(mirror_events)),
            static_pods.boxed(),
        ],
        vec![files, mirrors],
    )
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
                PodWatchEvent::Applied(pod) | PodWatchEvent::Deleted(pod) => is_mirror_pod(pod),
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

/// Reads the path at once, again on a change and every `period`: the pods' changes go to
/// `events` (`Listed` after the first read), every read's pods to `snapshots`.
async fn follow_files(
    source: StaticPodSource,
    events: UnboundedSender<PodWatchEvent>,
    snapshots: UnboundedSender<Vec<Pod>>,
) {
    tracing::info!(path = %source.path.display(), "Watching path");
    let mut set = StaticPodSet::default();
    let mut poll = tokio::time::interval(CHANGE_POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let (mut stamp, mut last_read, mut listed) = (None, None::<tokio::time::Instant>, false);
    loop {
        poll.tick().await;
        let (path, node) = (source.path.clone(), source.node.clone());
        let due = last_read.is_none_or(|at| at.elapsed() >= source.period);
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
        let pods = match read {
            Ok(pods) => pods,
            Err(error) => {
                tracing::warn!(%error, "Unable to read config path");
                continue;
            }
        };
        let mut changes = set.replace(pods, jiff::Timestamp::now());
        if !listed {
            changes.push(PodWatchEvent::Listed);
            listed = true;
        }
        for change in changes {
            if events.unbounded_send(change).is_err() {
                return;
            }
        }
        let _ = snapshots.unbounded_send(set.pods().cloned().collect());
    }
}

/// Keeps the mirror pods as the static pods and the API's mirror pods say, on every change
/// and every round; a failed call is tried again on the next round.
async fn keep_mirrors(
    api: Arc<dyn ApiPorts>,
    (node, status_manager): (String, Recipient<PodObserved>),
    mut snapshots: UnboundedReceiver<Vec<Pod>>,
    mut mirrors: UnboundedReceiver<PodWatchEvent>,
) {
    let observe = |plan: &mut MirrorPlan, event: PodWatchEvent| {
        if let PodWatchEvent::Applied(pod) = &event
            && plan.mirrors_a_static_pod(pod)
            && let Err(error) = status_manager.try_send(PodObserved { pod: pod.clone() })
        {
            tracing::debug!(%error, "StatusManager not told of a mirror pod; its batch pass is");
        }
        plan.observe(event);
    };
    let mut plan = MirrorPlan::default();
    let mut round = tokio::time::interval(MIRROR_ROUND);
    round.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut unreachable = false;
    loop {
        tokio::select! {
            snapshot = snapshots.next() => match snapshot {
                Some(pods) => plan.set_static_pods(pods.iter()),
                None => return,
            },
            event = mirrors.next() => match event {
                Some(event) => observe(&mut plan, event),
                None => return,
            },
            _ = round.tick() => {}
        }
        while let Ok(pods) = snapshots.try_recv() {
            plan.set_static_pods(pods.iter());
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
