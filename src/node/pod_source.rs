//! The node's one pod source: the API watch of the pods bound here (and, beside it, any other
//! source of pods: static manifests) followed once, on the runtime the node was started on,
//! and handed to every subscriber — the pod lifecycle actor and the volume manager, each
//! instance that starts — as a fresh watch would report it: every pod there is now, `Listed`
//! once every source has listed, then each change.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::{
    StreamExt,
    channel::mpsc::{UnboundedSender, unbounded},
    stream::{BoxStream, select_all},
};
use nodepulse_actors::{
    kept_pod::KeptPod,
    ports::{PodSource, PodWatchEvent},
};
use tokio::task::AbortHandle;

/// What the sources said so far, and who listens.
#[derive(Default)]
struct Fanout {
    /// The pods now, by UID: a late subscriber's start (the sources' `Arc`s, not copies).
    pods: std::collections::BTreeMap<String, KeptPod>,
    /// Per source, whether it has listed.
    listed: Vec<bool>,
    /// Every source ended: a subscriber hears what there is, and its stream ends.
    ended: bool,
    /// futures' channel, as the fleet's shared watch: unbounded, since a node's pod events are
    /// few and each actor drains its stream as it comes.
    subscribers: Vec<UnboundedSender<PodWatchEvent>>,
}

impl Fanout {
    fn all_listed(&self) -> bool {
        self.listed.iter().all(|listed| *listed)
    }

    /// Takes in one source's event; what the subscribers are told of it.
    fn step(&mut self, source: usize, event: PodWatchEvent) -> Option<PodWatchEvent> {
        match &event {
            PodWatchEvent::Applied(pod) => {
                let uid = pod.uid().unwrap_or_default().to_owned();
                self.pods.insert(uid, pod.clone());
            }
            PodWatchEvent::Deleted(pod) => {
                self.pods.remove(pod.uid().unwrap_or_default());
            }
            PodWatchEvent::Listed => {
                self.listed[source] = true;
                // Until every source has listed, a pod missing may just be unread.
                return self.all_listed().then_some(event);
            }
        }
        Some(event)
    }

    fn replay(&self) -> impl Iterator<Item = PodWatchEvent> + '_ {
        self.pods
            .values()
            .map(|pod| PodWatchEvent::Applied(pod.clone()))
            .chain(self.all_listed().then_some(PodWatchEvent::Listed))
    }
}

/// The node's pod source, following its sources until stopped or dropped.
pub struct SharedPodSource {
    fanout: Arc<Mutex<Fanout>>,
    task: AbortHandle,
    /// The tasks that feed a source (the static pods' file and mirror tasks): stopped with it.
    feeders: Vec<AbortHandle>,
}

fn lock(fanout: &Mutex<Fanout>) -> MutexGuard<'_, Fanout> {
    // Updated whole per event; a panic mid-event loses no more than a watch dropping it.
    fanout.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SharedPodSource {
    /// Follows `sources` on the current tokio runtime. Must be called inside one.
    pub fn start(sources: Vec<BoxStream<'static, PodWatchEvent>>) -> Self {
        let fanout = Arc::new(Mutex::new(Fanout {
            listed: vec![false; sources.len()],
            ..Fanout::default()
        }));
        let events = select_all(
            sources
                .into_iter()
                .enumerate()
                .map(|(index, source)| source.map(move |event| (index, event)).boxed()),
        );
        let routing = Arc::clone(&fanout);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some((source, event)) = events.next().await {
                let mut fanout = lock(&routing);
                if let Some(event) = fanout.step(source, event) {
                    fanout
                        .subscribers
                        .retain(|subscriber| subscriber.unbounded_send(event.clone()).is_ok());
                }
            }
            let mut fanout = lock(&routing);
            fanout.ended = true;
            // Their streams end, as a watch's would.
            fanout.subscribers.clear();
        })
        .abort_handle();
        Self {
            fanout,
            task,
            feeders: Vec::new(),
        }
    }

    /// `feeders` stop when the source does.
    #[must_use]
    pub fn stopping_with_it(mut self, feeders: Vec<AbortHandle>) -> Self {
        self.feeders = feeders;
        self
    }

    /// Stops following the sources (the node shuts down).
    pub fn stop(&self) {
        self.task.abort();
        self.feeders.iter().for_each(AbortHandle::abort);
    }
}

impl Drop for SharedPodSource {
    fn drop(&mut self) {
        self.stop();
    }
}

