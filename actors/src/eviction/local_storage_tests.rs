//! Local-storage evictions: each of the kubelet's three limits with its message, what is not
//! evicted (at the limit, critical, unmeasured), and the actor evicting such a pod on a pass
//! with no threshold met.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use actix::Actor;
use k8s_openapi::{
    api::core::v1::{Container, EmptyDirVolumeSource, Pod, PodSpec, ResourceRequirements, Volume},
    apimachinery::pkg::api::resource::Quantity,
};
use nodepulse_supervisor::{Kept, Recipient};

use super::{EvictionSettings, EvictionSignalActor, Evictions, local_storage_evictions};
use crate::{
    messages::{EvictPod, PressureChanged},
    ports::{
        ContainerStorage, PodStats, PodStatsSource, PodStorage,
        fakes::{
            eventually,
            host::{FakeHost, GIB},
        },
    },
};

const MIB: u64 = 1 << 20;

fn container(name: &str, limit: Option<&str>) -> Container {
    Container {
        name: name.to_owned(),
        resources: limit.map(|limit| ResourceRequirements {
            limits: Some(BTreeMap::from([(
                "ephemeral-storage".to_owned(),
                Quantity(limit.to_owned()),
            )])),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

fn pod(containers: Vec<Container>, volumes: Vec<Volume>) -> Pod {
    let mut pod = Pod {
        spec: Some(PodSpec {
            containers,
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    pod.metadata.name = Some("writer".to_owned());
    pod.metadata.uid = Some("uid-1".to_owned());
    pod
}

fn empty_dir(name: &str, size_limit: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(size_limit.to_owned())),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// `rootfs`, `logs` of container `bar`, the volumes' use and the pod's total.
fn storage(rootfs: u64, logs: u64, volumes: &[(&str, u64)], total: u64) -> PodStorage {
    PodStorage {
        containers: vec![ContainerStorage {
            name: "bar".to_owned(),
            rootfs_bytes: Some(rootfs),
            logs_bytes: Some(logs),
        }],
        volumes: (volumes.iter())
            .map(|(name, used)| ((*name).to_owned(), *used))
            .collect(),
        ephemeral_bytes: Some(total),
    }
}

fn stats(pod: Pod, storage: Option<PodStorage>) -> PodStats {
    PodStats {
        pod: Arc::new(pod),
        containers: None,
        processes: None,
        storage,
    }
}

fn messages(pods: &[PodStats], dedicated_image_fs: bool) -> Vec<String> {
    local_storage_evictions(pods, dedicated_image_fs)
        .into_iter()
        .map(|eviction| eviction.message)
        .collect()
}

#[test]
fn an_empty_dir_above_its_size_limit_evicts_the_pod_first() {
    let spec = pod(
        vec![container("bar", Some("5Mi"))],
        vec![empty_dir("cache", "1Mi")],
    );
    let pods = [stats(
        spec,
        Some(storage(0, 0, &[("cache", 2 * MIB)], 20 * MIB)),
    )];
    assert_eq!(
        messages(&pods, false),
        ["Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". "]
    );
}

#[test]
fn a_pod_above_the_sum_of_its_containers_limits_is_evicted() {
    let spec = pod(
        vec![container("bar", Some("5Mi")), container("baz", Some("3Mi"))],
        Vec::new(),
    );
    let pods = [stats(spec, Some(storage(MIB, 0, &[], 9 * MIB)))];
    assert_eq!(
        messages(&pods, false),
        ["Pod ephemeral local storage usage exceeds the total limit of containers 8Mi. "]
    );
}

#[test]
fn a_container_above_its_limit_counts_its_layer_only_on_the_node_filesystem() {
    // The upstream e2e "evicted pods should be terminal": 10 MiB written into the layer, 5Mi
    // limit. The pod's total is not measured here, so the container's check decides.
    let spec = || pod(vec![container("bar", Some("5Mi"))], Vec::new());
    let measured = || {
        let mut measured = storage(10 * MIB, MIB, &[], 0);
        measured.ephemeral_bytes = None;
        measured
    };
    assert_eq!(
        messages(&[stats(spec(), Some(measured()))], false),
        ["Container bar exceeded its local ephemeral storage limit \"5Mi\". "]
    );
    assert!(
        messages(&[stats(spec(), Some(measured()))], true).is_empty(),
        "with a dedicated image filesystem only the 1 MiB of logs counts"
    );
}

#[test]
fn use_at_the_limit_critical_or_unmeasured_pods_are_not_evicted() {
    let spec = || {
        pod(
            vec![container("bar", Some("5Mi"))],
            vec![empty_dir("cache", "1Mi")],
        )
    };
    let at_limit = storage(4 * MIB, MIB, &[("cache", MIB)], 5 * MIB);
    let mut critical = spec();
    critical.metadata.annotations = Some(BTreeMap::from([(
        "kubernetes.io/config.source".to_owned(),
        "file".to_owned(),
    )]));
    let above = storage(50 * MIB, 0, &[("cache", 9 * MIB)], 60 * MIB);
    let pods = [
        stats(spec(), Some(at_limit)),
        stats(critical, Some(above)),
        stats(spec(), None),
        stats(
            pod(vec![container("bar", None)], Vec::new()),
            Some(storage(GIB, 0, &[], GIB)),
        ),
    ];
    assert!(messages(&pods, false).is_empty());
}

struct Pods(Vec<PodStats>);

impl PodStatsSource for Pods {
    fn active_pods(&self) -> Vec<PodStats> {
        self.0.clone()
    }
}

#[actix_rt::test]
async fn the_actor_evicts_a_pod_above_its_limit_with_no_threshold_met() {
    tokio::time::pause();
    let housekeeping = Duration::from_secs(10);
    let host = FakeHost::with_memory_available(4 * GIB);
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&evicted);
    let evict = Recipient::<EvictPod>::from_fn(move |eviction| {
        record.lock().expect("evictions").push(eviction.message);
        Ok(())
    });
    let spec = pod(vec![container("bar", Some("5Mi"))], Vec::new());
    let _actor = EvictionSignalActor::new(
        EvictionSettings {
            thresholds: Vec::new(),
            housekeeping_interval: housekeeping,
            pressure_transition_period: Duration::from_secs(300),
            runtime_request_timeout: Duration::from_secs(2),
        },
        Arc::new(host),
        None,
        Recipient::<PressureChanged>::from_fn(|_| Ok(())),
        Kept::default(),
    )
    .with_evictions(Evictions {
        pods: Arc::new(Pods(vec![stats(
            spec,
            Some(storage(10 * MIB, 0, &[], 10 * MIB)),
        )])),
        evict,
    })
    .start();
    eventually("the pod is evicted", housekeeping, || {
        !evicted.lock().expect("evictions").is_empty()
    })
    .await;
    assert_eq!(
        evicted.lock().expect("evictions")[0],
        "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "
    );
}
