//! `ResourceConfigForPod`, from the kubelet's own table (`cm/helpers_linux_test.go`
//! `TestResourceConfigForPod`), plus sidecars, overhead and the PID limit.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;

const MI: i64 = 1 << 20;
const TUNED_PERIOD: u64 = 5_000;

fn resources(requests: (&str, &str), limits: (&str, &str)) -> Value {
    let list = |(cpu, memory): (&str, &str)| {
        let mut map = serde_json::Map::new();
        if !cpu.is_empty() {
            map.insert("cpu".into(), json!(cpu));
        }
        if !memory.is_empty() {
            map.insert("memory".into(), json!(memory));
        }
        Value::Object(map)
    };
    json!({"requests": list(requests), "limits": list(limits)})
}

fn pod(containers: Vec<Value>, init: Vec<Value>, pod_level: Option<Value>) -> Pod {
    let named = |list: &[Value], prefix: &str| -> Vec<Value> {
        list.iter()
            .enumerate()
            .map(|(i, r)| json!({"name": format!("{prefix}{i}"), "resources": r}))
            .collect()
    };
    let mut spec =
        json!({"containers": named(&containers, "c"), "initContainers": named(&init, "i")});
    if let Some(level) = pod_level {
        spec["resources"] = level;
    }
    serde_json::from_value(json!({"spec": spec})).unwrap()
}

fn config(pod: &Pod, enforce: bool, period: u64) -> ResourceConfig {
    let settings = PodCgroupSettings {
        enforce_cpu_limits: enforce,
        cpu_period: period,
        pod_pids_limit: -1,
    };
    resource_config_for_pod(pod, settings).unwrap()
}

fn expected(
    shares: u64,
    quota: Option<i64>,
    period: Option<u64>,
    memory: Option<i64>,
) -> ResourceConfig {
    ResourceConfig {
        cpu_shares: Some(shares),
        cpu_quota: quota,
        cpu_period: period,
        memory,
        ..ResourceConfig::default()
    }
}

#[test]
fn the_kubelets_table_for_container_resources() {
    let burstable = resources(("100m", "100Mi"), ("200m", "200Mi"));
    let no_limits = resources(("100m", "100Mi"), ("", ""));
    let guaranteed = resources(("100m", "100Mi"), ("100m", "100Mi"));
    let p = QUOTA_PERIOD;
    let cases = [
        (
            "besteffort",
            pod(vec![resources(("", ""), ("", ""))], vec![], None),
            true,
            p,
            expected(2, None, None, None),
        ),
        (
            "burstable-no-limits",
            pod(vec![no_limits.clone()], vec![], None),
            true,
            p,
            expected(102, None, None, None),
        ),
        (
            "burstable-with-limits",
            pod(vec![burstable.clone()], vec![], None),
            true,
            p,
            expected(102, Some(20_000), Some(p), Some(200 * MI)),
        ),
        (
            "burstable-with-limits-no-cpu-enforcement",
            pod(vec![burstable.clone()], vec![], None),
            false,
            p,
            expected(102, Some(-1), Some(p), Some(200 * MI)),
        ),
        (
            "burstable-partial-limits",
            pod(vec![burstable.clone(), no_limits.clone()], vec![], None),
            true,
            p,
            expected(204, None, None, None),
        ),
        (
            "burstable-with-limits-with-tuned-quota",
            pod(vec![burstable.clone()], vec![], None),
            true,
            TUNED_PERIOD,
            expected(102, Some(1_000), Some(TUNED_PERIOD), Some(200 * MI)),
        ),
        (
            "burstable-with-limits-no-cpu-enforcement-with-tuned-quota",
            pod(vec![burstable.clone()], vec![], None),
            false,
            TUNED_PERIOD,
            expected(102, Some(-1), Some(TUNED_PERIOD), Some(200 * MI)),
        ),
        (
            "burstable-partial-limits-with-tuned-quota",
            pod(vec![burstable.clone(), no_limits.clone()], vec![], None),
            true,
            TUNED_PERIOD,
            expected(204, None, None, None),
        ),
        (
            "guaranteed",
            pod(vec![guaranteed.clone()], vec![], None),
            true,
            p,
            expected(102, Some(10_000), Some(p), Some(100 * MI)),
        ),
        (
            "guaranteed-no-cpu-enforcement",
            pod(vec![guaranteed.clone()], vec![], None),
            false,
            p,
            expected(102, Some(-1), Some(p), Some(100 * MI)),
        ),
        (
            "guaranteed-with-tuned-quota",
            pod(vec![guaranteed.clone()], vec![], None),
            true,
            TUNED_PERIOD,
            expected(102, Some(1_000), Some(TUNED_PERIOD), Some(100 * MI)),
        ),
        (
            "guaranteed-no-cpu-enforcement-with-tuned-quota",
            pod(vec![guaranteed.clone()], vec![], None),
            false,
            TUNED_PERIOD,
            expected(102, Some(-1), Some(TUNED_PERIOD), Some(100 * MI)),
        ),
        (
            "burstable-partial-limits-with-init-containers",
            pod(
                vec![
                    resources(("100m", "100m"), ("100m", "100Mi")),
                    resources(("100m", "100m"), ("", "")),
                ],
                vec![
                    resources(("100m", "100m"), ("100m", "100Mi")),
                    resources(("100m", "100m"), ("", "")),
                ],
                None,
            ),
            true,
            TUNED_PERIOD,
            expected(204, None, None, None),
        ),
    ];
    for (name, pod, enforce, period, want) in cases {
        assert_eq!(config(&pod, enforce, period), want, "{name}");
    }
}

