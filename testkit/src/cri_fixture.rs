//! A private containerd ready to run pods through the CRI client: CNI config written, the
//! network ready, the offline images imported and visible to the CRI plugin. Every sandbox a
//! test makes itself carries its run label (listings see only those); when dropped, also when
//! the test fails, the fixture stops and removes every sandbox of its private containerd —
//! the test's own and those a node made for its pods — before containerd itself is killed.

use std::{
    path::Path,
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use nodepulse_actors::ports::{
    ContainerConfig, ContainerRuntime, ContainerState, ContainerStatus, Labels, Mount,
    RuntimeService, SandboxConfig, SandboxFilter, SandboxMetadata,
};
use nodepulse_cri::client::CriClient;

use crate::{PATIENCE, containerd::Containerd, eventually_async, oci_image};

/// The label that marks what one fixture made, so cleanup and listings see nothing else.
pub const RUN_LABEL: &str = "nodepulse.test/run";

const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

pub struct CriFixture {
    /// Declared first so it drops first: sandboxes go while containerd still serves.
    _cleanup: Cleanup,
    pub client: CriClient,
    pub containerd: Containerd,
    run: String,
    pods: AtomicU32,
}

impl CriFixture {
    /// Whether this machine can run the fixture; `None` (skip) outside CI only.
    pub fn required(test: &str) -> Option<()> {
        Containerd::required(test)?;
        oci_image::busybox_required(test)
    }

    pub async fn start(test: &str) -> Self {
        let containerd = Containerd::start();
        containerd.write_cni_config();
        let client = CriClient::new(&containerd.endpoint(), REQUEST_TIMEOUT).expect("endpoint");
        eventually_async("containerd reports NetworkReady", || {
            let status = client.status();
            async move {
                status.await.is_ok_and(|status| {
                    status
                        .conditions
                        .iter()
                        .any(|condition| condition.kind == "NetworkReady" && condition.status)
                })
            }
        })
        .await;
        containerd.import_test_images();
        for image in [
            oci_image::BUSYBOX_IMAGE,
            oci_image::PAUSE_IMAGE,
            oci_image::NON_ROOT_IMAGE,
            oci_image::NAMED_USER_IMAGE,
        ] {
            eventually_async(&format!("the CRI plugin sees {image}"), || {
                let status = client.image_status(image.to_owned());
                async move { matches!(status.await, Ok(Some(_))) }
            })
            .await;
        }
        let run = format!("{test}-{}", std::process::id());
        Self {
            _cleanup: Cleanup {
                endpoint: containerd.endpoint(),
                run: run.clone(),
            },
            client,
            containerd,
            run,
            pods: AtomicU32::new(0),
        }
    }

    /// A sandbox config as the kubelet would give it for a new pod `name`; its log directory
    /// is created under the fixture's directory, as the kubelet creates `/var/log/pods/…`.
    pub fn sandbox_config(&self, name: &str) -> SandboxConfig {
        let uid = format!("{}-{}", self.run, self.pods.fetch_add(1, Ordering::Relaxed));
        let log_directory = self
            .containerd
            .root()
            .join(format!("pods/default_{name}_{uid}"));
        std::fs::create_dir_all(&log_directory).expect("log directory");
        let labels: Labels = [
            ("io.kubernetes.pod.name", name),
            ("io.kubernetes.pod.namespace", "default"),
            ("io.kubernetes.pod.uid", uid.as_str()),
            (RUN_LABEL, self.run.as_str()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
        SandboxConfig {
            metadata: SandboxMetadata {
                name: name.to_owned(),
                uid,
                namespace: "default".to_owned(),
                attempt: 0,
            },
            hostname: name.to_owned(),
            log_directory,
            labels,
            ..SandboxConfig::default()
        }
    }

    /// Only this fixture's sandboxes.
    pub fn run_filter(&self) -> SandboxFilter {
        SandboxFilter {
            labels: [(RUN_LABEL.to_owned(), self.run.clone())].into(),
            ..SandboxFilter::default()
        }
    }

    /// Polls ContainerStatus until the container has exited; that status.
    pub async fn wait_exited(&self, id: &str) -> ContainerStatus {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let status = self
                .client
                .container_status(id.to_owned())
                .await
                .expect("ContainerStatus");
            if status.state == ContainerState::Exited {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "container {id} still {:?} after {PATIENCE:?}",
                status.state
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A busybox container running `script` with `sh -c`, logging to `<name>/0.log`.
pub fn shell_container(name: &str, script: &str, mounts: Vec<Mount>) -> ContainerConfig {
    ContainerConfig {
        name: name.to_owned(),
        image: oci_image::BUSYBOX_IMAGE.to_owned(),
        command: vec!["/bin/sh".to_owned()],
        args: vec!["-c".to_owned(), script.to_owned()],
        mounts,
        log_path: Path::new(name).join("0.log"),
        ..ContainerConfig::default()
    }
}

/// Stops and removes every sandbox of the private containerd (and with them their containers
/// and network), again while a node still running on another thread makes new ones.
struct Cleanup {
    endpoint: String,
    run: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let endpoint = self.endpoint.clone();
        // Drop cannot await, and the test's runtime may be unwinding: a runtime of its own.
        let cleaned = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let client = CriClient::new(&endpoint, REQUEST_TIMEOUT).expect("endpoint");
                for _ in 0..5 {
                    let sandboxes = client.list_pod_sandboxes(SandboxFilter::default()).await;
                    let Ok(sandboxes) = sandboxes.map_err(drop) else {
                        return;
                    };
                    if sandboxes.is_empty() {
                        return;
                    }
                    for sandbox in sandboxes {
                        let _ = client.stop_pod_sandbox(sandbox.id.clone()).await;
                        let _ = client.remove_pod_sandbox(sandbox.id).await;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        })
        .join();
        if cleaned.is_err() {
            eprintln!(
                "cri fixture: cleaning up the sandboxes of {} panicked",
                self.run
            );
        }
    }
}
