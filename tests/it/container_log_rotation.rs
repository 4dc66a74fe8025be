//! Container log rotation on real containers (containerd): ReopenContainerLog makes the
//! runtime write a new file at the log path; a node with a small `containerLogMaxSize`
//! rotates a chatty container's log, keeps at most `containerLogMaxFiles` files, and
//! `/containerLogs` serves the newest lines; a log followed across its rotations loses no
//! line and repeats none.

use std::path::Path;

use nodepulse_actors::ports::{ContainerRuntime, ContainerRuntimeError, ContainerState};

use super::cri_pods::{NAMESPACE, create_pod, shell, spec};
use super::kubelet_api_logs::{Api, serve};
use nodepulse_testkit::{
    PATIENCE,
    cluster::TestCluster,
    cri_fixture::{CriFixture, shell_container},
    cri_node::CriNode,
    eventually,
    kubelet_client::Answer,
};

/// Rotation as small and as often as the kubelet allows: 1 KiB (about 20 lines), 3 files,
/// every 3 s.
fn small_rotation(_: &Path) -> String {
    "containerLogMaxSize: 1Ki\ncontainerLogMaxFiles: 3\ncontainerLogMonitorInterval: 3s\n"
        .to_owned()
}

/// A shell writing `line-1` … `line-<count>`, one every 20 ms, then running until SIGTERM.
fn counting(count: u32) -> String {
    format!(
        "i=0; while [ $i -lt {count} ]; do i=$((i+1)); echo line-$i; sleep 0.02; done; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
    )
}

/// The numbers of the `line-N` lines of a CRI log file's content.
fn numbers_in_cri_log(content: &str) -> Vec<u32> {
    content
        .lines()
        .filter_map(|line| line.rsplit_once(" line-"))
        .filter_map(|(_, number)| number.parse().ok())
        .collect()
}

/// The rotated files beside `log` (`<log>.<timestamp>`), by name.
/// A rotated file's text, gunzipped when it is a `.gz`: the newest rotated file is compressed
/// too when a rotation's reopen fails as its container exits (the rename is undone, the
/// compression before it is not, as in the kubelet's rotateLog).
fn rotated_text(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    if path.extension().is_some_and(|ext| ext == "gz") {
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).ok()?;
    } else {
        std::io::Read::read_to_string(&mut { file }, &mut text).ok()?;
    }
    Some(text)
}

