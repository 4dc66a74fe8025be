//! The `simulated` pod lifecycle provider, for nodes that run no containers (as kwok does): a
//! bound pod goes Pending → Running with every container running and ready, an address from the
//! node's pod CIDR (the host's for `hostNetwork` pods), `hostIP` and `startTime`; a pod with
//! `restartPolicy: Never` and a scripted exit (see [`annotations`](super::annotations)) ends
//! Succeeded or Failed; a pod given a `deletionTimestamp` has its containers stopped (exit 0)
//! and is finished; an evicted pod's containers are killed (exit 137) and it ends Failed with
//! the eviction's reason. Pure: time is an argument, and nothing here talks to the API.

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    sync::Arc,
};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::{
    annotations,
    ip_pool::{Cidr, IpPool},
    provider::{PodLifecycleProvider, PodUpdate},
    simulated_status::{Placement, Stage, container_id, simulated_status},
};
use crate::{
    kept_pod::KeptPod,
    messages::StopPod,
    ports::{ContainerStats, PodStats},
    shrink::map_after_removal,
    volume_manager::PodVolumeView,
    volume_manager::volumes_ready,
};

/// The exit code of a container killed by SIGKILL.
const KILLED: i32 = 137;

#[derive(Debug, Clone)]
pub struct SimulatedSettings {
    /// The node's address, for `hostIP` and `hostNetwork` pods.
    pub host_ip: Option<IpAddr>,
    /// Addresses come from here until the Node has a `spec.podCIDR`.
    pub fallback_cidr: Cidr,
}

#[derive(Debug, Clone)]
struct SimulatedPod {
    /// The watch's pod, shared with StatusManager (never a copy of its own), and decoded only
    /// when its status changes: what the timers ask of it is read off once, below.
    pod: KeptPod,
    host_network: bool,
    /// Its scripted exit (see [`annotations`]): the exit code, and when after the start.
    scripted_exit: Option<(i32, std::time::Duration)>,
    stage: Stage,
    placement: Placement,
    /// Our own address (not the host's): given back when the pod is gone.
    owned_ip: Option<IpAddr>,
    /// TerminatePod was sent; once is enough.
    terminated_sent: bool,
    /// The pod's `metadata.generation` as last seen: a new one is a spec change, which the
    /// kubelet syncs (its status then observes the new generation).
    generation: Option<i64>,
}

pub struct SimulatedPods {
    settings: SimulatedSettings,
    pool: IpPool,
    pods: HashMap<String, SimulatedPod>,
    /// The volume manager's verdicts: a pod's containers start only once its volumes are set
    /// up. `None` on nodes without a volume manager.
    volumes: Option<Arc<dyn PodVolumeView>>,
}

fn uid(pod: &Pod) -> Option<&str> {
    pod.metadata.uid.as_deref()
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.host_network)
        .unwrap_or(false)
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status
            .as_ref()
            .and_then(|status| status.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// When a running pod's scripted exit is due, if it has one.
fn scripted_exit_due(sim: &SimulatedPod) -> Option<Timestamp> {
    let (_, after) = sim.scripted_exit?;
    let after = SignedDuration::try_from(after).ok()?;
    sim.placement.started_at.checked_add(after).ok()
}

fn first_container(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.containers.first())
        .map(|container| container.name.clone())
        .unwrap_or_default()
}

impl SimulatedPods {
    pub fn new(settings: SimulatedSettings) -> Self {
        Self {
            pool: IpPool::new(settings.fallback_cidr),
            settings,
            pods: HashMap::new(),
            volumes: None,
        }
    }

    /// Pods held, the table slots they take and addresses in use: zero each once every pod
    /// is deleted.
    pub fn footprint(&self) -> (usize, usize, usize) {
        (self.pods.len(), self.pods.capacity(), self.pool.in_use())
    }

    /// Waits for `volumes` to say a pod's volumes are set up before starting its containers.
    #[must_use]
    pub fn with_volumes(mut self, volumes: Arc<dyn PodVolumeView>) -> Self {
        self.volumes = Some(volumes);
        self
    }

