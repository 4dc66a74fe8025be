//! The binary's commands besides the daemon, run as processes: `--version`, `check-config` on
//! good and bad files (exit 0 / 2 with the field and reason), `config-reference` (and that
//! the book's configuration table, `docs/configuration.md`, is its output), and `status` against a cluster where nodepulse's actors keep a
//! Node — including which kubeconfig it picks: `--kubeconfig`, then `KUBECONFIG`, then
//! `~/.kube/config`, never falling through past a named one.

use std::{
    path::Path,
    process::{Command, Output},
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    eventually_async,
    node::{report_healthy_and_wait_ready, start_api_actors},
};

const CONFIGURATION_PAGE: &str = include_str!("../../docs/configuration.md");

fn nodepulse() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodepulse"));
    // Nothing from the environment of whoever runs the tests may pick a cluster.
    command
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent-home-for-nodepulse-tests");
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a command off the async runtime (the emulator serving it runs on that runtime).
async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .expect("joined")
}

#[test]
fn version_prints_the_package_version() {
    let output = nodepulse().arg("--version").output().expect("runs");
    assert!(output.status.success());
    assert_eq!(
        text(&output.stdout).trim(),
        format!("nodepulse {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn check_config_accepts_the_default_and_deploy_configurations() {
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/config/nodepulse.yaml");
    let output = nodepulse()
        .args(["check-config", default])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), format!("{default}: OK\n"));
}

#[test]
fn check_config_refuses_a_bad_file_with_its_field_value_and_reason_and_exit_2() {
    let directory = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            "supervision:\n  backoff:\n    initial: 10x\n",
            "supervision.backoff.initial: unknown unit \"x\" in duration \"10x\"",
        ),
        (
            "nodeLeaseDurationSeconds: 0\n",
            "nodeLeaseDurationSeconds: invalid value \"0\"",
        ),
        (
            "nodeStatusUpdateFreqency: 10s\n",
            "unknown field `nodeStatusUpdateFreqency`",
        ),
    ];
    for (yaml, expected) in cases {
        let file = directory.path().join("bad.yaml");
        std::fs::write(&file, yaml).expect("written");
        let output = nodepulse()
            .arg("check-config")
            .arg(&file)
            .output()
            .expect("runs");
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{yaml}: {stderr}");
        assert!(output.stdout.is_empty(), "no OK for {yaml}");
        assert!(
            stderr.contains(&file.display().to_string()) && stderr.contains(expected),
            "{yaml}: expected {expected:?} in {stderr:?}"
        );
    }
    let missing = directory.path().join("missing.yaml");
    let output = nodepulse()
        .arg("check-config")
        .arg(&missing)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("cannot read the configuration file"));
}

#[test]
fn check_config_reports_every_invalid_setting_of_a_file_not_only_the_first() {
    let directory = tempfile::tempdir().expect("temp dir");
    let file = directory.path().join("three-mistakes.yaml");
    std::fs::write(
        &file,
        "maxPods: 0\nnodeIP: [not-an-ip]\ndebug:\n  address: localhost\n",
    )
    .expect("written");
    let output = nodepulse()
        .arg("check-config")
        .arg(&file)
        .output()
        .expect("runs");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty(), "no OK: {}", text(&output.stdout));
    let file = file.display();
    for expected in [
        format!("{file}: 3 invalid settings:"),
        format!("{file}: maxPods: invalid value \"0\": must be at least 1"),
        format!("{file}: nodeIP[0]: invalid value \"not-an-ip\": expected an IP address"),
        format!(
            "{file}: debug.address: invalid value \"localhost\": expected an IP address and port"
        ),
    ] {
        assert!(
            stderr.contains(&expected),
            "expected {expected:?} in {stderr:?}"
        );
    }
}

#[test]
fn the_book_holds_the_configuration_reference_the_binary_prints() {
    let output = nodepulse().arg("config-reference").output().expect("runs");
    assert!(output.status.success());
    let generated = text(&output.stdout);
    let start = "<!-- config-reference:start (generated: nodepulse config-reference) -->\n";
    let end = "<!-- config-reference:end -->";
    let in_the_book = CONFIGURATION_PAGE
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(table, _)| table)
        .expect("docs/configuration.md has the configuration reference between its markers");
    assert_eq!(
        in_the_book, generated,
        "docs/configuration.md's table differs from `nodepulse config-reference`; paste its output between the markers"
    );
}

