//! The setters on fixed inputs: order, reasons, messages, transition and heartbeat rules,
//! capacity and allocatable arithmetic, addresses and events.

use std::{net::IpAddr, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

use super::*;
use crate::{
    eviction::ThresholdValue,
    messages::RuntimeHealth,
    ports::{
        MachineFacts, MachineInfo,
        fakes::host::{FakeMachine, GIB},
    },
};

pub(super) fn machine() -> MachineInfo {
    FakeMachine.read()
}

pub(super) fn settings() -> StatusSettings {
    StatusSettings {
        max_pods: 110,
        pods_per_core: 0,
        reserved: [("cpu".to_owned(), 0.5), ("memory".to_owned(), GIB as f64)].into(),
        hard_eviction_memory: Some(ThresholdValue::Quantity(100 << 20)),
        hard_eviction_nodefs: Some(ThresholdValue::Percentage(10.0)),
        node_ips: Vec::new(),
        port: 10250,
        agent_version: "v0.1.0".into(),
        runtime_down_after: std::time::Duration::from_secs(30),
    }
}

pub(super) fn healthy(at: Instant) -> RuntimeHealth {
    RuntimeHealth {
        last_successful_probe: Some(at),
        runtime_error: None,
        network_error: None,
        runtime_version: Some("containerd://1.6.20".into()),
        observed_at: Timestamp::UNIX_EPOCH,
        simulated: false,
        images: Vec::new(),
        capabilities: crate::ports::RuntimeCapabilities::default(),
    }
}

fn run(
    machine: &MachineInfo,
    settings: &StatusSettings,
    runtime: Option<&RuntimeHealth>,
    now: Timestamp,
    node: &mut Node,
) -> SetterReport {
    let inputs = StatusInputs {
        volumes_in_use: None,
        node_name: "worker-1",
        machine,
        settings,
        runtime,
        pressure: None,
        previous_boot_id: None,
        now_instant: Instant::now(),
        health: &[],
    };
    run_setters(&inputs, now, node)
}

fn condition<'a>(node: &'a Node, kind: &str) -> &'a k8s_openapi::api::core::v1::NodeCondition {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|condition| condition.type_ == kind))
        .expect("condition present")
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("time")
}

#[test]
fn a_fresh_node_lists_the_pressure_conditions_then_ready_and_waits_for_the_runtime() {
    let mut node = Node::default();
    let report = run(&machine(), &settings(), None, at(0), &mut node);
    let kinds: Vec<&str> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .expect("conditions")
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        kinds,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    let ready = condition(&node, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("KubeletNotReady"))
    );
    assert_eq!(
        ready.message.as_deref(),
        Some("[container runtime status check may not have completed yet, network state unknown]")
    );
    let memory = condition(&node, "MemoryPressure");
    assert_eq!(
        (memory.status.as_str(), memory.reason.as_deref()),
        ("False", Some("KubeletHasSufficientMemory"))
    );
    assert_eq!(
        memory.message.as_deref(),
        Some("kubelet has sufficient memory available")
    );
    let reasons: Vec<&str> = report
        .events
        .iter()
        .map(|event| event.reason.as_str())
        .collect();
    assert_eq!(
        reasons,
        [
            "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure",
            "NodeHasSufficientPID"
        ],
        "no event for a first Ready"
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
}

