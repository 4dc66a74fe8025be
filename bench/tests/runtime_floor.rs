//! `nodepulse-bench runtime-floor` on a private containerd (the tests' fixture: runc, the CNI
//! bridge on 198.18.1.0/24, the offline busybox image): every burst and the pods one by one
//! are timed, nothing it made is left on the runtime, and a runtime that already runs a sandbox
//! is refused and left alone.

use std::process::{Command, Output};

use nodepulse_actors::ports::{ContainerRuntime, SandboxFilter};
use nodepulse_testkit::cri_fixture::CriFixture;
use serde_json::Value;

fn floor(endpoint: &str, out: &std::path::Path, sizes: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodepulse-bench"))
        .args(["--out-dir", out.to_str().expect("utf-8"), "runtime-floor"])
        .args([
            "--endpoint",
            endpoint,
            "--image",
            nodepulse_testkit::oci_image::BUSYBOX_IMAGE,
        ])
        .args(["--settle-seconds", "0"])
        .args(sizes)
        .output()
        .expect("nodepulse-bench runs")
}

async fn sandboxes(fixture: &CriFixture) -> usize {
    fixture
        .client
        .list_pod_sandboxes(SandboxFilter::default())
        .await
        .expect("ListPodSandbox")
        .len()
}

#[test]
fn bursts_and_single_pods_are_timed_and_nothing_is_left_on_the_runtime() {
    let test = "runtime_floor::bursts_and_single_pods_are_timed";
    if CriFixture::required(test).is_none() {
        return;
    }
    actix_rt::System::new().block_on(async {
        let fixture = CriFixture::start(test).await;
        let endpoint = fixture.containerd.endpoint();
        let out = tempfile::tempdir().expect("temp dir");
        let sizes = ["--pods", "3", "--concurrency", "3,1", "--one-by-one", "2"];
        let ran = floor(&endpoint, out.path(), &sizes);
        assert!(
            ran.status.success(),
            "runtime-floor failed: {}\n{}",
            String::from_utf8_lossy(&ran.stderr),
            fixture.containerd.log()
        );
        assert_eq!(
            sandboxes(&fixture).await,
            0,
            "the floor's pods are all removed"
        );

        let text = std::fs::read_to_string(out.path().join("runtime-floor.json"))
            .expect("runtime-floor.json");
        let file: Value = serde_json::from_str(&text).expect("json");
        let run = &file["runs"][0];
        let bursts = run["bursts"].as_array().expect("bursts");
        assert_eq!(bursts.len(), 2, "one burst per concurrency: {run}");
        for (burst, concurrency) in bursts.iter().zip([3, 1]) {
            assert_eq!(burst["concurrency"], concurrency, "{burst}");
            assert_eq!(burst["eachStartedSeconds"]["count"], 3, "{burst}");
            assert_eq!(burst["eachPodsCallsSeconds"]["count"], 3, "{burst}");
            let calls = burst["eachPodsCallsSeconds"]["last"]
                .as_f64()
                .unwrap_or(f64::MAX);
            let all = burst["allStartedSeconds"].as_f64().unwrap_or(0.0);
            let last = burst["eachStartedSeconds"]["last"]
                .as_f64()
                .unwrap_or(f64::MAX);
            assert!(
                all > 0.0 && last <= all,
                "a pod starts within its burst: {burst}"
            );
            assert!(
                calls <= last,
                "a pod's own calls are within its time: {burst}"
            );
            assert!(
                burst["machineCpuSecondsToStarted"].as_f64().unwrap_or(0.0) > 0.0,
                "{burst}"
            );
            assert!(
                burst["allRemovedSeconds"].as_f64().unwrap_or(0.0) > 0.0,
                "{burst}"
            );
        }
        assert_eq!(run["oneByOne"]["startedSeconds"]["count"], 2, "{run}");

        // A runtime with a sandbox of someone else's is not idle: refused, the sandbox kept.
        let config = fixture.sandbox_config("someone-elses");
        fixture
            .client
            .run_pod_sandbox(config, String::new())
            .await
            .expect("RunPodSandbox");
        let refused = floor(
            &endpoint,
            out.path(),
            &["--pods", "1", "--concurrency", "1"],
        );
        assert!(!refused.status.success(), "a busy runtime is refused");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(said.contains("already has pod sandboxes (1)"), "{said}");
        assert_eq!(
            sandboxes(&fixture).await,
            1,
            "the other sandbox is left alone"
        );
    });
}
