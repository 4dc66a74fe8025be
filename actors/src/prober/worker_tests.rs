//! The pure worker rules in tables: thresholds, publication on change only, holds, events,
//! gating and initial delay, the first probe's jitter bounds, and the probe spec defaults.

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{Container, ContainerPort, EnvVar, ExecAction, HTTPGetAction, Probe},
    apimachinery::pkg::util::intstr::IntOrString,
};
use tokio::time::Instant;

use super::{
    spec::{ProbeKind, ProbeSettings, ProbeSpecError, probe_target},
    worker::{ProbeResult, Skip, WorkerMemory, first_delay, record, should_probe},
};
use crate::ports::{ProbeAction, ProbeError, ProbeOutcome};

fn settings(success: u32, failure: u32) -> ProbeSettings {
    ProbeSettings {
        initial_delay: Duration::from_secs(5),
        period: Duration::from_secs(10),
        timeout: Duration::from_secs(1),
        success_threshold: success,
        failure_threshold: failure,
        termination_grace_seconds: None,
    }
}

fn fail() -> ProbeOutcome {
    ProbeOutcome::Failure("HTTP probe failed with statuscode: 500".into())
}

#[test]
fn failures_publish_only_at_the_threshold_and_only_once() {
    let mut memory = WorkerMemory::new(ProbeKind::Readiness, "c1");
    let settings = settings(1, 3);
    let published: Vec<_> = (0..4)
        .map(|_| {
            record(
                ProbeKind::Readiness,
                &mut memory,
                &settings,
                &ProbeOutcome::Success("".into()),
            )
        })
        .map(|r| r.published)
        .collect();
    assert_eq!(published, [Some(ProbeResult::Success), None, None, None]);
    let published: Vec<_> = (0..4)
        .map(|_| record(ProbeKind::Readiness, &mut memory, &settings, &fail()).published)
        .collect();
    assert_eq!(published, [None, None, Some(ProbeResult::Failure), None]);
    assert_eq!(memory.consecutive_failures, 4);
    assert_eq!(memory.consecutive_successes, 0);
    assert!(!memory.held, "readiness keeps probing after a failure");
}

#[test]
fn totals_count_every_probe_run_by_result_and_not_the_ones_that_errored() {
    let mut memory = WorkerMemory::new(ProbeKind::Readiness, "c1");
    let settings = settings(1, 3);
    for outcome in [
        ProbeOutcome::Success("".into()),
        ProbeOutcome::Warning("redirect".into()),
        fail(),
        ProbeOutcome::Unknown(ProbeError::Exec("exec failed".into())),
        ProbeOutcome::Success("".into()),
    ] {
        record(ProbeKind::Readiness, &mut memory, &settings, &outcome);
    }
    assert_eq!(
        memory.totals,
        crate::prober::ProbeTotals {
            successful: 3,
            failed: 1
        }
    );
}

#[test]
fn success_threshold_needs_consecutive_successes() {
    let mut memory = WorkerMemory::new(ProbeKind::Readiness, "c1");
    let settings = settings(2, 3);
    let ok = ProbeOutcome::Success(String::new());
    assert_eq!(
        record(ProbeKind::Readiness, &mut memory, &settings, &ok).published,
        None
    );
    record(ProbeKind::Readiness, &mut memory, &settings, &fail());
    assert_eq!(
        record(ProbeKind::Readiness, &mut memory, &settings, &ok).published,
        None
    );
    let second = record(ProbeKind::Readiness, &mut memory, &settings, &ok);
    assert_eq!(second.published, Some(ProbeResult::Success));
}

#[test]
fn every_failing_probe_records_the_kubelets_event_text() {
    let mut memory = WorkerMemory::new(ProbeKind::Liveness, "c1");
    let first = record(ProbeKind::Liveness, &mut memory, &settings(1, 3), &fail());
    let event = first.event.expect("an event before the threshold too");
    assert_eq!(event.reason, "Unhealthy");
    assert_eq!(
        event.message,
        "Liveness probe failed: HTTP probe failed with statuscode: 500"
    );
    let errored = ProbeOutcome::Unknown(ProbeError::Exec("runtime down".into()));
    let event = record(ProbeKind::Readiness, &mut memory, &settings(1, 3), &errored)
        .event
        .unwrap();
    assert_eq!(
        event.message,
        "Readiness probe errored and resulted in Failure state: exec: runtime down"
    );
    let warning = ProbeOutcome::Warning("Probe terminated redirects, Response body: x".into());
    let recorded = record(ProbeKind::Readiness, &mut memory, &settings(1, 3), &warning);
    let event = recorded.event.unwrap();
    assert_eq!(
        (event.reason, memory.last_result),
        ("ProbeWarning", Some(ProbeResult::Success))
    );
    assert_eq!(
        event.message,
        "Readiness probe warning: Probe terminated redirects, Response body: x"
    );
}

#[test]
fn initial_results_are_the_kubelets() {
    assert_eq!(
        WorkerMemory::new(ProbeKind::Readiness, "c").published,
        Some(ProbeResult::Failure)
    );
    assert_eq!(
        WorkerMemory::new(ProbeKind::Liveness, "c").published,
        Some(ProbeResult::Success)
    );
    assert_eq!(WorkerMemory::new(ProbeKind::Startup, "c").published, None);
}