    /// Whether the pod's volumes are set up (the kubelet's WaitForAttachAndMount). A pod the
    /// volume manager has not seen yet waits unless it mounts nothing at all.
    fn volumes_ready(&self, uid: &str) -> bool {
        let (Some(volumes), Some(sim)) = (&self.volumes, self.pods.get(uid)) else {
            return true;
        };
        volumes_ready(volumes.as_ref(), &sim.pod.pod())
    }

    fn status_update(&self, uid: &str) -> Option<PodUpdate> {
        let sim = self.pods.get(uid)?;
        Some(PodUpdate::Status {
            pod: sim.pod.clone(),
            status: Box::new(simulated_status(&sim.pod.pod(), &sim.stage, &sim.placement)),
        })
    }

    /// Gives the pod an address if it has none yet; whether it has one now.
    fn place(&mut self, uid: &str) -> bool {
        let host_ip = self.settings.host_ip.map(|ip| ip.to_string());
        let Some(sim) = self.pods.get_mut(uid) else {
            return false;
        };
        if sim.placement.pod_ip.is_some() {
            return true;
        }
        if sim.host_network {
            sim.placement.pod_ip = host_ip;
            return sim.placement.pod_ip.is_some();
        }
        match self.pool.allocate() {
            Some(ip) => {
                sim.owned_ip = Some(ip);
                sim.placement.pod_ip = Some(ip.to_string());
                true
            }
            None => {
                tracing::warn!(pod = ?sim.pod.pod().metadata.name, cidr = %self.pool.cidr(), "no free pod address; the pod stays Pending");
                false
            }
        }
    }

    /// Pending → Running once placed; then a due scripted exit.
    fn advance(&mut self, uid: &str, now: Timestamp) -> Vec<PodUpdate> {
        let mut updates = Vec::new();
        let Some(stage) = self.pods.get(uid).map(|sim| sim.stage.clone()) else {
            return updates;
        };
        if stage == Stage::Pending && self.volumes_ready(uid) && self.place(uid) {
            if let Some(sim) = self.pods.get_mut(uid) {
                sim.stage = Stage::Running;
            }
            updates.extend(self.status_update(uid));
        }
        let Some(sim) = self.pods.get(uid) else {
            return updates;
        };
        if sim.stage == Stage::Running
            && let Some((code, _)) = sim.scripted_exit
            && scripted_exit_due(sim).is_some_and(|due| due <= now)
        {
            updates.extend(self.finish(uid, code, None, now));
        }
        updates
    }

    /// Every container ends with `exit_code`; the final status, then TerminatePod.
    fn finish(
        &mut self,
        uid: &str,
        exit_code: i32,
        ended: Option<(String, String)>,
        now: Timestamp,
    ) -> Vec<PodUpdate> {
        let Some(sim) = self.pods.get_mut(uid) else {
            return Vec::new();
        };
        if matches!(sim.stage, Stage::Finished { .. }) {
            return Vec::new();
        }
        sim.stage = Stage::Finished {
            at: now,
            exit_code,
            ended,
        };
        let mut updates: Vec<PodUpdate> = self.status_update(uid).into_iter().collect();
        updates.extend(self.terminated(uid));
        updates
    }

    fn terminated(&mut self, uid: &str) -> Option<PodUpdate> {
        let sim = self.pods.get_mut(uid)?;
        if sim.terminated_sent {
            return None;
        }
        sim.terminated_sent = true;
        Some(PodUpdate::Terminated {
            pod: sim.pod.clone(),
        })
    }

