//! `/metrics/cadvisor` on real containers (containerd), parsed with the strict text parser:
//! a container burning CPU and one holding memory show in `container_cpu_usage_seconds_total`
//! and `container_memory_working_set_bytes` within a collection or two (the housekeeping
//! period), with the kubelet's labels (`id` the cgroup, which the test finds on the host;
//! `name` the runtime's container ID; `image`; `pod`, `namespace`, `container`), the CFS figures
//! of the one under a CPU limit, the pod's network on its sandbox, the pod's own summed series,
//! the node's root and the machine's families, and no series written twice.

use std::collections::BTreeMap;

use super::{
    cri_pods::{NAMESPACE, Setup, create_pod, runtime_id, shell},
    kubelet_api_logs::serve,
};
use nodepulse_testkit::{
    eventually_async, host_cgroups,
    pods::wait_running,
    prometheus_text::{Family, parse, written_twice},
};

/// What a container writes into the pod's `/dev/shm` (tmpfs: charged to its cgroup, and not
/// reclaimable page cache, so it stays in the working set).
const HELD: f64 = 48.0 * 1024.0 * 1024.0;

/// The one sample of `family` whose labels include every pair of `wanted`.
fn find<'a>(
    families: &'a BTreeMap<String, Family>,
    family: &str,
    wanted: &[(&str, &str)],
) -> Option<&'a nodepulse_testkit::prometheus_text::Sample> {
    let mut found = (families.get(family)?.samples.iter()).filter(|sample| {
        wanted
            .iter()
            .all(|(key, value)| sample.labels.get(*key).map(String::as_str) == Some(*value))
    });
    let first = found.next();
    assert!(
        found.next().is_none(),
        "{family} {wanted:?} matches more than one series"
    );
    first
}

/// Whether the host has cgroup `id` (cAdvisor's container name).
fn cgroup_exists(id: &str) -> bool {
    let under = |hierarchy: &str| {
        std::path::Path::new("/sys/fs/cgroup")
            .join(hierarchy)
            .join(id.trim_start_matches('/'))
            .is_dir()
    };
    if host_cgroups::unified() {
        under("")
    } else {
        under("memory") && (under("cpuacct") || under("cpu,cpuacct"))
    }
}