#[test]
fn liveness_failure_and_any_startup_result_hold_the_worker() {
    let mut liveness = WorkerMemory::new(ProbeKind::Liveness, "c1");
    let once = settings(1, 1);
    assert_eq!(
        record(ProbeKind::Liveness, &mut liveness, &once, &fail()).published,
        Some(ProbeResult::Failure)
    );
    assert!(liveness.held);
    let mut startup = WorkerMemory::new(ProbeKind::Startup, "c1");
    let ok = ProbeOutcome::Success(String::new());
    assert_eq!(
        record(ProbeKind::Startup, &mut startup, &once, &ok).published,
        Some(ProbeResult::Success)
    );
    assert!(startup.held);
    let now = Instant::now();
    let at = now - Duration::from_secs(60);
    assert_eq!(
        should_probe(ProbeKind::Startup, &startup, &once, at, false, now),
        Err(Skip::Held)
    );
}

#[test]
fn gating_and_initial_delay_decide_whether_a_tick_probes() {
    let now = Instant::now() + Duration::from_secs(100);
    let s = settings(1, 3);
    let long_ago = now - Duration::from_secs(60);
    let just_now = now - Duration::from_secs(4);
    let memory = |kind| WorkerMemory::new(kind, "c1");
    let cases = [
        (ProbeKind::Readiness, long_ago, false, Err(Skip::NotStarted)),
        (ProbeKind::Liveness, long_ago, false, Err(Skip::NotStarted)),
        (
            ProbeKind::Startup,
            long_ago,
            true,
            Err(Skip::AlreadyStarted),
        ),
        (ProbeKind::Startup, long_ago, false, Ok(())),
        (ProbeKind::Liveness, just_now, true, Err(Skip::InitialDelay)),
        (
            ProbeKind::Liveness,
            now - Duration::from_secs(5),
            true,
            Ok(()),
        ),
    ];
    for (kind, started_at, started, expected) in cases {
        let got = should_probe(kind, &memory(kind), &s, started_at, started, now);
        assert_eq!(got, expected, "{kind:?} started={started}");
    }
}

#[test]
fn first_probe_is_jittered_within_the_period_only_while_the_prober_is_young() {
    let period = Duration::from_secs(10);
    for unit in [0.0, 0.25, 0.999_999, 1.0] {
        let delay = first_delay(period, Duration::from_secs(3), unit);
        assert!(delay < period, "{unit} gave {delay:?}");
    }
    assert_eq!(
        first_delay(period, Duration::from_secs(3), 0.5),
        Duration::from_secs(5)
    );
    assert_eq!(
        first_delay(period, Duration::from_secs(10), 0.5),
        Duration::ZERO
    );
}

#[test]
fn settings_take_the_api_defaults() {
    let defaults = ProbeSettings::of(&Probe::default());
    assert_eq!(defaults.period, Duration::from_secs(10));
    assert_eq!(defaults.timeout, Duration::from_secs(1));
    assert_eq!(
        (defaults.success_threshold, defaults.failure_threshold),
        (1, 3)
    );
    assert_eq!(defaults.initial_delay, Duration::ZERO);
}

#[test]
fn ports_resolve_by_number_name_or_numeric_string() {
    let container = Container {
        ports: Some(vec![ContainerPort {
            name: Some("web".into()),
            container_port: 8080,
            ..Default::default()
        }]),
        ..Default::default()
    };
    let http = |port| Probe {
        http_get: Some(HTTPGetAction {
            port,
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let port_of =
        |port| match probe_target(&http(port), &container, "c", "10.0.0.5").map(|t| t.action) {
            Ok(ProbeAction::HttpGet {
                port,
                scheme,
                host,
                path,
                ..
            }) => {
                assert_eq!(
                    (scheme.as_str(), host.as_str(), path.as_str()),
                    ("http", "10.0.0.5", "/")
                );
                Ok(port)
            }
            other => other.map(|_| 0),
        };
    assert_eq!(port_of(IntOrString::Int(81)), Ok(81));
    assert_eq!(port_of(IntOrString::String("web".into())), Ok(8080));
    assert_eq!(port_of(IntOrString::String("9090".into())), Ok(9090));
    assert_eq!(
        port_of(IntOrString::String("nope".into())),
        Err(ProbeSpecError::InvalidPort("nope".into()))
    );
    assert_eq!(
        port_of(IntOrString::Int(70000)),
        Err(ProbeSpecError::InvalidPort("70000".into()))
    );
    assert_eq!(
        probe_target(&Probe::default(), &container, "c", "ip"),
        Err(ProbeSpecError::NoHandler)
    );
}

#[test]
fn exec_commands_expand_only_literal_env() {
    let container = Container {
        env: Some(vec![EnvVar {
            name: "FILE".into(),
            value: Some("/tmp/ready".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let probe = Probe {
        exec: Some(ExecAction {
            command: Some(vec!["cat".into(), "$(FILE)".into(), "$(OTHER)".into()]),
        }),
        ..Default::default()
    };
    let target = probe_target(&probe, &container, "containerd://c", "ip").unwrap();
    let ProbeAction::Exec { command } = target.action else {
        panic!("exec")
    };
    assert_eq!(command, ["cat", "/tmp/ready", "$(OTHER)"]);
}
