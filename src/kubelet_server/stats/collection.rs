//! The node's containers as their cgroups report them: one collection at most every
//! `housekeepingInterval` (cAdvisor's housekeeping), shared by every reader — the pods of
//! `/stats/summary` and `/metrics/resource`, and `/metrics/cadvisor` — so a scrape reads a fixed
//! set of small files per container at most once a period and never walks a tree. Each running
//! container and each ready sandbox is found through the runtime once (its process, from the
//! verbose status), its cgroup from that process's `/proc/<pid>/cgroup`, and remembered while
//! it runs. A pod's own cgroup is its containers' parent when that is named after the pod's UID
//! (the kubelet's `pod<uid>` cgroups); where there is none, readers sum the pod's containers.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use jiff::Timestamp;
use nodepulse_actors::{pods::PodsSnapshot, ports::ContainerState};
use tokio::time::Instant;

use super::StatsError;
use crate::host::{
    HostProbe,
    cgroup::{CgroupFigures, DeviceNames},
    network::InterfaceCounters,
};
use nodepulse_cri::client::{CriClient, RuntimeProcess};

/// What a cgroup is to its pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The pod's own cgroup (the parent of its containers').
    Pod,
    /// The sandbox's (pause) container: where the pod's network is read.
    Sandbox,
    Container,
}

/// One cgroup of one pod, read.
#[derive(Debug, Clone)]
pub struct CgroupRecord {
    pub kind: Kind,
    pub pod_uid: String,
    /// `pod<uid>`, what a sum of the pod's cgroups is named by.
    pub pod_id: String,
    pub pod: String,
    pub namespace: String,
    /// The container's name in the pod spec; empty for the sandbox and the pod.
    pub container: String,
    /// The runtime's ID; empty for the pod's cgroup.
    pub id: String,
    pub image: String,
    /// The cgroup as the host's hierarchy names it (cAdvisor's container name).
    pub cgroup: String,
    pub started: Timestamp,
    pub figures: CgroupFigures,
    /// The pod's interfaces, on its sandbox alone (its containers share its namespace).
    pub network: Vec<InterfaceCounters>,
    /// Core-nanoseconds a second since the previous collection (cAdvisor's rate).
    pub nano_cores: Option<u64>,
}

/// One collection.
#[derive(Debug)]
pub struct Collection {
    pub taken: Timestamp,
    taken_at: Instant,
    /// By pod UID, then kind: the pod's cgroup, its sandbox, its containers by name.
    pub records: Vec<CgroupRecord>,
    /// The root cgroup (the node, cAdvisor's `/`) and the node's interfaces.
    pub root: Option<CgroupFigures>,
    pub node_network: Vec<InterfaceCounters>,
}

impl Collection {
    /// A collection of `records` taken at `taken` (tests build the readers' input so).
    #[cfg(test)]
    pub fn of(taken: Timestamp, records: Vec<CgroupRecord>) -> Self {
        Self {
            taken,
            taken_at: Instant::now(),
            records,
            root: None,
            node_network: Vec::new(),
        }
    }

    /// The records of pod `uid`.
    pub fn of_pod<'a>(&'a self, uid: &'a str) -> impl Iterator<Item = &'a CgroupRecord> + 'a {
        self.records
            .iter()
            .filter(move |record| record.pod_uid == uid)
    }
}

/// Where a running container or sandbox was found.
#[derive(Debug, Clone)]
struct Located {
    cgroup: String,
    pid: u32,
    image: Option<String>,
}

/// A cgroup the collection reads, from the pods view.
#[derive(Debug, Clone)]
struct Wanted {
    kind: Kind,
    pod_uid: String,
    pod: String,
    namespace: String,
    container: String,
    id: String,
    image: String,
    started: Timestamp,
}

/// The collections, the places found, and the period.
#[derive(Debug)]
pub struct ContainerCollector {
    period: Duration,
    host: HostProbe,
    /// Block devices' names, for the readers' `device` labels.
    pub devices: DeviceNames,
    located: Mutex<HashMap<String, Located>>,
    latest: tokio::sync::Mutex<Option<Arc<Collection>>>,
}

impl ContainerCollector {
    pub fn new(host: HostProbe, period: Duration) -> Self {
        Self {
            period,
            devices: host.device_names(),
            host,
            located: Mutex::default(),
            latest: tokio::sync::Mutex::default(),
        }
    }

