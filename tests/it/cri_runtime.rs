//! The CRI client's pod calls against a real containerd and runc, with the offline test
//! images and the CNI bridge, no API server: a sandbox gets its IP from CNI in the test range;
//! a container writes into a mounted host directory and completes, and sees the pod's hostname,
//! DNS config, env and working dir, its stdout in the CRI log file; one exiting 1 says Error;
//! ExecSync returns output and exit code, and its timeout is told apart; a missing image has
//! no status; stopped and removed things are no longer listed.

use crate::cri_pods::{UNTIL_TERM, wait_container_trapped};
use nodepulse_testkit::cri_fixture::{CriFixture, shell_container};

use std::{
    net::Ipv4Addr,
    time::{Duration, Instant},
};

use nodepulse_actors::ports::{
    ContainerConfig, ContainerFilter, ContainerRuntime, ContainerRuntimeError, ContainerState,
    DnsConfig, LinuxResources, Mount, SandboxConfig, SandboxState,
};
use nodepulse_cri::client::{clamp_oom_score_adj, own_oom_score_adj};

/// The runtime's side of a pod: the sandbox's config and id, and how long RunPodSandbox took.
struct Sandbox {
    config: SandboxConfig,
    id: String,
    took: Duration,
}

async fn run_sandbox(fixture: &CriFixture, config: SandboxConfig) -> Sandbox {
    let started = Instant::now();
    let id = fixture
        .client
        .run_pod_sandbox(config.clone(), String::new())
        .await
        .unwrap_or_else(|error| panic!("RunPodSandbox: {error}\n{}", fixture.containerd.log()));
    Sandbox {
        config,
        id,
        took: started.elapsed(),
    }
}

/// A sandbox from `sandbox` with one container from `config`, created and started; the
/// sandbox, the container id, and how long CreateContainer and StartContainer took.
async fn run_pod(
    fixture: &CriFixture,
    sandbox: SandboxConfig,
    config: ContainerConfig,
) -> (Sandbox, String, Duration, Duration) {
    let sandbox = run_sandbox(fixture, sandbox).await;
    let created = Instant::now();
    let id = fixture
        .client
        .create_container(sandbox.id.clone(), config, sandbox.config.clone())
        .await
        .unwrap_or_else(|error| panic!("CreateContainer: {error}\n{}", fixture.containerd.log()));
    let started = Instant::now();
    fixture
        .client
        .start_container(id.clone())
        .await
        .expect("StartContainer");
    (sandbox, id, started - created, started.elapsed())
}

#[tokio::test]
async fn a_sandbox_runs_with_an_ip_from_cni_in_the_test_range() {
    let Some(()) = CriFixture::required("a_sandbox_runs_with_an_ip_from_cni_in_the_test_range")
    else {
        return;
    };
    let fixture = CriFixture::start("sandbox-ip").await;
    let Sandbox { id, took, .. } = run_sandbox(&fixture, fixture.sandbox_config("web")).await;
    eprintln!("figure: RunPodSandbox (pause image present, CNI bridge) took {took:?}");

    let status = fixture
        .client
        .pod_sandbox_status(id.clone())
        .await
        .expect("PodSandboxStatus");
    assert_eq!(status.state, SandboxState::Ready);
    assert_eq!(status.metadata.name, "web");
    assert_eq!(
        status
            .labels
            .get("io.kubernetes.pod.name")
            .map(String::as_str),
        Some("web")
    );
    let ip: Ipv4Addr = status.ips.first().expect("a pod IP").parse().expect("IPv4");
    assert_eq!(
        ip.octets()[..3],
        [198, 18, 1],
        "{ip} is not in 198.18.1.0/24"
    );

    let listed = fixture
        .client
        .list_pod_sandboxes(fixture.run_filter())
        .await
        .expect("ListPodSandbox");
    assert_eq!(
        listed
            .iter()
            .map(|sandbox| sandbox.id.as_str())
            .collect::<Vec<_>>(),
        [id.as_str()]
    );
}