/// A cluster with a Node kept Ready by nodepulse's actors and its Lease renewed.
async fn cluster_with_a_node(
    prefix: &str,
) -> (TestCluster, String, nodepulse_supervisor::SupervisorHandle) {
    let cluster = TestCluster::start().await;
    let name = unique_node_name(prefix);
    let yaml = "nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nrootDir: /\n";
    let (supervisor, addresses) = start_api_actors(&cluster.kubeconfig, &name, yaml).await;
    report_healthy_and_wait_ready(&cluster.client, &name, &addresses).await;
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), "kube-node-lease");
    eventually_async("the Lease exists", || async {
        leases.get_opt(&name).await.ok().flatten().is_some()
    })
    .await;
    (cluster, name, supervisor)
}

#[actix_rt::test]
async fn status_prints_each_condition_and_the_lease_as_the_api_server_has_them() {
    let (cluster, name, supervisor) = cluster_with_a_node("status").await;
    let mut command = nodepulse();
    command
        .arg("status")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["--node-name", &name]);
    let output = run(command).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        stdout.contains(&format!("Node:        {name}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("Lease:       holder {name}, renewed ")),
        "{stdout}"
    );
    assert!(stdout.contains("duration 4s"), "{stdout}");
    let row = |condition: &str| {
        stdout
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{condition} ")))
            .unwrap_or_else(|| panic!("no {condition} row in {stdout}"))
            .to_owned()
    };
    let ready = row("Ready");
    assert!(
        ready.contains(" True ") && ready.contains("KubeletReady"),
        "{ready}"
    );
    assert!(
        ready.matches(" ago)").count() == 2,
        "heartbeat and transition ages: {ready}"
    );
    for condition in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert!(row(condition).contains(" False "), "{stdout}");
    }

    let mut command = nodepulse();
    command
        .arg("status")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["--node-name", "no-such-node-for-status"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("no Node named \"no-such-node-for-status\""),
        "{}",
        text(&output.stderr)
    );
    supervisor
        .shutdown(std::time::Duration::from_secs(10))
        .await;
    cluster.delete_node(&name).await;
}

/// A kubeconfig for an API server that is not there.
fn unreachable_kubeconfig(path: &Path) {
    std::fs::write(
        path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nowhere\n  cluster: {server: 'http://127.0.0.1:1'}\n\
         users:\n- name: nobody\n  user: {}\ncontexts:\n- name: nowhere\n  context: {cluster: nowhere, user: nobody}\n\
         current-context: nowhere\n",
    )
    .expect("written");
}

#[actix_rt::test]
async fn the_kubeconfig_is_chosen_as_kubectl_chooses_it() {
    let (cluster, name, supervisor) = cluster_with_a_node("kubeconfig").await;
    let directory = tempfile::tempdir().expect("temp dir");
    let nowhere = directory.path().join("nowhere.kubeconfig");
    unreachable_kubeconfig(&nowhere);
    let home_with = |kubeconfig: &Path, home: &str| {
        let home = directory.path().join(home);
        std::fs::create_dir_all(home.join(".kube")).expect("created");
        std::fs::copy(kubeconfig, home.join(".kube/config")).expect("copied");
        home
    };
    let good_home = home_with(&cluster.kubeconfig, "good-home");
    let bad_home = home_with(&nowhere, "bad-home");
    let status = |flag: Option<&Path>, env: Option<&Path>, home: &Path| {
        let mut command = nodepulse();
        command
            .args(["status", "--node-name", &name])
            .env("HOME", home);
        if let Some(flag) = flag {
            command.arg("--kubeconfig").arg(flag);
        }
        if let Some(env) = env {
            command.env("KUBECONFIG", env);
        }
        command
    };
    let cases = [
        (
            "--kubeconfig over KUBECONFIG and ~/.kube/config",
            status(Some(&cluster.kubeconfig), Some(&nowhere), &bad_home),
            true,
        ),
        (
            "KUBECONFIG over ~/.kube/config",
            status(None, Some(&cluster.kubeconfig), &bad_home),
            true,
        ),
        (
            "~/.kube/config when nothing else",
            status(None, None, &good_home),
            true,
        ),
        (
            "a named KUBECONFIG is used even when ~/.kube/config would work",
            status(None, Some(&nowhere), &good_home),
            false,
        ),
    ];
    for (case, command, reaches) in cases {
        let output = run(command).await;
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        if reaches {
            assert_eq!(output.status.code(), Some(0), "{case}: {stderr}");
            assert!(
                stdout.contains(&format!("Node:        {name}")),
                "{case}: {stdout}"
            );
        } else {
            assert_eq!(output.status.code(), Some(1), "{case}: {stdout}");
            assert!(stderr.contains("127.0.0.1:1"), "{case}: {stderr}");
        }
    }
    let output = run(status(None, None, directory.path())).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("no cluster to talk to"),
        "{}",
        text(&output.stderr)
    );
    supervisor
        .shutdown(std::time::Duration::from_secs(10))
        .await;
    cluster.delete_node(&name).await;
}
