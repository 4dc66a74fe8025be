//! The bench's view of its pods through one watch, as a controller sees them: when each was
//! first Running and when each was gone, so `pods` can time bound → Running and deleted → gone.
//! A re-list (after a watch expired) counts the pods it no longer finds as gone when it ends.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, PoisonError},
    time::Instant,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    runtime::{WatchStreamExt, watcher},
};

/// What the watch has shown so far.
#[derive(Debug, Default)]
pub struct Seen {
    /// The first list has completed: no pod created from now on can be missed.
    synced: bool,
    present: HashSet<String>,
    /// The names a re-list has found so far, until it completes.
    relisting: Option<HashSet<String>>,
    running_at: HashMap<String, Instant>,
    gone_at: HashMap<String, Instant>,
}

impl Seen {
    fn applied(&mut self, pod: &Pod, now: Instant) {
        let Some(name) = pod.metadata.name.clone() else {
            return;
        };
        let running = pod
            .status
            .as_ref()
            .and_then(|status| status.phase.as_deref())
            == Some("Running");
        if running {
            self.running_at.entry(name.clone()).or_insert(now);
        }
        self.gone_at.remove(&name);
        self.present.insert(name);
    }

    fn gone(&mut self, name: String, now: Instant) {
        self.present.remove(&name);
        self.gone_at.entry(name).or_insert(now);
    }

    pub fn apply(&mut self, event: watcher::Event<Pod>, now: Instant) {
        match event {
            watcher::Event::Init => self.relisting = Some(HashSet::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some(listed), Some(name)) = (&mut self.relisting, &pod.metadata.name) {
                    listed.insert(name.clone());
                }
                self.applied(&pod, now);
            }
            watcher::Event::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                let vanished: Vec<String> = self.present.difference(&listed).cloned().collect();
                for name in vanished {
                    self.gone(name, now);
                }
                self.synced = true;
            }
            watcher::Event::Apply(pod) => self.applied(&pod, now),
            watcher::Event::Delete(pod) => {
                if let Some(name) = pod.metadata.name {
                    self.gone(name, now);
                }
            }
        }
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn running(&self) -> usize {
        self.running_at.len()
    }

    pub fn present(&self) -> usize {
        self.present.len()
    }

    /// Seconds from `since` to each pod's first Running.
    pub fn running_after(&self, since: Instant) -> Vec<f64> {
        after(self.running_at.values(), since)
    }

    /// Seconds from `since` to each pod's disappearance.
    pub fn gone_after(&self, since: Instant) -> Vec<f64> {
        after(self.gone_at.values(), since)
    }

    /// Seconds from each pod's own instant in `since` (when its create was answered, say) to
    /// its first Running; a pod missing from either is left out.
    pub fn running_since_each(&self, since: &HashMap<String, Instant>) -> Vec<f64> {
        since
            .iter()
            .filter_map(|(name, start)| {
                let running = self.running_at.get(name)?;
                Some(running.saturating_duration_since(*start).as_secs_f64())
            })
            .collect()
    }

    /// When the last of the pods seen Running first was.
    pub fn last_running(&self) -> Option<Instant> {
        self.running_at.values().max().copied()
    }

    /// When the last of the pods seen gone went.
    pub fn last_gone(&self) -> Option<Instant> {
        self.gone_at.values().max().copied()
    }
}

fn after<'a>(times: impl Iterator<Item = &'a Instant>, since: Instant) -> Vec<f64> {
    times
        .map(|at| at.saturating_duration_since(since).as_secs_f64())
        .collect()
}

/// A watch of the pods `selector` picks, folded into `Seen` until dropped.
pub struct PodWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodWatch {
    pub fn start(pods: Api<Pod>, selector: &str) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = Arc::clone(&seen);
        let events = watcher(pods, watcher::Config::default().labels(selector)).default_backoff();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            // An error is retried by the backoff; the stream ends only when dropped.
            while let Some(event) = events.next().await {
                if let Ok(event) = event {
                    shared
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .apply(event, Instant::now());
                }
            }
        });
        Self { seen, task }
    }

    /// Reads what has been seen.
    pub fn with<T>(&self, read: impl FnOnce(&Seen) -> T) -> T {
        read(&self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "status": {"phase": phase}
        }))
        .expect("a pod")
    }

    #[test]
    fn running_is_timed_once_and_a_relist_counts_the_missing_as_gone() {
        let start = Instant::now();
        let later = start + std::time::Duration::from_secs(2);
        let mut seen = Seen::default();
        seen.apply(watcher::Event::Init, start);
        seen.apply(watcher::Event::InitDone, start);
        assert!(seen.synced());
        seen.apply(watcher::Event::Apply(pod("a", "Pending")), start);
        seen.apply(watcher::Event::Apply(pod("b", "Running")), start);
        seen.apply(watcher::Event::Apply(pod("a", "Running")), later);
        seen.apply(watcher::Event::Apply(pod("b", "Running")), later);
        assert_eq!((seen.running(), seen.present()), (2, 2));
        let mut running = seen.running_after(start);
        running.sort_by(f64::total_cmp);
        assert_eq!(running, vec![0.0, 2.0]);

        // The watch expired; the re-list finds only `a`, then `a` is deleted.
        seen.apply(watcher::Event::Init, later);
        seen.apply(watcher::Event::InitApply(pod("a", "Running")), later);
        seen.apply(watcher::Event::InitDone, later);
        assert_eq!(seen.present(), 1);
        seen.apply(watcher::Event::Delete(pod("a", "Running")), later);
        assert_eq!(seen.present(), 0);
        assert_eq!(seen.gone_after(start), vec![2.0, 2.0]);
        assert_eq!(seen.last_gone(), Some(later));
    }

    #[test]
    fn each_pod_is_timed_from_its_own_create() {
        let start = Instant::now();
        let at = |millis: u64| start + std::time::Duration::from_millis(millis);
        let mut seen = Seen::default();
        seen.apply(watcher::Event::Apply(pod("a", "Running")), at(300));
        seen.apply(watcher::Event::Apply(pod("b", "Pending")), at(400));
        seen.apply(watcher::Event::Apply(pod("b", "Running")), at(900));
        seen.apply(watcher::Event::Apply(pod("c", "Running")), at(50));
        // `c` was not created by this run, `d` never ran: neither is timed.
        let created: HashMap<String, Instant> = [("a", at(100)), ("b", at(200)), ("d", at(0))]
            .into_iter()
            .map(|(name, when)| (name.to_owned(), when))
            .collect();
        let mut times = seen.running_since_each(&created);
        times.sort_by(f64::total_cmp);
        assert_eq!(times, vec![0.2, 0.7]);
        assert_eq!(seen.last_running(), Some(at(900)));
        assert_eq!(seen.last_gone(), None);
    }
}