#[tokio::test]
async fn a_container_writes_into_a_mounted_host_directory_and_completes() {
    let Some(()) =
        CriFixture::required("a_container_writes_into_a_mounted_host_directory_and_completes")
    else {
        return;
    };
    let fixture = CriFixture::start("writes-file").await;
    let out = tempfile::tempdir().expect("host directory");
    let input = tempfile::tempdir().expect("host directory");
    std::fs::write(input.path().join("message"), "hello\n").expect("input file");
    let script = "cat /in/message > /out/greeting; \
                  if touch /in/x 2>/dev/null; then echo writable; else echo read-only; fi > /out/in; \
                  cat /proc/self/oom_score_adj > /out/oom_score_adj";
    let mount = |container: &str, host: &std::path::Path, readonly| Mount {
        container_path: container.into(),
        host_path: host.to_path_buf(),
        readonly,
        ..Mount::default()
    };
    let mut config = shell_container(
        "main",
        script,
        vec![
            mount("/out", out.path(), false),
            mount("/in", input.path(), true),
        ],
    );
    // The kubelet's value for a Guaranteed pod, which this process may not set.
    config.resources = Some(LinuxResources {
        oom_score_adj: -997,
        ..LinuxResources::default()
    });
    let (_, id, create, start) = run_pod(&fixture, fixture.sandbox_config("writer"), config).await;
    eprintln!("figure: CreateContainer took {create:?}, StartContainer {start:?}");

    let status = fixture.wait_exited(&id).await;
    assert_eq!((status.exit_code, status.reason.as_str()), (0, "Completed"));
    // Both set; not ordered: containerd stamps started_at after Start returns, and a container
    // this short may already have exited (and been stamped) by then.
    assert!(
        status.started_at > 0 && status.finished_at > 0,
        "{status:?}"
    );
    let greeting = std::fs::read_to_string(out.path().join("greeting")).expect("the file");
    assert_eq!(greeting, "hello\n");
    let input_mount = std::fs::read_to_string(out.path().join("in")).expect("the check");
    assert_eq!(input_mount, "read-only\n");
    assert!(!input.path().join("x").exists());
    let oom: i64 = std::fs::read_to_string(out.path().join("oom_score_adj"))
        .expect("oom_score_adj written")
        .trim()
        .parse()
        .expect("a number");
    let own = own_oom_score_adj().expect("own oom_score_adj");
    assert_eq!(oom, clamp_oom_score_adj(-997, own));
}

#[tokio::test]
async fn the_container_sees_the_pods_hostname_dns_env_and_working_dir_and_logs_stdout() {
    let Some(()) = CriFixture::required(
        "the_container_sees_the_pods_hostname_dns_env_and_working_dir_and_logs_stdout",
    ) else {
        return;
    };
    let fixture = CriFixture::start("pod-settings").await;
    let mut sandbox = fixture.sandbox_config("settings");
    sandbox.hostname = "settings-host".to_owned();
    sandbox.dns = Some(DnsConfig {
        servers: vec!["198.18.0.53".to_owned()],
        searches: vec!["default.svc.cluster.local".to_owned()],
        options: vec!["ndots:5".to_owned()],
    });
    let mut config = shell_container(
        "main",
        "hostname; echo \"$GREETING\"; pwd; cat /etc/resolv.conf",
        vec![],
    );
    config.envs = vec![("GREETING".to_owned(), "hello from env".to_owned())];
    config.working_dir = "/tmp".to_owned();
    let (sandbox, id, _, _) = run_pod(&fixture, sandbox, config).await;
    let status = fixture.wait_exited(&id).await;
    assert_eq!(status.exit_code, 0);

    // CRI log lines: `<time> stdout F <line>`, in the log directory at the container's path.
    let log =
        std::fs::read_to_string(sandbox.config.log_directory.join("main/0.log")).expect("log");
    let lines: Vec<&str> = log
        .lines()
        .filter_map(|line| line.split_once(" stdout F ").map(|(_, text)| text))
        .collect();
    assert_eq!(
        lines[..3],
        ["settings-host", "hello from env", "/tmp"],
        "{log}"
    );
    assert!(lines.contains(&"nameserver 198.18.0.53"), "{log}");
    assert!(lines.contains(&"search default.svc.cluster.local"), "{log}");
    assert!(lines.contains(&"options ndots:5"), "{log}");
}

#[tokio::test]
async fn a_container_exiting_1_says_error() {
    let Some(()) = CriFixture::required("a_container_exiting_1_says_error") else {
        return;
    };
    let fixture = CriFixture::start("exits-1").await;
    let (_, id, _, _) = run_pod(
        &fixture,
        fixture.sandbox_config("failing"),
        shell_container("main", "exit 1", vec![]),
    )
    .await;
    let status = fixture.wait_exited(&id).await;
    assert_eq!((status.exit_code, status.reason.as_str()), (1, "Error"));
}