#[actix_rt::test]
async fn container_figures_follow_a_container_burning_cpu_and_one_holding_memory() {
    let test = "container_figures_follow_a_container_burning_cpu_and_one_holding_memory";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "cadvisor").await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-load", node.name);
        let idle = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
        let mut burn = shell("burn", "trap 'exit 0' TERM; while :; do :; done");
        burn["resources"] = serde_json::json!({"limits": {"cpu": "500m"}});
        let hold = shell(
            "hold",
            &format!("dd if=/dev/zero of=/dev/shm/held bs=1M count=48 2>/dev/null; {idle}"),
        );
        let spec =
            serde_json::json!({"spec": {"restartPolicy": "Always", "containers": [burn, hold]}});
        create_pod(&cluster, &node.name, &name, spec).await;
        let pod = wait_running(&cluster.client, NAMESPACE, &name).await;
        let uid = pod.metadata.uid.clone().expect("a UID");
        let statuses = (pod.status.as_ref())
            .and_then(|status| status.container_statuses.clone())
            .expect("container statuses");
        let status = |container: &str| {
            statuses
                .iter()
                .find(|status| status.name == container)
                .unwrap_or_else(|| panic!("{container}'s status"))
        };
        let scrape = || async {
            let answer = api.client.get("/metrics/cadvisor").await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            assert_eq!(
                answer.headers.get("content-type").expect("a content type"),
                "text/plain; version=0.0.4; charset=utf-8"
            );
            (answer.body.clone(), parse(&answer.body))
        };
        let ours = |container: &'static str| {
            [
                ("pod", name.as_str()),
                ("namespace", NAMESPACE),
                ("container", container),
            ]
        };
        let working_set = |families: &BTreeMap<String, Family>, container| {
            find(
                families,
                "container_memory_working_set_bytes",
                &ours(container),
            )
            .map(|sample| sample.value)
        };
        eventually_async("the holding container's 48 MiB are served", || async {
            working_set(&scrape().await.1, "hold").is_some_and(|bytes| bytes >= HELD)
        })
        .await;
        let (text, first) = scrape().await;
        assert_eq!(written_twice(&text), Vec::<String>::new());
        for (family, served) in &first {
            assert!(served.help.is_some() && served.kind.is_some(), "{family}");
        }

        // The kubelet's labels: the cgroup, the runtime's ID, the image.
        let burn_cpu =
            find(&first, "container_cpu_usage_seconds_total", &ours("burn")).expect("cpu");
        let labels = &burn_cpu.labels;
        assert_eq!(labels.get("cpu").map(String::as_str), Some("total"));
        assert_eq!(labels.get("name"), Some(&runtime_id(status("burn"))));
        assert_eq!(labels.get("image"), Some(&status("burn").image));
        let id = labels.get("id").expect("an id");
        assert!(cgroup_exists(id), "{id} is no cgroup of this host");
        assert!(
            burn_cpu.timestamp.is_some(),
            "cAdvisor's figures carry their time"
        );
        assert!(
            working_set(&first, "burn").is_some_and(|bytes| bytes < HELD),
            "the burning container holds little"
        );

        // CPU: the burning container's time grows from one collection to the next, far more
        // than the holding one's.
        let cpu_of = |families: &BTreeMap<String, Family>, container| {
            let sample = find(
                families,
                "container_cpu_usage_seconds_total",
                &ours(container),
            );
            sample.map(|sample| (sample.value, sample.timestamp))
        };
        let (burn_before, at) = cpu_of(&first, "burn").expect("burn");
        let (hold_before, _) = cpu_of(&first, "hold").expect("hold");
        let grown = std::cell::Cell::new(None);
        eventually_async(
            "a later collection shows the burning container's CPU",
            || async {
                let later = scrape().await.1;
                let (Some((burn, then)), Some((hold, _))) =
                    (cpu_of(&later, "burn"), cpu_of(&later, "hold"))
                else {
                    return false;
                };
                grown.set(Some((burn - burn_before, hold - hold_before)));
                then > at
            },
        )
        .await;
        let (burned, held_cpu) = grown.get().expect("measured");
        assert!(
            burned > 0.0 && burned > 10.0 * held_cpu,
            "burn +{burned} s, hold +{held_cpu} s"
        );

        // CFS: the one under a limit has a quota and its periods.
        let quota = find(&first, "container_spec_cpu_quota", &ours("burn")).expect("a quota");
        assert_eq!((quota.value, quota.timestamp), (50_000.0, None));
        assert!(find(&first, "container_cpu_cfs_periods_total", &ours("burn")).is_some());
        assert!(find(&first, "container_cpu_cfs_periods_total", &ours("hold")).is_none());
        assert!(find(&first, "container_memory_rss", &ours("hold")).is_some());
        assert!(
            find(&first, "container_memory_cache", &ours("hold")).is_some_and(|s| s.value >= HELD)
        );

        // The sandbox (container="", its pause image) holds the pod's network.
        let pod_labels = [
            ("pod", name.as_str()),
            ("namespace", NAMESPACE),
            ("container", ""),
        ];
        let received = (first
            .get("container_network_receive_bytes_total")
            .expect("network"))
        .samples
        .iter()
        .filter(|sample| {
            pod_labels
                .iter()
                .all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect::<Vec<_>>();
        assert_eq!(received.len(), 1, "the sandbox's eth0 alone: {received:?}");
        assert_eq!(
            received[0].labels.get("interface").map(String::as_str),
            Some("eth0")
        );
        assert!(cgroup_exists(&received[0].labels["id"]));
        // The pod's own series: its pod cgroup (`…/kubepods/<qos>/pod<uid>`), as cAdvisor's.
        let pod_id = format!("/pod{uid}");
        let mut own = (first
            .get("container_cpu_usage_seconds_total")
            .expect("cpu")
            .samples
            .iter())
        .filter(|sample| {
            sample
                .labels
                .get("id")
                .is_some_and(|id| id.ends_with(&pod_id))
        });
        let summed = own.next().expect("the pod's series");
        assert!(own.next().is_none(), "one series of the pod's own");
        assert!(summed.value >= burn_before + hold_before, "{summed:?}");
        assert_eq!(summed.labels.get("pod"), Some(&name));
        // The node's root, and the machine.
        let root =
            find(&first, "container_memory_working_set_bytes", &[("id", "/")]).expect("root");
        assert!(root.value >= HELD);
        let cores = &first.get("machine_cpu_cores").expect("cores").samples[0];
        let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
        assert_eq!(cores.value, nproc as f64);
        for label in ["boot_id", "machine_id", "system_uuid"] {
            assert!(
                cores.labels.contains_key(label),
                "{label}: {:?}",
                cores.labels
            );
        }
        for family in ["container_scrape_error", "machine_scrape_error"] {
            assert_eq!(
                first.get(family).expect(family).samples[0].value,
                0.0,
                "{family}"
            );
        }
    })
    .await;
    api.served.stop();
}