fn rotated_beside(log: &Path) -> Vec<String> {
    let prefix = format!("{}.", log.file_name().unwrap_or_default().to_string_lossy());
    let mut names: Vec<String> = std::fs::read_dir(log.parent().expect("a directory"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// GETs `path` until it is answered 200 with lines: between a rotation's rename and the
/// runtime's reopen the log path is missing for a moment (the kubelet answers 400 then too),
/// and right after it the new file is still empty.
async fn get_served(api: &Api, path: &str) -> Answer {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let answer = api.client.get(path).await;
        if answer.status == 200 && !answer.body.is_empty() {
            return answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path} not served after {PATIENCE:?}: {} {}",
            answer.status,
            answer.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The `N` of each `line-N` of a served body; a line of another shape fails the test.
fn served_numbers(body: &str) -> Vec<u32> {
    body.lines()
        .map(|line| {
            line.strip_prefix("line-")
                .and_then(|number| number.parse().ok())
                .unwrap_or_else(|| panic!("not a line-N: {line:?} in {body:?}"))
        })
        .collect()
}

#[tokio::test]
async fn reopen_container_log_has_containerd_write_a_new_file_at_the_log_path() {
    let Some(()) = CriFixture::required(
        "reopen_container_log_has_containerd_write_a_new_file_at_the_log_path",
    ) else {
        return;
    };
    let fixture = CriFixture::start("log-reopen").await;
    let sandbox = fixture.sandbox_config("chatty");
    let log = sandbox.log_directory.join("app/0.log");
    let sandbox_id = fixture
        .client
        .run_pod_sandbox(sandbox.clone(), String::new())
        .await
        .expect("RunPodSandbox");
    let id = fixture
        .client
        .create_container(
            sandbox_id,
            shell_container("app", &counting(100_000), vec![]),
            sandbox,
        )
        .await
        .expect("CreateContainer");
    fixture
        .client
        .start_container(id.clone())
        .await
        .expect("StartContainer");
    eventually("the container logs", || {
        std::fs::metadata(&log).is_ok_and(|metadata| metadata.len() > 0)
    })
    .await;
    let renamed = log.with_extension("log.renamed");
    std::fs::rename(&log, &renamed).expect("rename the log");
    fixture
        .client
        .reopen_container_log(id.clone())
        .await
        .expect("ReopenContainerLog");
    eventually("containerd writes a new file at the log path", || {
        std::fs::read_to_string(&log).is_ok_and(|content| !numbers_in_cri_log(&content).is_empty())
    })
    .await;
    let before = numbers_in_cri_log(&std::fs::read_to_string(&renamed).expect("renamed"));
    let after = numbers_in_cri_log(&std::fs::read_to_string(&log).expect("new"));
    assert!(
        before.last() < after.first(),
        "the new file goes on where the renamed one ended: {before:?} then {after:?}"
    );

    let unknown = fixture
        .client
        .reopen_container_log("no-such-container".to_owned())
        .await;
    assert!(
        matches!(
            unknown,
            Err(ContainerRuntimeError::NotFound {
                method: "ReopenContainerLog",
                ..
            })
        ),
        "{unknown:?}"
    );
}

/// Starts a CRI node that rotates logs small and often, on a fixture of its own.
async fn rotating_node(test: &str, prefix: &str) -> Option<(CriNode, CriFixture, TestCluster)> {
    CriFixture::required(test)?;
    let cluster = TestCluster::start().await;
    let fixture = CriFixture::start(prefix).await;
    let node = CriNode::start_with(&cluster.kubeconfig, &fixture, prefix, small_rotation).await;
    Some((node, fixture, cluster))
}

/// The log path of pod `name`'s running `app` container.
async fn running_log(node: &CriNode, name: &str) -> std::path::PathBuf {
    let pods = node.handle.views.pods.clone();
    eventually("the container runs", || {
        pods.snapshot()
            .container(NAMESPACE, name, "app")
            .is_some_and(|c| c.state == ContainerState::Running)
    })
    .await;
    pods.snapshot()
        .container(NAMESPACE, name, "app")
        .expect("the container")
        .log_path
        .clone()
}

#[actix_rt::test]
async fn a_log_over_the_size_is_rotated_keeping_at_most_max_files_and_the_newest_lines_are_served()
{
    let test =
        "a_log_over_the_size_is_rotated_keeping_at_most_max_files_and_the_newest_lines_are_served";
    let Some((node, _fixture, cluster)) = rotating_node(test, "log-rotate").await else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-chatty", node.name);
        let app = shell("app", &counting(100_000));
        create_pod(&cluster, &node.name, &name, spec("Always", serde_json::json!([app]))).await;
        let log = running_log(&node, &name).await;
        // Three rotations: with at most one rotated file kept beside the current log and
        // the one being rotated, the first two rotated files must have gone.
        let mut seen = std::collections::BTreeSet::new();
        eventually("the log was rotated three times", || {
            let rotated = rotated_beside(&log);
            assert!(
                rotated.len() <= 2,
                "at most containerLogMaxFiles (3) files, the current one included: {rotated:?}"
            );
            seen.extend(rotated);
            seen.len() >= 3
        })
        .await;
        // Every rotated file but the newest is gzip'd, as the kubelet leaves them (polled: a
        // rotation may be between its compression and its rename).
        let mut compressed = None;
        eventually("the older rotated file is compressed", || {
            let rotated = rotated_beside(&log);
            let Some((_, older)) = rotated.split_last() else {
                return false;
            };
            compressed = older.first().cloned();
            !older.is_empty() && older.iter().all(|file| file.ends_with(".gz"))
        })
        .await;
        let compressed = compressed.expect("an older rotated file");
        let mut plain = String::new();
        if let Ok(file) = std::fs::File::open(log.with_file_name(&compressed)) {
            // It may be removed by the next rotation meanwhile; then nothing is read.
            let _ = std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut plain);
        }
        assert!(
            plain.is_empty() || !numbers_in_cri_log(&plain).is_empty(),
            "{compressed} holds CRI log lines: {plain:?}"
        );
        let newest_rotated = rotated_beside(&log)
            .iter()
            .filter_map(|file| std::fs::read_to_string(log.with_file_name(file)).ok())
            .flat_map(|content| numbers_in_cri_log(&content))
            .max()
            .expect("lines in the rotated files");
        let served = get_served(&api, &format!("/containerLogs/{NAMESPACE}/{name}/app")).await;
        let numbers = served_numbers(&served.body);
        assert!(
            numbers.first() > Some(&newest_rotated),
            "the current file's lines, newer than the rotated ones' (up to line-{newest_rotated}): {numbers:?}"
        );
        assert!(
            numbers.windows(2).all(|pair| pair[1] == pair[0] + 1),
            "in order, none missing: {numbers:?}"
        );
    })
    .await;
    api.served.stop();
}

#[actix_rt::test]
async fn a_log_followed_across_its_rotations_loses_no_line_and_repeats_none() {
    let test = "a_log_followed_across_its_rotations_loses_no_line_and_repeats_none";
    let Some((node, _fixture, cluster)) = rotating_node(test, "log-follow-rotate").await else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        // About 8 s of output: two or more rotations while followed. It then exits, which
        // ends the follow.
        let name = format!("{}-followed", node.name);
        let script = "i=0; while [ $i -lt 400 ]; do i=$((i+1)); echo line-$i; sleep 0.02; done";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Never", serde_json::json!([shell("app", script)])),
        )
        .await;
        let log = running_log(&node, &name).await;
        let path = format!("/containerLogs/{NAMESPACE}/{name}/app?follow=true");
        let numbers = served_numbers(&get_served(&api, &path).await.body);
        assert_eq!(
            numbers.last(),
            Some(&400),
            "followed to the end: {numbers:?}"
        );
        assert!(
            numbers.windows(2).all(|pair| pair[1] == pair[0] + 1),
            "no line lost, none repeated: {numbers:?}"
        );
        // The follow read across a rotation: the newest rotated file ends within it (at
        // line-400 itself when the last rotation came just before the container exited).
        let rotated = rotated_beside(&log);
        let last_rotated = rotated
            .last()
            .and_then(|file| rotated_text(&log.with_file_name(file)))
            .and_then(|content| numbers_in_cri_log(&content).last().copied());
        let first = numbers.first().copied().unwrap_or_default();
        assert!(
            last_rotated.is_some_and(|last| first <= last),
            "rotated while followed (from line-{first}): {rotated:?}, ending at {last_rotated:?}"
        );
    })
    .await;
    api.served.stop();
}