#[tokio::test]
async fn exec_sync_returns_output_and_exit_code_and_reports_a_timeout() {
    let Some(()) =
        CriFixture::required("exec_sync_returns_output_and_exit_code_and_reports_a_timeout")
    else {
        return;
    };
    let fixture = CriFixture::start("exec").await;
    let (_, id, _, _) = run_pod(
        &fixture,
        fixture.sandbox_config("exec"),
        shell_container("main", UNTIL_TERM, vec![]),
    )
    .await;
    let status = fixture
        .client
        .container_status(id.clone())
        .await
        .expect("ContainerStatus");
    assert_eq!(status.state, ContainerState::Running);

    let command = ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"].map(String::from);
    let output = fixture
        .client
        .exec_sync(id.clone(), command.to_vec(), Duration::from_secs(10))
        .await
        .expect("ExecSync");
    assert_eq!(output.stdout, b"out\n");
    assert_eq!(output.stderr, b"err\n");
    assert_eq!(output.exit_code, 3);

    let command = ["/bin/sleep", "30"].map(String::from);
    let error = fixture
        .client
        .exec_sync(id, command.to_vec(), Duration::from_secs(1))
        .await
        .expect_err("sleep 30 outlives a 1 s timeout");
    assert!(
        matches!(error, ContainerRuntimeError::ExecTimedOut { ref command, timeout }
            if command[0] == "/bin/sleep" && timeout == Duration::from_secs(1)),
        "{error:?}"
    );
}

#[tokio::test]
async fn image_status_of_a_missing_image_is_none() {
    let Some(()) = CriFixture::required("image_status_of_a_missing_image_is_none") else {
        return;
    };
    let fixture = CriFixture::start("image-missing").await;
    let missing = fixture
        .client
        .image_status("nodepulse.test/missing:1".to_owned())
        .await
        .expect("ImageStatus");
    assert_eq!(missing, None);
    let present = fixture
        .client
        .image_status(nodepulse_testkit::oci_image::BUSYBOX_IMAGE.to_owned())
        .await
        .expect("ImageStatus")
        .expect("the imported image");
    assert!(present.id.starts_with("sha256:") && present.size_bytes > 0);
    let images = nodepulse_actors::ports::RuntimeService::list_images(&fixture.client)
        .await
        .expect("ListImages");
    assert!(images.iter().any(|image| image.id == present.id));
}

#[tokio::test]
async fn stop_and_remove_leave_nothing_listed() {
    let Some(()) = CriFixture::required("stop_and_remove_leave_nothing_listed") else {
        return;
    };
    let fixture = CriFixture::start("stop-remove").await;
    let (sandbox, id, _, _) = run_pod(
        &fixture,
        fixture.sandbox_config("doomed"),
        shell_container("main", UNTIL_TERM, vec![]),
    )
    .await;
    let sandbox_id = sandbox.id;
    let in_sandbox = ContainerFilter {
        sandbox_id: Some(sandbox_id.clone()),
        ..ContainerFilter::default()
    };
    let listed = fixture
        .client
        .list_containers(in_sandbox.clone())
        .await
        .expect("ListContainers");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, ContainerState::Running);

    // A SIGTERM before the trap is set finds PID 1 without a handler: ignored, then killed.
    wait_container_trapped(&fixture, id.clone()).await;
    fixture
        .client
        .stop_container(id.clone(), Duration::from_secs(10))
        .await
        .expect("StopContainer");
    let stopped = fixture
        .client
        .container_status(id.clone())
        .await
        .expect("ContainerStatus");
    // The trap ends the shell on SIGTERM with 0, before any SIGKILL.
    assert_eq!(
        (stopped.state, stopped.exit_code),
        (ContainerState::Exited, 0)
    );
    fixture
        .client
        .remove_container(id.clone())
        .await
        .expect("RemoveContainer");
    fixture
        .client
        .stop_pod_sandbox(sandbox_id.clone())
        .await
        .expect("StopPodSandbox");
    fixture
        .client
        .remove_pod_sandbox(sandbox_id)
        .await
        .expect("RemovePodSandbox");

    let containers = fixture
        .client
        .list_containers(in_sandbox)
        .await
        .expect("ListContainers");
    assert!(containers.is_empty(), "{containers:?}");
    let sandboxes = fixture
        .client
        .list_pod_sandboxes(fixture.run_filter())
        .await
        .expect("ListPodSandbox");
    assert!(sandboxes.is_empty(), "{sandboxes:?}");
    let gone = fixture.client.container_status(id).await;
    assert!(
        matches!(gone, Err(ContainerRuntimeError::NotFound { .. })),
        "{gone:?}"
    );
}
