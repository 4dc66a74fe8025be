//! The kubelet `/metrics` text: histograms as the Go client writes them, the pods view's
//! counts, certificate TTLs.

use std::path::PathBuf;

use nodepulse_actors::{
    kubelet_metrics::{Desc, Histograms},
    pods::{PodRecord, PodsPublisher},
    ports::{ContainerRecord, SandboxRecord},
};

use super::*;

#[test]
fn a_histogram_is_written_with_cumulative_le_buckets_sum_and_count_labels_sorted() {
    const DESC: Desc = Desc {
        name: "storage_operation_duration_seconds",
        help: "[ALPHA] Storage operation duration",
        kind: "histogram",
        labels: &["volume_plugin", "operation_name"],
    };
    let family = Histograms::new(DESC, &[0.1, 2.5]);
    family.observe(&["kubernetes.io/empty-dir", "volume_mount"], 0.05);
    family.observe(&["kubernetes.io/empty-dir", "volume_mount"], 3.0);
    let mut text = Text::default();
    histograms(&mut text, &family);
    let labels = "operation_name=\"volume_mount\",volume_plugin=\"kubernetes.io/empty-dir\"";
    assert_eq!(
        text.finish(),
        format!(
            "# HELP storage_operation_duration_seconds [ALPHA] Storage operation duration\n\
             # TYPE storage_operation_duration_seconds histogram\n\
             storage_operation_duration_seconds_bucket{{{labels},le=\"0.1\"}} 1\n\
             storage_operation_duration_seconds_bucket{{{labels},le=\"2.5\"}} 1\n\
             storage_operation_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 2\n\
             storage_operation_duration_seconds_sum{{{labels}}} 3.05\n\
             storage_operation_duration_seconds_count{{{labels}}} 2\n"
        )
    );
}

fn container(name: &str, state: ContainerState) -> ContainerRecord {
    ContainerRecord {
        name: name.into(),
        id: format!("{name}-id"),
        state,
        restart_count: 0,
        log_path: PathBuf::new(),
        image: String::new(),
        image_ref: String::new(),
        created_at: None,
        started_at: None,
        finished_at: None,
        exit_code: None,
    }
}

#[test]
fn running_pods_have_a_ready_sandbox_and_every_container_instance_counts_by_state() {
    let publisher = PodsPublisher::default();
    let sandbox = |ready| SandboxRecord {
        id: "s".into(),
        ready,
        created_at: None,
    };
    for (uid, ready, containers) in [
        (
            "u1",
            true,
            vec![
                container("app", ContainerState::Running),
                container("app", ContainerState::Exited),
            ],
        ),
        ("u2", false, vec![container("job", ContainerState::Exited)]),
    ] {
        publisher.record(PodRecord {
            uid: uid.into(),
            namespace: "default".into(),
            name: uid.into(),
            deleting: false,
            sandboxes: vec![sandbox(ready)],
            containers,
        });
    }
    let mut text = Text::default();
    running(&mut text, &publisher.view().snapshot());
    let text = text.finish();
    for line in [
        "kubelet_running_pods 1\n",
        "kubelet_running_containers{container_state=\"running\"} 1\n",
        "kubelet_running_containers{container_state=\"exited\"} 2\n",
        "kubelet_running_containers{container_state=\"created\"} 0\n",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

#[test]
fn a_ttl_is_whole_seconds_left_and_negative_once_expired() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let at = |millis| SystemTime::UNIX_EPOCH + Duration::from_millis(millis);
    assert_eq!(ttl_seconds(at(1_090_900), now), 90.0);
    assert_eq!(ttl_seconds(at(999_500), now), -0.0);
    assert_eq!(ttl_seconds(at(990_000), now), -10.0);
}