#[test]
fn the_kubelets_table_for_pod_level_resources() {
    let none = json!({});
    let p = QUOTA_PERIOD;
    let cases = [
        (
            "besteffort-with-pod-level-resources-enabled",
            pod(
                vec![resources(("", ""), ("", ""))],
                vec![],
                Some(resources(("", ""), ("", ""))),
            ),
            expected(2, None, None, None),
        ),
        (
            "burstable-with-pod-level-requests",
            pod(
                vec![none.clone()],
                vec![],
                Some(json!({"requests": {"cpu": "100m", "memory": "100Mi"}})),
            ),
            expected(102, None, None, None),
        ),
        (
            "burstable-with-pod-and-container-level-requests",
            pod(
                vec![resources(("10m", "50Mi"), ("", ""))],
                vec![],
                Some(json!({"requests": {"cpu": "100m", "memory": "100Mi"}})),
            ),
            expected(102, None, None, None),
        ),
        (
            "burstable-with-pod-level-resources",
            pod(
                vec![none.clone()],
                vec![],
                Some(resources(("100m", "100Mi"), ("200m", "200Mi"))),
            ),
            expected(102, Some(20_000), Some(p), Some(200 * MI)),
        ),
        (
            "burstable-with-pod-and-container-level-resources",
            pod(
                vec![resources(("10m", "50Mi"), ("50m", "100Mi"))],
                vec![],
                Some(resources(("100m", "100Mi"), ("200m", "200Mi"))),
            ),
            expected(102, Some(20_000), Some(p), Some(200 * MI)),
        ),
        (
            "burstable-with-partial-pod-level-resources-limits",
            pod(
                vec![resources(("200m", "200Mi"), ("200m", "200Mi"))],
                vec![],
                Some(json!({"requests": {"cpu": "200m", "memory": "300Mi"}})),
            ),
            expected(204, Some(20_000), Some(p), Some(200 * MI)),
        ),
        (
            "guaranteed-with-pod-level-resources",
            pod(
                vec![none.clone()],
                vec![],
                Some(resources(("100m", "100Mi"), ("100m", "100Mi"))),
            ),
            expected(102, Some(10_000), Some(p), Some(100 * MI)),
        ),
    ];
    for (name, pod, want) in cases {
        assert_eq!(config(&pod, true, p), want, "{name}");
    }
}

#[test]
fn sidecars_overhead_and_the_pid_limit_count() {
    // A sidecar runs beside the app: its limit adds up; a regular init container's only peaks.
    let mut with_sidecar = pod(
        vec![resources(("100m", "100Mi"), ("100m", "100Mi"))],
        vec![
            resources(("300m", "50Mi"), ("300m", "50Mi")),
            resources(("100m", "100Mi"), ("100m", "100Mi")),
        ],
        None,
    );
    let init = with_sidecar
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap();
    init[1].restart_policy = Some("Always".to_owned());
    let got = config(&with_sidecar, true, QUOTA_PERIOD);
    // max(app 100m + sidecar 100m, init 300m) = 300m; memory max(200Mi, 50Mi) = 200Mi.
    assert_eq!(
        got,
        expected(307, Some(30_000), Some(QUOTA_PERIOD), Some(200 * MI))
    );

    let mut overhead = pod(
        vec![resources(("100m", "100Mi"), ("100m", "100Mi"))],
        vec![],
        None,
    );
    overhead.spec.as_mut().unwrap().overhead = Some(
        [("cpu", "50m"), ("memory", "10Mi")]
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_owned(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.to_owned()),
                )
            })
            .collect(),
    );
    assert_eq!(
        config(&overhead, true, QUOTA_PERIOD),
        expected(153, Some(15_000), Some(QUOTA_PERIOD), Some(110 * MI))
    );

    let settings = PodCgroupSettings {
        pod_pids_limit: 1024,
        ..PodCgroupSettings::default()
    };
    let limited = resource_config_for_pod(&pod(vec![json!({})], vec![], None), settings).unwrap();
    assert_eq!(limited.pids_limit, Some(1024));
    assert_eq!(
        resource_config_for_pod(
            &pod(vec![json!({})], vec![], None),
            PodCgroupSettings::default()
        )
        .unwrap()
        .pids_limit,
        None
    );
}

#[test]
fn shares_and_quota_follow_the_kubelets_conversions() {
    assert_eq!(milli_cpu_to_shares(0), 2);
    assert_eq!(milli_cpu_to_shares(1), 2);
    assert_eq!(milli_cpu_to_shares(1000), 1024);
    assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
    assert_eq!(milli_cpu_to_quota(0, QUOTA_PERIOD), 0);
    assert_eq!(milli_cpu_to_quota(5, QUOTA_PERIOD), 1_000);
    assert_eq!(milli_cpu_to_quota(250, QUOTA_PERIOD), 25_000);
}