#[test]
fn ready_turns_true_with_an_event_and_a_heartbeat_only_pass_keeps_transition_times() {
    let mut node = Node::default();
    run(&machine(), &settings(), None, at(0), &mut node);
    let runtime = healthy(Instant::now());
    let report = run(&machine(), &settings(), Some(&runtime), at(10), &mut node);
    let ready = condition(&node, "Ready").clone();
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_deref(),
            ready.message.as_deref()
        ),
        (
            "True",
            Some("KubeletReady"),
            Some("kubelet is posting ready status")
        )
    );
    assert_eq!(ready.last_transition_time.map(|time| time.0), Some(at(10)));
    assert_eq!(
        report
            .events
            .iter()
            .map(|event| event.reason.as_str())
            .collect::<Vec<_>>(),
        ["NodeReady"]
    );

    let report = run(&machine(), &settings(), Some(&runtime), at(20), &mut node);
    let again = condition(&node, "Ready");
    assert_eq!(
        again.last_transition_time.as_ref().map(|time| time.0),
        Some(at(10)),
        "unchanged status keeps its transition time"
    );
    assert_eq!(
        again.last_heartbeat_time.as_ref().map(|time| time.0),
        Some(at(20))
    );
    assert_eq!(
        condition(&node, "MemoryPressure")
            .last_transition_time
            .as_ref()
            .map(|time| time.0),
        Some(at(0))
    );
    assert!(report.events.is_empty());
}

#[test]
fn ready_messages_follow_the_kubelets_order_and_aggregation() {
    let now = Instant::now();
    let stale = now
        .checked_sub(Duration::from_secs(31))
        .expect("an instant 31s ago");
    let cases: Vec<(RuntimeHealth, &str)> = vec![
        (RuntimeHealth { last_successful_probe: Some(stale), ..healthy(now) }, "container runtime is down"),
        (
            RuntimeHealth {
                network_error: Some("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized".into()),
                ..healthy(now)
            },
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized",
        ),
        (
            RuntimeHealth {
                last_successful_probe: None,
                runtime_error: Some("container runtime not ready: RuntimeReady=false reason:Broken message:it broke".into()),
                network_error: Some("network state unknown".into()),
                ..healthy(now)
            },
            "[container runtime status check may not have completed yet, container runtime not ready: RuntimeReady=false reason:Broken message:it broke, network state unknown]",
        ),
    ];
    for (runtime, expected) in cases {
        let mut node = Node::default();
        let inputs = StatusInputs {
            volumes_in_use: None,
            node_name: "worker-1",
            machine: &machine(),
            settings: &settings(),
            runtime: Some(&runtime),
            pressure: None,
            previous_boot_id: None,
            now_instant: now,
            health: &[],
        };
        run_setters(&inputs, at(0), &mut node);
        assert_eq!(condition(&node, "Ready").message.as_deref(), Some(expected));
    }
}

#[test]
fn an_unhealthy_pleg_makes_the_node_not_ready_between_the_runtimes_staleness_and_its_error() {
    let now = Instant::now();
    let stale = now
        .checked_sub(Duration::from_secs(31))
        .expect("an instant 31s ago");
    let pleg = [
        "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s".to_owned(),
    ];
    let cases = [
        (healthy(now), pleg[0].clone()),
        (
            RuntimeHealth {
                last_successful_probe: Some(stale),
                runtime_error: Some("container runtime not ready: RuntimeReady=false".into()),
                ..healthy(now)
            },
            format!(
                "[container runtime is down, {}, container runtime not ready: RuntimeReady=false]",
                pleg[0]
            ),
        ),
    ];
    for (runtime, expected) in cases {
        let mut node = Node::default();
        let inputs = StatusInputs {
            volumes_in_use: None,
            node_name: "worker-1",
            machine: &machine(),
            settings: &settings(),
            runtime: Some(&runtime),
            pressure: None,
            previous_boot_id: None,
            now_instant: now,
            health: &pleg,
        };
        run_setters(&inputs, at(0), &mut node);
        let ready = condition(&node, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.message.as_deref()),
            ("False", Some(expected.as_str()))
        );
    }
}

#[test]
fn a_simulated_runtime_reported_once_never_goes_down() {
    let now = Instant::now();
    let long_ago = now
        .checked_sub(Duration::from_secs(3600))
        .expect("an instant an hour ago");
    let simulated = RuntimeHealth {
        last_successful_probe: Some(long_ago),
        simulated: true,
        ..healthy(now)
    };
    let mut node = Node::default();
    run(&machine(), &settings(), Some(&simulated), at(0), &mut node);
    assert_eq!(condition(&node, "Ready").status, "True");
    let real = RuntimeHealth {
        simulated: false,
        ..simulated
    };
    run(&machine(), &settings(), Some(&real), at(0), &mut node);
    assert_eq!(
        condition(&node, "Ready").message.as_deref(),
        Some("container runtime is down"),
        "a real runtime's health ages"
    );
}