    /// The latest collection, taken now when the last is a period old; concurrent readers
    /// wait for the one collection under way.
    pub async fn collect(
        &self,
        runtime: Option<&CriClient>,
        snapshot: &PodsSnapshot,
    ) -> Result<Arc<Collection>, StatsError> {
        let mut latest = self.latest.lock().await;
        if let Some(collection) = latest.as_ref()
            && collection.taken_at.elapsed() < self.period
        {
            return Ok(Arc::clone(collection));
        }
        let wanted = wanted(snapshot);
        let processes = match runtime {
            Some(runtime) => self.processes(runtime, &wanted).await,
            None => HashMap::new(),
        };
        let known = self
            .located
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (host, previous) = (self.host.clone(), latest.clone());
        let (located, collection) = tokio::task::spawn_blocking(move || {
            read(&host, wanted, known, &processes, previous.as_deref())
        })
        .await
        .map_err(|error| StatsError::Task(error.to_string()))?;
        *self.located.lock().unwrap_or_else(PoisonError::into_inner) = located;
        let collection = Arc::new(collection);
        *latest = Some(Arc::clone(&collection));
        Ok(collection)
    }

    /// The processes of the wanted containers and sandboxes not found yet, asked of the
    /// runtime all at once.
    async fn processes(
        &self,
        runtime: &CriClient,
        wanted: &[Wanted],
    ) -> HashMap<String, RuntimeProcess> {
        let unknown: Vec<&Wanted> = {
            let located = self.located.lock().unwrap_or_else(PoisonError::into_inner);
            (wanted.iter())
                .filter(|wanted| !located.contains_key(&wanted.id))
                .collect()
        };
        let asked = unknown.iter().map(|wanted| async move {
            let process = match wanted.kind {
                Kind::Sandbox => runtime.sandbox_process(wanted.id.clone()).await,
                _ => runtime.container_process(wanted.id.clone()).await,
            };
            let process =
                process.inspect_err(|error| tracing::debug!(%error, id = %wanted.id, "no process"));
            (wanted.id.clone(), process.ok().flatten())
        });
        (futures::future::join_all(asked).await.into_iter())
            .filter_map(|(id, process)| Some((id, process?)))
            .collect()
    }
}

/// The ready sandboxes and running containers of the view's pods.
fn wanted(snapshot: &PodsSnapshot) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    for pod in snapshot.pods() {
        let of = |kind, container: &str, id: &str, image: &str, started| Wanted {
            kind,
            pod_uid: pod.uid.clone(),
            pod: pod.name.clone(),
            namespace: pod.namespace.clone(),
            container: container.to_owned(),
            id: id.to_owned(),
            image: image.to_owned(),
            started,
        };
        if let Some(sandbox) = pod.sandboxes.first().filter(|sandbox| sandbox.ready) {
            let started = sandbox.created_at.unwrap_or(Timestamp::UNIX_EPOCH);
            wanted.push(of(Kind::Sandbox, "", &sandbox.id, "", started));
        }
        for container in &pod.containers {
            if container.state != ContainerState::Running {
                continue;
            }
            let started =
                (container.created_at.or(container.started_at)).unwrap_or(Timestamp::UNIX_EPOCH);
            let (name, id, image) = (&container.name, &container.id, &container.image);
            wanted.push(of(Kind::Container, name, id, image, started));
        }
    }
    wanted
}