impl PodSource for SharedPodSource {
    fn subscribe(&self) -> BoxStream<'static, PodWatchEvent> {
        let (sender, receiver) = unbounded();
        // Replay and registration under one lock: no event is heard twice or missed.
        let mut fanout = lock(&self.fanout);
        for event in fanout.replay() {
            let _ = sender.unbounded_send(event);
        }
        if !fanout.ended {
            fanout
                .subscribers
                .retain(|subscriber| !subscriber.is_closed());
            fanout.subscribers.push(sender);
        }
        receiver.boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::channel::mpsc::UnboundedReceiver;
    use serde_json::json;

    use super::*;

    fn pod(uid: &str) -> KeptPod {
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(json!({"metadata": {"uid": uid, "name": uid}})).unwrap();
        KeptPod::from(pod)
    }

    fn uid(event: &PodWatchEvent) -> String {
        match event {
            PodWatchEvent::Applied(pod) => format!("+{}", pod.uid().unwrap()),
            PodWatchEvent::Deleted(pod) => format!("-{}", pod.uid().unwrap()),
            PodWatchEvent::Listed => "listed".to_owned(),
        }
    }

    fn source() -> (
        UnboundedSender<PodWatchEvent>,
        BoxStream<'static, PodWatchEvent>,
    ) {
        let (sender, receiver): (_, UnboundedReceiver<_>) = unbounded();
        (sender, receiver.boxed())
    }

    /// What `stream` says within a moment (on paused time: once every task is idle).
    async fn heard(stream: &mut BoxStream<'static, PodWatchEvent>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(Some(event)) =
            tokio::time::timeout(Duration::from_millis(10), stream.next()).await
        {
            out.push(uid(&event));
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn every_subscriber_hears_each_event_and_a_late_one_starts_from_the_pods_now() {
        let (api, api_events) = source();
        let shared = SharedPodSource::start(vec![api_events]);
        let mut first = shared.subscribe();
        api.unbounded_send(PodWatchEvent::Applied(pod("a")))
            .unwrap();
        api.unbounded_send(PodWatchEvent::Applied(pod("b")))
            .unwrap();
        api.unbounded_send(PodWatchEvent::Listed).unwrap();
        assert_eq!(heard(&mut first).await, ["+a", "+b", "listed"]);

        api.unbounded_send(PodWatchEvent::Deleted(pod("a")))
            .unwrap();
        assert_eq!(heard(&mut first).await, ["-a"]);
        // A restarted actor's instance: what a fresh watch would list.
        let mut late = shared.subscribe();
        assert_eq!(heard(&mut late).await, ["+b", "listed"]);
        api.unbounded_send(PodWatchEvent::Applied(pod("c")))
            .unwrap();
        assert_eq!(heard(&mut first).await, ["+c"]);
        assert_eq!(heard(&mut late).await, ["+c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn listed_waits_for_every_source() {
        let (api, api_events) = source();
        let (manifests, manifest_events) = source();
        let shared = SharedPodSource::start(vec![api_events, manifest_events]);
        let mut pods = shared.subscribe();
        api.unbounded_send(PodWatchEvent::Applied(pod("a")))
            .unwrap();
        api.unbounded_send(PodWatchEvent::Listed).unwrap();
        assert_eq!(
            heard(&mut pods).await,
            ["+a"],
            "the manifests are not read yet"
        );
        manifests
            .unbounded_send(PodWatchEvent::Applied(pod("static")))
            .unwrap();
        manifests.unbounded_send(PodWatchEvent::Listed).unwrap();
        assert_eq!(heard(&mut pods).await, ["+static", "listed"]);
    }

    #[tokio::test(start_paused = true)]
    async fn when_the_sources_end_the_streams_end_and_a_stopped_source_says_nothing_more() {
        let (api, api_events) = source();
        let shared = SharedPodSource::start(vec![api_events]);
        let mut pods = shared.subscribe();
        api.unbounded_send(PodWatchEvent::Applied(pod("a")))
            .unwrap();
        drop(api);
        assert_eq!(heard(&mut pods).await, ["+a"]);
        assert!(pods.next().await.is_none(), "the stream ended");
        let mut late = shared.subscribe();
        assert_eq!(heard(&mut late).await, ["+a"]);
        assert!(late.next().await.is_none());

        let (api, api_events) = source();
        let stopped = SharedPodSource::start(vec![api_events]);
        let mut pods = stopped.subscribe();
        stopped.stop();
        tokio::task::yield_now().await;
        let _ = api.unbounded_send(PodWatchEvent::Applied(pod("b")));
        assert!(heard(&mut pods).await.is_empty());
    }
}
