//! The log manager's core against the kubelet's rules: which rotated files go, the rotated
//! name, and one rotation on a real directory through the fake runtime (a failed reopen puts
//! the log back).

use std::sync::Arc;

use jiff::{Timestamp, tz::TimeZone};

use std::{io::Read, os::unix::fs::PermissionsExt, path::Path};

use super::{Outcome, Policy, RotationError, compress, plan, rotate, rotated_path};
use crate::{
    clock,
    ports::{
        ContainerConfig, ContainerRuntime, SandboxConfig, fakes::container_runtime::FakeRuntime,
    },
};

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("compress");
    encoder.finish().expect("finish")
}

fn gunzip(path: &Path) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("open"))
        .read_to_end(&mut plain)
        .expect("a whole gzip stream");
    plain
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

#[test]
fn the_oldest_rotated_files_go_until_max_files_minus_two_are_left() {
    let rotated = names(&[
        "0.log.20261201-100020",
        "0.log.20261201-100000.gz",
        "0.log.20261201-100010.gz",
    ]);
    assert_eq!(
        plan(&rotated, 3),
        ["0.log.20261201-100000.gz", "0.log.20261201-100010.gz"]
    );
    assert_eq!(plan(&rotated, 4), ["0.log.20261201-100000.gz"]);
    assert!(plan(&rotated, 5).is_empty());
    assert_eq!(plan(&rotated, 2).len(), 3, "only the current log is left");
}

#[test]
fn leftovers_of_a_failed_compression_go_first() {
    let rotated = names(&[
        "0.log.20261201-100000",
        "0.log.20261201-100000.gz",
        "0.log.20261201-100010.tmp",
        "0.log.20261201-100020",
    ]);
    assert_eq!(
        plan(&rotated, 5),
        ["0.log.20261201-100000", "0.log.20261201-100010.tmp"]
    );
}

#[test]
fn the_rotated_name_is_the_kubelets_timestamp_in_local_time() {
    let now: Timestamp = "2026-12-01T23:04:05.9Z".parse().expect("time");
    let log = std::path::Path::new("/var/log/pods/ns_p_u/app/0.log");
    assert_eq!(
        rotated_path(log, now, &TimeZone::UTC),
        std::path::Path::new("/var/log/pods/ns_p_u/app/0.log.20261201-230405")
    );
    let east = TimeZone::fixed(jiff::tz::offset(2));
    assert!(
        rotated_path(log, now, &east)
            .to_string_lossy()
            .ends_with("0.log.20261202-010405")
    );
}

async fn running_container(runtime: &FakeRuntime) -> String {
    let sandbox = runtime
        .run_pod_sandbox(SandboxConfig::default(), String::new())
        .await
        .expect("sandbox");
    let id = runtime
        .create_container(
            sandbox,
            ContainerConfig::default(),
            SandboxConfig::default(),
        )
        .await
        .expect("container");
    runtime.start_container(id.clone()).await.expect("started");
    id
}

#[actix_rt::test]
async fn a_pass_rotates_only_logs_at_or_over_the_size_and_those_it_cannot_read() {
    let dir = tempfile::tempdir().expect("dir");
    let container = |name: &str, bytes: usize| {
        let log = dir.path().join(format!("{name}.log"));
        if bytes > 0 {
            std::fs::write(&log, "x".repeat(bytes)).expect("write");
        }
        (name.to_owned(), log)
    };
    let containers = vec![
        container("under", 99),
        container("at", 100),
        container("over", 150),
        container("missing", 0),
    ];
    let due = super::files::due(containers.clone(), 100).await;
    assert_eq!(due, containers[1..].to_vec());
}

#[actix_rt::test]
async fn a_log_over_the_size_is_renamed_reopened_and_its_oldest_files_removed() {
    let runtime = Arc::new(FakeRuntime::new(clock::system()));
    let id = running_container(&runtime).await;
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("0.log");
    std::fs::write(&log, "x".repeat(100)).expect("write");
    // The kubelet's own leavings: two compressed rotations and the newest, uncompressed.
    for old in ["0.log.20261201-095950.gz", "0.log.20261201-100000.gz"] {
        std::fs::write(dir.path().join(old), gzip(b"older")).expect("write");
    }
    std::fs::write(dir.path().join("0.log.20261201-100010"), "old").expect("write");
    std::fs::write(dir.path().join("1.log.20261201-100000"), "another instance").expect("write");
    let policy = Policy {
        max_size: 100,
        max_files: 4,
        zone: TimeZone::UTC,
    };
    let now: Timestamp = "2026-12-01T10:00:20Z".parse().expect("time");
    let dynamic = Arc::clone(&runtime) as Arc<dyn ContainerRuntime>;
    let outcome = rotate(dynamic, policy.clone(), id.clone(), log.clone(), now)
        .await
        .expect("rotated");
    let to = dir.path().join("0.log.20261201-100020");
    assert_eq!(
        outcome,
        Outcome::Rotated {
            to: to.clone(),
            removed: vec![dir.path().join("0.log.20261201-095950.gz")],
            compressed: vec![dir.path().join("0.log.20261201-100010")],
        }
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "0.log.20261201-100000.gz",
            "0.log.20261201-100010.gz",
            "0.log.20261201-100020",
            "1.log.20261201-100000"
        ]
    );
    assert_eq!(
        gunzip(&dir.path().join("0.log.20261201-100010.gz")),
        b"old",
        "the newest rotation of before is compressed whole"
    );
    assert_eq!(std::fs::read(&to).expect("rotated"), b"x".repeat(100));
    assert!(
        runtime
            .calls()
            .contains(&format!("ReopenContainerLog {id}"))
    );

    // Under the size: left alone.
    std::fs::write(&log, "x".repeat(99)).expect("write");
    let dynamic = Arc::clone(&runtime) as Arc<dyn ContainerRuntime>;
    let small = rotate(dynamic, policy, id, log.clone(), now).await;
    assert_eq!(small.expect("no error"), Outcome::Small);
}

#[actix_rt::test]
async fn a_reopen_the_runtime_refuses_puts_the_log_back() {
    let runtime = Arc::new(FakeRuntime::new(clock::system())) as Arc<dyn ContainerRuntime>;
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("0.log");
    std::fs::write(&log, "x".repeat(10)).expect("write");
    let policy = Policy {
        max_size: 1,
        max_files: 5,
        zone: TimeZone::UTC,
    };
    let now: Timestamp = "2026-12-01T10:00:20Z".parse().expect("time");
    let refused = rotate(runtime, policy, "gone".to_owned(), log.clone(), now).await;
    assert!(
        matches!(refused, Err(RotationError::Reopen { ref id, .. }) if id == "gone"),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(&log).expect("back"), "x".repeat(10));
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
}

#[test]
fn compression_keeps_the_mode_and_leaves_only_the_gz() {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("0.log.20261201-100000");
    let content: Vec<u8> = (0..200_000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    std::fs::write(&log, &content).expect("write");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    compress(&log).expect("compressed");
    let gz = dir.path().join("0.log.20261201-100000.gz");
    assert_eq!(gunzip(&gz), content);
    let metadata = std::fs::metadata(&gz).expect("stat");
    assert_eq!(metadata.permissions().mode() & 0o777, 0o640);
    assert!(
        metadata.len() < content.len() as u64 / 4,
        "{}",
        metadata.len()
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("0.log.20261201-100000.gz")]);

    // A file that cannot be read: an error, and no temporary file left behind.
    let missing = dir.path().join("0.log.20261201-100010");
    assert!(compress(&missing).is_err());
    assert!(!dir.path().join("0.log.20261201-100010.tmp").exists());
}
