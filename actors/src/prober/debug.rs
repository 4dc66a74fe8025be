//! The prober's workers as `/debug/probes` shows them: pod, container, kind, last result,
//! consecutive successes and failures, the published result and when the next probe runs
//! (wall-clock time, as the rest of the debug endpoint). Pure formatting of a snapshot.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    manager::WorkerKey,
    worker::{ProbeResult, WorkerMemory},
};

fn result_name(result: Option<ProbeResult>) -> &'static str {
    match result {
        Some(ProbeResult::Success) => "Success",
        Some(ProbeResult::Failure) => "Failure",
        None => "Unknown",
    }
}

/// One JSON object per worker, in key order; `pods` names each pod by its UID; `wall` is the
/// wall time now.
pub fn workers_json(
    workers: &[(WorkerKey, WorkerMemory)],
    pods: &BTreeMap<String, ObjectMeta>,
    wall: Timestamp,
) -> Vec<Value> {
    let now = Instant::now();
    workers
        .iter()
        .map(|(key, memory)| {
            let meta = pods.get(&key.pod_uid);
            let next_run = memory.next_run.map(|at| {
                let wait = SignedDuration::try_from(at.saturating_duration_since(now))
                    .unwrap_or(SignedDuration::ZERO);
                wall.checked_add(wait).unwrap_or(wall).to_string()
            });
            json!({
                "podUID": key.pod_uid,
                "namespace": meta.and_then(|m| m.namespace.clone()),
                "pod": meta.and_then(|m| m.name.clone()),
                "container": key.container,
                "containerID": memory.container_id,
                "kind": key.kind.title(),
                "lastResult": memory.last_result.map(|r| result_name(Some(r))),
                "published": result_name(memory.published),
                "consecutiveSuccesses": memory.consecutive_successes,
                "consecutiveFailures": memory.consecutive_failures,
                "held": memory.held,
                "nextRun": next_run,
            })
        })
        .collect()
}