#[test]
fn missing_capacity_keeps_the_node_not_ready() {
    let mut without_storage = machine();
    without_storage.ephemeral_storage_bytes = None;
    let mut node = Node::default();
    run(
        &without_storage,
        &settings(),
        Some(&healthy(Instant::now())),
        at(0),
        &mut node,
    );
    assert_eq!(
        condition(&node, "Ready").message.as_deref(),
        Some("missing node capacity for resources: ephemeral-storage")
    );
}

#[test]
fn capacity_comes_from_the_host_and_allocatable_holds_back_reservations_and_eviction() {
    let mut node = Node::default();
    run(&machine(), &settings(), None, at(0), &mut node);
    let status = node.status.expect("status");
    let show = |map: Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >|
     -> Vec<(String, String)> {
        map.unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, value.0))
            .collect()
    };
    assert_eq!(
        show(status.capacity),
        [
            ("cpu", "2"),
            ("ephemeral-storage", "100Gi"),
            ("memory", "8Gi"),
            ("pods", "110")
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    // memory: 8Gi − 1Gi reserved − 100Mi hard eviction; storage: 100Gi − 10%.
    assert_eq!(
        show(status.allocatable),
        [
            ("cpu", "1500m"),
            ("ephemeral-storage", "90Gi"),
            ("memory", "7068Mi"),
            ("pods", "110")
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
    );
    let info = status.node_info.expect("nodeInfo");
    assert_eq!(
        (
            info.machine_id.as_str(),
            info.boot_id.as_str(),
            info.kubelet_version.as_str()
        ),
        ("m-1", "boot-1", "v0.1.0")
    );
    assert_eq!(
        (
            info.operating_system.as_str(),
            info.container_runtime_version.as_str()
        ),
        ("linux", "Unknown")
    );
    assert_eq!(
        status
            .daemon_endpoints
            .and_then(|endpoints| endpoints.kubelet_endpoint)
            .map(|endpoint| endpoint.port),
        Some(10250)
    );
}

#[test]
fn the_hostname_address_is_the_node_name_as_with_hostname_override() {
    let mut named_otherwise = machine();
    named_otherwise.hostname = "vm".into();
    let mut node = Node::default();
    run(&named_otherwise, &settings(), None, at(0), &mut node);
    let hostnames: Vec<String> = node
        .status
        .and_then(|s| s.addresses)
        .expect("addresses")
        .into_iter()
        .filter(|a| a.type_ == "Hostname")
        .map(|a| a.address)
        .collect();
    assert_eq!(hostnames, ["worker-1"]);
}

#[test]
fn addresses_are_the_internal_ip_then_the_hostname() {
    let mut node = Node::default();
    run(&machine(), &settings(), None, at(0), &mut node);
    let addresses: Vec<(String, String)> = node
        .status
        .and_then(|s| s.addresses)
        .expect("addresses")
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        [
            ("InternalIP".to_owned(), "192.0.2.2".to_owned()),
            ("Hostname".to_owned(), "worker-1".to_owned())
        ]
    );

    let mut foreign = settings();
    foreign.node_ips = vec!["203.0.113.9".parse::<IpAddr>().expect("ip")];
    let mut node = Node::default();
    let report = run(&machine(), &foreign, None, at(0), &mut node);
    let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        ["node IP: \"203.0.113.9\" not found in the host's network interfaces"]
    );
    assert_eq!(
        report.errors,
        [super::SetterError::NodeIpNotOnHost {
            ip: "203.0.113.9".parse().expect("ip")
        }]
    );
    assert!(
        node.status.and_then(|s| s.addresses).is_none(),
        "addresses untouched on error"
    );
}

