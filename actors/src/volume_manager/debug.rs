//! What `GET /debug/actors/volume-manager` shows (the debug endpoint's `/debug/volumes` reads
//! the same): per pod, each volume the pod wants and each one set up, with why it is where it
//! is — mounted, set up again after a restart, backing off after an error, waiting for attach,
//! a claim being resolved — and the CSI volumes staged on the node.

use std::collections::{BTreeMap, BTreeSet};

use nodepulse_supervisor::Kept;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{MountState, Plugin, actor::VolumeManagerSettings, memory::VolumeManagerMemory};

pub fn describe(
    memory: &Kept<VolumeManagerMemory>,
    settings: &VolumeManagerSettings,
    (in_flight, fetching): (&BTreeSet<(String, String)>, usize),
    host: Value,
    (passes, operations): (u64, u64),
) -> Value {
    let now = Instant::now();
    memory.update(|m| {
        let desired = m.desired(&settings.node_name);
        let mut pods: BTreeMap<String, Value> = BTreeMap::new();
        for (uid, pod) in &desired.pods {
            let volumes: BTreeMap<&String, Value> = pod
                .volumes
                .iter()
                .map(|(name, volume)| {
                    let key = (uid.clone(), name.clone());
                    let mounted = m.actual.mounts.get(&key);
                    let failure = m.failures.get(&key);
                    let why = match (mounted.map(|v| v.state), failure) {
                        _ if in_flight.contains(&key) && volume.plugin == Plugin::Csi => {
                            "setting up: staging and publishing through the CSI driver".to_owned()
                        }
                        _ if in_flight.contains(&key) => "setting up: fetching its sources".to_owned(),
                        (_, Some(f)) => format!(
                            "SetUp failed ({} times): {}; retrying in {:.1}s",
                            f.failures,
                            f.error,
                            f.retry_at.saturating_duration_since(now).as_secs_f64()
                        ),
                        (Some(MountState::Mounted), None) => "mounted".to_owned(),
                        (Some(MountState::Uncertain), None) => {
                            "found on disk after a restart: set up again before use".to_owned()
                        }
                        (None, None) if volume.attachable && !m.volumes_attached.contains(&volume.unique_name) => {
                            "waiting for the attach/detach controller to list it in volumesAttached".to_owned()
                        }
                        (None, None)
                            if settings.fetch_waits(volume.plugin, fetching) =>
                        {
                            format!("waiting to fetch its sources: {fetching} volumes are fetching (at most that many at once)")
                        }
                        (None, None) => "to be set up at the next pass".to_owned(),
                    };
                    (
                        name,
                        json!({
                            "plugin": volume.plugin.name(),
                            "uniqueName": volume.unique_name.as_str(),
                            "attachable": volume.attachable,
                            "state": why,
                            "setUpSecondsAgo": mounted.and_then(|v| v.set_up_at).map(|at| now.saturating_duration_since(at).as_secs_f64()),
                        }),
                    )
                })
                .collect();
            pods.insert(
                uid.clone(),
                json!({
                    "pod": format!("{}/{}", pod.namespace, pod.name),
                    "desired": volumes,
                    "errors": pod.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "claimsBeingResolved": pod.unresolved,
                }),
            );
        }
        for ((uid, name), volume) in &m.actual.mounts {
            if desired.wants(uid, name) {
                continue;
            }
            let why = if desired.populated {
                "no pod wants it: being torn down"
            } else {
                "kept: the pod list is not complete yet, so nothing is torn down"
            };
            let entry = pods.entry(uid.clone()).or_insert_with(|| json!({"desired": {}}));
            entry["notDesired"][name] = json!({
                "plugin": volume.plugin.name(),
                "state": why,
                "uncertain": volume.state == MountState::Uncertain,
            });
        }
        for uid in &m.actual.pod_dirs {
            let entry = pods.entry(uid.clone()).or_insert_with(|| json!({"desired": {}}));
            entry["podDir"] = json!(match m.pod_dir_failures.get(uid) {
                Some(error) => format!("present; removal failed: {error}"),
                None if desired.pods.contains_key(uid) => "present".to_owned(),
                None => "present: removed once nothing of the pod is set up".to_owned(),
            });
        }
        json!({
            "node": settings.node_name,
            "rootDir": settings.dirs.root_dir(),
            "syncPeriodSeconds": settings.sync_period.as_secs_f64(),
            "fetchesAtOnce": settings.fetches_at_once,
            "fetching": fetching,
            "podListComplete": m.listed,
            "reconstructed": m.reconstructed,
            "reconcilerSynced": m.synced,
            "volumesAttached": m.volumes_attached.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            "tokens": m.tokens.len(),
            "csiStaged": m.actual.devices.keys().map(|v| v.as_str()).collect::<Vec<_>>(),
            "passes": passes,
            "operations": operations,
            "host": host,
            "pods": pods,
        })
    })
}
