//! A provider whose start fails: the node is told why (the health check), the start is tried
//! again with back-off, and the started provider gets the pods reported meanwhile.

use crate::kept_pod::KeptPod;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tokio::time::Instant;

use super::{PodLifecycleProvider, StartError, StartingProvider};
use crate::{
    messages::StopPod,
    pods::provider::PodUpdate,
    ports::{HealthCheck, PodStats},
};

/// A provider that records what it is told.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Recorder {
    fn said(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn note(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }
}

impl PodLifecycleProvider for Recorder {
    fn pod_applied(&mut self, pod: &KeptPod, _: Timestamp) -> Vec<PodUpdate> {
        self.note(format!(
            "applied {}",
            pod.pod().metadata.name.clone().unwrap()
        ));
        Vec::new()
    }
    fn pod_deleted(&mut self, _: &Pod) {}
    fn pods_listed(&mut self) {
        self.note("listed".to_owned());
    }
    fn tick(&mut self, _: Timestamp) -> Vec<PodUpdate> {
        Vec::new()
    }
    fn next_wakeup(&self) -> Option<Timestamp> {
        None
    }
    fn stop_pod(&mut self, _: &StopPod, _: Timestamp) -> Vec<PodUpdate> {
        Vec::new()
    }
    fn set_pod_cidrs(&mut self, _: &str, _: Timestamp) -> Vec<PodUpdate> {
        Vec::new()
    }
    fn active_pods(&self) -> Vec<PodStats> {
        Vec::new()
    }
    fn debug_state(&self) -> serde_json::Value {
        json!({"provider": "recorder"})
    }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "uid": format!("uid-{name}")}}))
        .unwrap()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::UNIX_EPOCH + SignedDuration::from_secs(1_800_000_000 + seconds)
}

#[test]
fn a_failed_start_is_unhealthy_retried_with_back_off_and_then_gets_the_pods_seen_meanwhile() {
    let recorder = Recorder::default();
    let fails = Arc::new(Mutex::new(2));
    let (provider, left) = (recorder.clone(), Arc::clone(&fails));
    let start = Box::new(
        move || -> Result<Box<dyn PodLifecycleProvider>, StartError> {
            let mut left = left.lock().unwrap();
            if *left > 0 {
                *left -= 1;
                return Err("error creating pod logs root directory \"/x\": it is a file".into());
            }
            Ok(Box::new(provider.clone()))
        },
    );
    let mut starting = StartingProvider::new("CRI pod provider", start, at(0));
    let health = starting.health();
    assert_eq!(
        health.unhealthy(Instant::now()).as_deref(),
        Some("cannot start: error creating pod logs root directory \"/x\": it is a file")
    );
    assert_eq!(starting.debug_state()["failedStarts"], 1);
    assert_eq!(starting.next_wakeup(), Some(at(1)), "tried again in 1 s");

    starting.pod_applied(&KeptPod::from(pod("gone")), at(0));
    starting.pod_applied(&KeptPod::from(pod("web")), at(0));
    starting.pod_deleted(&pod("gone"));
    starting.pods_listed();
    starting.tick(at(0));
    assert_eq!(
        starting.next_wakeup(),
        Some(at(1)),
        "not due yet: no attempt"
    );
    starting.tick(at(1));
    assert_eq!(starting.next_wakeup(), Some(at(3)), "then in 2 s");
    assert!(health.unhealthy(Instant::now()).is_some());
    assert!(recorder.said().is_empty());

    starting.tick(at(3));
    assert_eq!(health.unhealthy(Instant::now()), None, "started: healthy");
    assert_eq!(recorder.said(), ["applied web", "listed"]);
    assert_eq!(starting.debug_state()["provider"], "recorder");
    starting.pod_applied(&KeptPod::from(pod("next")), at(4));
    assert_eq!(
        recorder.said().last().map(String::as_str),
        Some("applied next")
    );
}

#[test]
fn a_stopped_node_tries_no_more_starts() {
    let start =
        Box::new(|| -> Result<Box<dyn PodLifecycleProvider>, StartError> { Err("no".into()) });
    let mut starting = StartingProvider::new("CRI pod provider", start, at(0));
    starting.stop();
    assert_eq!(starting.next_wakeup(), None);
    starting.tick(at(60));
    assert_eq!(starting.debug_state()["failedStarts"], 1);
}