#[test]
fn a_new_boot_id_is_a_rebooted_warning() {
    let mut node = Node::default();
    let inputs = StatusInputs {
        volumes_in_use: None,
        node_name: "worker-1",
        machine: &machine(),
        settings: &settings(),
        runtime: None,
        pressure: None,
        previous_boot_id: Some("boot-0"),
        now_instant: Instant::now(),
        health: &[],
    };
    let report = run_setters(&inputs, at(0), &mut node);
    let rebooted = report
        .events
        .iter()
        .find(|event| event.reason == "Rebooted")
        .expect("a Rebooted event");
    assert!(rebooted.warning);
    assert_eq!(
        rebooted.message,
        "Node worker-1 has been rebooted, boot id: boot-1"
    );
}

#[test]
fn images_come_from_the_runtime_report_and_wait_for_the_first() {
    let mut node = Node::default();
    run(&machine(), &settings(), None, at(0), &mut node);
    assert_eq!(
        node.status
            .as_ref()
            .and_then(|status| status.images.as_ref()),
        None
    );
    let busybox = crate::ports::ImageInfo {
        id: "sha256:b".to_owned(),
        repo_tags: vec!["nodepulse.test/busybox:1".to_owned()],
        size_bytes: 1_234_567,
        ..Default::default()
    };
    let runtime = RuntimeHealth {
        images: vec![busybox],
        ..healthy(Instant::now())
    };
    let report = run(&machine(), &settings(), Some(&runtime), at(1), &mut node);
    assert!(report.errors.is_empty(), "{report:?}");
    let images = node
        .status
        .as_ref()
        .and_then(|status| status.images.clone());
    let images = images.expect("status.images");
    assert_eq!(
        (images[0].names.as_deref(), images[0].size_bytes),
        (
            Some(&["nodepulse.test/busybox:1".to_owned()][..]),
            Some(1_234_567)
        )
    );
}

/// Runs `f` on inputs that differ from the defaults only in `volumesInUse`.
pub(super) fn with_volume_inputs<R>(
    volumes_in_use: Option<&[String]>,
    f: impl FnOnce(&StatusInputs<'_>) -> R,
) -> R {
    let (machine, settings) = (machine(), settings());
    f(&StatusInputs {
        volumes_in_use,
        node_name: "worker-1",
        machine: &machine,
        settings: &settings,
        runtime: None,
        pressure: None,
        previous_boot_id: None,
        now_instant: Instant::now(),
        health: &[],
    })
}

#[test]
fn setter_errors_say_what_they_said_as_strings() {
    use super::SetterError;
    let ip: IpAddr = "127.0.0.1".parse().expect("ip");
    let cases = [
        (
            SetterError::UnusableNodeIp { ip },
            "node IP 127.0.0.1: must not be loopback, multicast, link-local or unspecified",
        ),
        (
            SetterError::NodeIpNotOnHost { ip },
            "node IP: \"127.0.0.1\" not found in the host's network interfaces",
        ),
        (
            SetterError::NoNodeAddress {
                node: "worker-1".to_owned(),
            },
            "can't get ip address of node worker-1",
        ),
        (
            SetterError::IncompleteMachineInfo,
            "machine info is incomplete: cpu or memory could not be read",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}

#[test]
fn a_loopback_node_ip_is_refused_and_leaves_the_addresses_alone() {
    let mut loopback = settings();
    loopback.node_ips = vec!["127.0.0.1".parse::<IpAddr>().expect("ip")];
    let mut node = Node::default();
    let report = run(&machine(), &loopback, None, at(0), &mut node);
    assert_eq!(
        report.errors,
        [super::SetterError::UnusableNodeIp {
            ip: "127.0.0.1".parse().expect("ip")
        }]
    );
    assert!(node.status.and_then(|s| s.addresses).is_none());
}