/// Finds the new ones' cgroups and reads every cgroup (blocking); returns what is known to run
/// now and the collection.
fn read(
    host: &HostProbe,
    wanted: Vec<Wanted>,
    mut known: HashMap<String, Located>,
    processes: &HashMap<String, RuntimeProcess>,
    previous: Option<&Collection>,
) -> (HashMap<String, Located>, Collection) {
    known.retain(|id, _| wanted.iter().any(|wanted| &wanted.id == id));
    for (id, process) in processes {
        match host.pid_cgroup_blocking(process.pid) {
            Ok(cgroup) => {
                let located = Located {
                    cgroup,
                    pid: process.pid,
                    image: process.image.clone(),
                };
                known.insert(id.clone(), located);
            }
            Err(error) => tracing::debug!(%error, %id, "no cgroup of the container's process"),
        }
    }
    let mut records = Vec::new();
    let mut pods: BTreeMap<String, (Wanted, Vec<String>)> = BTreeMap::new();
    for wanted in wanted {
        let Some(located) = known.get(&wanted.id) else {
            continue;
        };
        let figures = match host.cgroup_blocking(&located.cgroup) {
            Ok(figures) => figures,
            Err(error) => {
                tracing::debug!(%error, id = %wanted.id, "the container's cgroup is gone");
                continue;
            }
        };
        let network = match wanted.kind {
            Kind::Sandbox => (host.process_network_blocking(located.pid))
                .inspect_err(|error| tracing::debug!(%error, "no pod network"))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let entry = pods.entry(wanted.pod_uid.clone());
        entry
            .or_insert_with(|| (wanted.clone(), Vec::new()))
            .1
            .push(located.cgroup.clone());
        let image = match (&located.image, wanted.image.is_empty()) {
            (Some(image), true) => image.clone(),
            _ => wanted.image.clone(),
        };
        records.push(record(
            wanted,
            image,
            located.cgroup.clone(),
            figures,
            network,
        ));
    }
    for (uid, (pod, cgroups)) in pods {
        let Some(cgroup) = pod_cgroup(&uid, &cgroups) else {
            continue;
        };
        match host.cgroup_blocking(&cgroup) {
            Ok(figures) => {
                let started = figures
                    .created
                    .and_then(|created| Timestamp::try_from(created).ok())
                    .unwrap_or(pod.started);
                let pod = Wanted {
                    kind: Kind::Pod,
                    container: String::new(),
                    id: String::new(),
                    image: String::new(),
                    started,
                    ..pod
                };
                records.push(record(pod, String::new(), cgroup, figures, Vec::new()));
            }
            Err(error) => tracing::debug!(%error, %cgroup, "no pod cgroup figures"),
        }
    }
    let root = (host.cgroup_blocking("/"))
        .inspect_err(|error| tracing::debug!(%error, "no root cgroup figures"))
        .ok();
    let node_network = (host.node_network_blocking())
        .inspect_err(|error| tracing::debug!(%error, "no node network figures"))
        .unwrap_or_default();
    let taken = Timestamp::now();
    rates(&mut records, taken, previous);
    records.sort_by(|a, b| {
        (&a.pod_uid, a.kind, &a.container).cmp(&(&b.pod_uid, b.kind, &b.container))
    });
    let collection = Collection {
        taken,
        taken_at: Instant::now(),
        records,
        root,
        node_network,
    };
    (known, collection)
}

fn record(
    wanted: Wanted,
    image: String,
    cgroup: String,
    figures: CgroupFigures,
    network: Vec<InterfaceCounters>,
) -> CgroupRecord {
    CgroupRecord {
        kind: wanted.kind,
        pod_id: format!("pod{}", wanted.pod_uid),
        pod_uid: wanted.pod_uid,
        pod: wanted.pod,
        namespace: wanted.namespace,
        container: wanted.container,
        id: wanted.id,
        image,
        cgroup,
        started: wanted.started,
        figures,
        network,
        nano_cores: None,
    }
}

/// The pod's own cgroup: the parent its containers share, when it is named after the pod's
/// UID (`pod<uid>` with cgroupfs, `…-pod<uid with _>.slice` with systemd).
pub fn pod_cgroup(uid: &str, cgroups: &[String]) -> Option<String> {
    let mut parents = cgroups
        .iter()
        .map(|cgroup| cgroup.rsplit_once('/').map(|(p, _)| p));
    let parent = parents.next()??;
    if !parents.all(|other| other == Some(parent)) {
        return None;
    }
    let last = parent.rsplit('/').next().unwrap_or(parent);
    let systemd = format!("pod{}.slice", uid.replace('-', "_"));
    (last == format!("pod{uid}") || last.ends_with(&systemd)).then(|| parent.to_owned())
}

/// Each record's CPU rate since the previous collection's figure of the same cgroup.
fn rates(records: &mut [CgroupRecord], taken: Timestamp, previous: Option<&Collection>) {
    let Some(previous) = previous else { return };
    let elapsed = taken.duration_since(previous.taken).as_nanos();
    if elapsed <= 0 {
        return;
    }
    let before: HashMap<&str, u64> = (previous.records.iter())
        .filter_map(|record| Some((record.cgroup.as_str(), record.figures.cpu_nanos?)))
        .collect();
    for record in records {
        let (Some(now), Some(then)) =
            (record.figures.cpu_nanos, before.get(record.cgroup.as_str()))
        else {
            continue;
        };
        let used = now.checked_sub(*then);
        record.nano_cores = used.map(|used| (i128::from(used) * 1_000_000_000 / elapsed) as u64);
    }
}

#[cfg(test)]
#[path = "collection_tests.rs"]
mod tests;