    /// A pod first seen: adopted as it is when the API shows it running or finished (a
    /// restart of nodepulse), otherwise started.
    fn adopt_or_start(&mut self, uid: &str, kept: &KeptPod, now: Timestamp) -> Vec<PodUpdate> {
        let pod = &kept.pod();
        let status = pod.status.clone().unwrap_or_default();
        let host_ip = self.settings.host_ip.map(|ip| ip.to_string());
        let started_at = status.start_time.as_ref().map_or(now, |time| time.0);
        let mut sim = SimulatedPod {
            pod: kept.clone(),
            host_network: host_network(pod),
            scripted_exit: annotations::scripted_exit(pod),
            stage: Stage::Pending,
            placement: Placement {
                host_ip,
                pod_ip: None,
                started_at: Timestamp::from_second(started_at.as_second()).unwrap_or(started_at),
                unready: annotations::unready_containers(pod),
            },
            owned_ip: None,
            terminated_sent: false,
            generation: pod.metadata.generation,
        };
        let running_here = status.phase.as_deref() == Some("Running") && status.pod_ip.is_some();
        if is_terminal(pod) {
            // Finished before this process knew it: nothing runs, nothing to report.
            sim.stage = Stage::Finished {
                at: now,
                exit_code: 0,
                ended: None,
            };
            self.pods.insert(uid.to_owned(), sim);
            return if pod.metadata.deletion_timestamp.is_some() {
                self.terminated(uid).into_iter().collect()
            } else {
                Vec::new()
            };
        }
        if running_here {
            let ip = status.pod_ip.clone().unwrap_or_default();
            if !host_network(pod)
                && let Ok(address) = ip.parse::<IpAddr>()
            {
                self.pool.claim(address);
                sim.owned_ip = Some(address);
            }
            sim.placement.pod_ip = Some(ip);
            sim.stage = Stage::Running;
        }
        self.pods.insert(uid.to_owned(), sim);
        let mut updates: Vec<PodUpdate> = self.status_update(uid).into_iter().collect();
        updates.extend(self.advance(uid, now));
        updates
    }

    /// Readiness flips of a running pod, as its annotation now says.
    fn readiness(&mut self, uid: &str) -> Vec<PodUpdate> {
        let Some(sim) = self.pods.get_mut(uid) else {
            return Vec::new();
        };
        let pod = sim.pod.pod();
        let unready = annotations::unready_containers(&pod);
        if unready == sim.placement.unready {
            return Vec::new();
        }
        let flipped: Vec<(String, bool)> = pod
            .spec
            .iter()
            .flat_map(|spec| spec.containers.iter())
            .map(|container| container.name.clone())
            .filter(|name| unready.contains(name) != sim.placement.unready.contains(name))
            .map(|name| {
                let ready = !unready.contains(&name);
                (name, ready)
            })
            .collect();
        sim.placement.unready = unready;
        if sim.stage != Stage::Running {
            return Vec::new();
        }
        flipped
            .into_iter()
            .map(|(name, ready)| PodUpdate::Readiness {
                pod_uid: uid.to_owned(),
                container_id: container_id(&pod, &name),
                ready,
            })
            .collect()
    }
}

impl PodLifecycleProvider for SimulatedPods {
    fn pod_applied(&mut self, kept: &KeptPod, now: Timestamp) -> Vec<PodUpdate> {
        let Some(uid) = kept.uid().map(str::to_owned) else {
            return Vec::new();
        };
        let pod = kept.pod();
        let mut updates = match self.pods.get_mut(&uid) {
            None => self.adopt_or_start(&uid, kept, now),
            Some(sim) => {
                sim.pod = kept.clone();
                sim.host_network = host_network(&pod);
                sim.scripted_exit = annotations::scripted_exit(&pod);
                let respec = sim.generation != pod.metadata.generation
                    && !matches!(sim.stage, Stage::Finished { .. });
                sim.generation = pod.metadata.generation;
                let mut updates = self.readiness(&uid);
                if respec {
                    updates.extend(self.status_update(&uid));
                }
                updates.extend(self.advance(&uid, now));
                updates
            }
        };
        if pod.metadata.deletion_timestamp.is_some() {
            // Deleted: the containers stop (a graceful stop exits 0) and the pod is finished.
            updates.extend(self.finish(&uid, 0, None, now));
            updates.extend(self.terminated(&uid));
        }
        updates
    }

    fn pod_deleted(&mut self, pod: &Pod) {
        let Some(sim) = uid(pod).and_then(|uid| self.pods.remove(uid)) else {
            return;
        };
        map_after_removal(&mut self.pods);
        if let Some(ip) = sim.owned_ip {
            self.pool.release(ip);
        }
    }

