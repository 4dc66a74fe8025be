//! DiskPressure reclaim before eviction, on paused time against a fake host and runtime: with
//! a node filesystem that holds the images, unused images are deleted first; when that frees
//! enough no pod is evicted, otherwise the pod is evicted after the images went.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use actix::Actor;
use k8s_openapi::api::core::v1::Pod;
use nodepulse_supervisor::{Kept, Recipient};

use super::{EvictionSettings, EvictionSignalActor, Evictions, ThresholdConfig, parse_thresholds};
use crate::{
    image_gc::{ImageCollector, ImageGcSettings},
    messages::{EvictPod, PressureChanged},
    ports::{
        ContainerRuntime, PodStats, PodStatsSource, RuntimeService,
        fakes::{
            container_runtime::FakeRuntime,
            eventually,
            host::{FakeHost, GIB},
            paused_wall_clock,
        },
    },
};

const HOUSEKEEPING: Duration = Duration::from_secs(10);

struct OnePod;

impl PodStatsSource for OnePod {
    fn active_pods(&self) -> Vec<PodStats> {
        let mut pod = Pod::default();
        pod.metadata.name = Some("victim".to_owned());
        pod.metadata.namespace = Some("default".to_owned());
        vec![PodStats {
            pod: Arc::new(pod),
            containers: None,
            processes: None,
            storage: None,
        }]
    }
}

/// The eviction actor with `nodefs.available<30Gi`, the host at 20 GiB free, one unused image;
/// the evictions asked for and the runtime's calls at each of them.
fn start(host: &FakeHost, runtime: &Arc<FakeRuntime>) -> Arc<Mutex<Vec<(String, usize)>>> {
    let hard: BTreeMap<String, String> =
        [("nodefs.available".to_owned(), "30Gi".to_owned())].into();
    let empty = BTreeMap::new();
    let thresholds = parse_thresholds(
        &ThresholdConfig {
            hard: &hard,
            soft: &empty,
            soft_grace_period: &BTreeMap::new(),
            minimum_reclaim: &empty,
        },
        true,
    )
    .expect("valid");
    let settings = EvictionSettings {
        thresholds,
        housekeeping_interval: HOUSEKEEPING,
        pressure_transition_period: Duration::from_secs(300),
        runtime_request_timeout: Duration::from_secs(2),
    };
    let collector = ImageCollector::new(
        ImageGcSettings {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            minimum_age: Duration::ZERO,
            maximum_age: Duration::ZERO,
            period: Duration::from_secs(300),
        },
        Arc::clone(runtime) as Arc<dyn RuntimeService>,
        Arc::clone(runtime) as Arc<dyn ContainerRuntime>,
        Arc::new(host.clone()),
        None,
    );
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&evicted);
    let calls = Arc::clone(runtime);
    let evict = Recipient::<EvictPod>::from_fn(move |eviction| {
        let removed = calls.count("RemoveImage");
        let name = eviction.pod.metadata.name.clone().unwrap_or_default();
        record.lock().expect("evictions").push((name, removed));
        Ok(())
    });
    EvictionSignalActor::new(
        settings,
        Arc::new(host.clone()),
        None,
        Recipient::<PressureChanged>::from_fn(|_| Ok(())),
        Kept::default(),
    )
    .with_image_reclaim(collector)
    .with_evictions(Evictions {
        pods: Arc::new(OnePod),
        evict,
    })
    .start();
    evicted
}

fn pressured_host() -> FakeHost {
    let host = FakeHost::with_memory_available(4 * GIB);
    host.state().nodefs_available_bytes = 20 * GIB;
    host
}

#[actix_rt::test]
async fn deleting_unused_images_that_relieve_disk_pressure_evicts_no_pod() {
    tokio::time::pause();
    let host = pressured_host();
    let runtime = Arc::new(FakeRuntime::new(paused_wall_clock()).with_image("unused:1"));
    let freed = host.clone();
    runtime.on_remove_image(move || freed.state().nodefs_available_bytes = 50 * GIB);
    let evicted = start(&host, &runtime);
    eventually("the unused image is deleted", HOUSEKEEPING, || {
        runtime.count("RemoveImage") == 1
    })
    .await;
    let passes = host.state().observed;
    eventually("three more passes", HOUSEKEEPING * 4, || {
        host.state().observed >= passes + 3
    })
    .await;
    assert!(
        evicted.lock().expect("evictions").is_empty(),
        "no pod evicted"
    );
}

#[actix_rt::test]
async fn a_pod_is_evicted_only_after_the_unused_images_went() {
    tokio::time::pause();
    let host = pressured_host();
    let runtime = Arc::new(FakeRuntime::new(paused_wall_clock()).with_image("unused:1"));
    let evicted = start(&host, &runtime);
    eventually("a pod is evicted", HOUSEKEEPING, || {
        !evicted.lock().expect("evictions").is_empty()
    })
    .await;
    let first = evicted.lock().expect("evictions")[0].clone();
    assert_eq!(
        first,
        ("victim".to_owned(), 1),
        "the image was deleted before"
    );
}
