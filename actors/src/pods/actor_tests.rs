//! PodLifecycleActor on paused tokio time: its one wake-up timer is measured with the wall
//! clock it was given, so a due time re-armed after tokio's clock moved fires on time.

use crate::kept_pod::KeptPod;
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use actix::Actor;
use futures::{StreamExt, channel::mpsc, future::BoxFuture, stream::BoxStream};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::mailbox;
use serde_json::{Value, json};

use super::{PodLifecycleActor, PodLifecycleSettings, PodLifecycleState, PodUpdate};
use crate::{
    messages::StopPod,
    pods::PodLifecycleProvider,
    ports::{ApiError, ApiResult, PodApi, PodEvent, PodStats, PodWatchEvent, fakes},
};

/// A provider due once at `due`; it records when it was ticked.
struct DueOnce {
    due: Timestamp,
    ticks: Arc<Mutex<Vec<Timestamp>>>,
}

impl PodLifecycleProvider for DueOnce {
    fn pod_applied(&mut self, _: &KeptPod, _: Timestamp) -> Vec<PodUpdate> {
        Vec::new()
    }
    fn pod_deleted(&mut self, _: &Pod) {}
    fn tick(&mut self, now: Timestamp) -> Vec<PodUpdate> {
        if now >= self.due {
            self.ticks.lock().unwrap().push(now);
        }
        Vec::new()
    }
    fn next_wakeup(&self) -> Option<Timestamp> {
        self.ticks.lock().unwrap().is_empty().then_some(self.due)
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
    fn debug_state(&self) -> Value {
        json!({})
    }
}

/// A pod API whose watch says what the test sends.
struct Watch(Mutex<Option<mpsc::UnboundedReceiver<PodWatchEvent>>>);

impl PodApi for Watch {
    fn get_pod(&self, _: &str, name: &str) -> BoxFuture<'static, ApiResult<Pod>> {
        let error = ApiError::NotFound(name.to_owned());
        Box::pin(async move { Err(error) })
    }
    fn patch_pod_status(
        &self,
        _: &str,
        name: &str,
        _: Value,
    ) -> BoxFuture<'static, ApiResult<Pod>> {
        let error = ApiError::NotFound(name.to_owned());
        Box::pin(async move { Err(error) })
    }
    fn delete_pod(&self, _: &str, _: &str, _: &str) -> BoxFuture<'static, ApiResult<()>> {
        Box::pin(async { Ok(()) })
    }
    fn watch_pods(&self, _: &str) -> BoxStream<'static, PodWatchEvent> {
        let events = self.0.lock().unwrap().take().expect("one watch");
        events.boxed()
    }
    fn record_pod_event(&self, _: &Pod, _: PodEvent) -> BoxFuture<'static, ApiResult<()>> {
        Box::pin(async { Ok(()) })
    }
}

#[actix_rt::test]
async fn a_wake_up_re_armed_after_tokio_time_moved_fires_at_its_due_time() {
    tokio::time::pause();
    let clock = fakes::paused_wall_clock();
    let start = clock();
    let ticks = Arc::new(Mutex::new(Vec::new()));
    let provider = DueOnce {
        due: start + SignedDuration::from_secs(10),
        ticks: Arc::clone(&ticks),
    };
    let (events, watch) = mpsc::unbounded();
    let (status_manager, _inbox) = mailbox(16);
    let _actor = PodLifecycleActor::new(
        PodLifecycleSettings {
            node_name: "worker-1".to_owned(),
        },
        Arc::new(Watch(Mutex::new(Some(watch)))),
        Arc::new(PodLifecycleState::new(provider)),
        status_manager,
    )
    .with_wall_clock(Arc::clone(&clock))
    .start();

    tokio::time::sleep(Duration::from_secs(5)).await;
    // Any event sets the timer again, from what is left of the wait.
    events.unbounded_send(PodWatchEvent::Listed).unwrap();
    tokio::time::sleep(Duration::from_millis(5100)).await;
    let ticks = ticks.lock().unwrap().clone();
    assert_eq!(ticks.len(), 1, "ticked once, at 10 s");
    let late = ticks[0].duration_since(start) - SignedDuration::from_secs(10);
    assert!(late < SignedDuration::from_millis(200), "{late:?} late");
}