    fn tick(&mut self, now: Timestamp) -> Vec<PodUpdate> {
        let waiting: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, sim)| {
                sim.stage == Stage::Pending
                    || (sim.stage == Stage::Running && sim.scripted_exit.is_some())
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        waiting
            .into_iter()
            .flat_map(|uid| self.advance(&uid, now))
            .collect()
    }

    fn volumes_changed(&mut self, pod_uid: &str, now: Timestamp) -> Vec<PodUpdate> {
        let pending = self
            .pods
            .get(pod_uid)
            .is_some_and(|sim| sim.stage == Stage::Pending);
        if pending {
            self.advance(pod_uid, now)
        } else {
            Vec::new()
        }
    }

    /// The earliest scripted exit of a running pod; at once for a pending pod that can be
    /// given an address now (one was freed, or the pod CIDR changed) and whose volumes are set
    /// up. A pending pod waiting for a free address or for its volumes (the volume manager's
    /// `PodVolumesChanged` brings it back), and every other pod, waits for an event instead: a
    /// tick cannot start it, so one due at once would be ticked again and again.
    fn next_wakeup(&self) -> Option<Timestamp> {
        let can_place = |sim: &SimulatedPod| {
            if sim.host_network {
                self.settings.host_ip.is_some()
            } else {
                self.pool.has_free()
            }
        };
        self.pods
            .iter()
            .filter_map(|(uid, sim)| match sim.stage {
                Stage::Pending => {
                    (can_place(sim) && self.volumes_ready(uid)).then_some(sim.placement.started_at)
                }
                Stage::Running => scripted_exit_due(sim),
                Stage::Finished { .. } => None,
            })
            .min()
    }

    fn stop_pod(&mut self, stop: &StopPod, now: Timestamp) -> Vec<PodUpdate> {
        let ended = Some((stop.reason.clone(), stop.message.clone()));
        self.finish(&stop.uid, KILLED, ended, now)
    }

    fn set_pod_cidrs(&mut self, cidrs: &str, now: Timestamp) -> Vec<PodUpdate> {
        let Some(first) = cidrs
            .split(',')
            .map(str::trim)
            .find(|cidr| !cidr.is_empty())
        else {
            return Vec::new();
        };
        match Cidr::parse(first) {
            Ok(cidr) => self.pool.set_cidr(cidr),
            Err(error) => {
                tracing::warn!(%error, "the Node's pod CIDR is unusable; keeping the previous one");
                return Vec::new();
            }
        }
        self.tick(now)
    }

    fn active_pods(&self) -> Vec<PodStats> {
        self.pods
            .values()
            .filter(|sim| !matches!(sim.stage, Stage::Finished { .. }))
            .map(|sim| {
                let pod = sim.pod.pod();
                let first = first_container(&pod);
                let memory: BTreeMap<String, u64> = annotations::memory_usage(&pod, &first)
                    .into_iter()
                    .collect();
                let storage: BTreeMap<String, u64> = annotations::storage_usage(&pod, &first)
                    .into_iter()
                    .collect();
                let containers = pod
                    .spec
                    .iter()
                    .flat_map(|spec| spec.containers.iter())
                    .map(|container| ContainerStats {
                        name: container.name.clone(),
                        memory_bytes: memory.get(&container.name).copied().unwrap_or(0),
                        ephemeral_storage_bytes: storage.get(&container.name).copied().unwrap_or(0),
                    })
                    .collect();
                PodStats {
                    containers: Some(containers),
                    processes: Some(annotations::processes(&pod).unwrap_or(0)),
                    storage: None,
                    pod,
                }
            })
            .collect()
    }

    fn debug_state(&self) -> serde_json::Value {
        let mut stages: BTreeMap<&str, usize> = BTreeMap::new();
        for sim in self.pods.values() {
            let stage = match sim.stage {
                Stage::Pending => "pending",
                Stage::Running => "running",
                Stage::Finished { .. } => "finished",
            };
            *stages.entry(stage).or_default() += 1;
        }
        json!({
            "provider": "simulated",
            "pods": stages,
            "podCIDR": self.pool.cidr(),
            "addressesInUse": self.pool.in_use(),
            "hostIP": self.settings.host_ip,
        })
    }
}
