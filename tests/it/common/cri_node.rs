//! A whole `runtime: cri` node (every actor, the CRI pod provider) on a private containerd,
//! against a test cluster: its configuration, and a guard that shuts the node down before the
//! fixture removes every sandbox, also when the test fails, so no pod outlives its test.

use std::{future::Future, panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;
use nodepulse::node::{NodeActors, NodeHandle};
use nodepulse_supervisor::SupervisorHandle;

use super::{cluster::unique_node_name, cri_fixture::CriFixture, root_dir::RootDir};

/// The configuration of a CRI node on `fixture`: its socket, a root and log directory of its
/// own, a cluster DNS address, quick restarts, and thresholds no test host meets.
pub fn cri_node_config(fixture: &CriFixture, dir: &std::path::Path) -> String {
    format!(
        "runtime: cri
containerRuntimeEndpoint: {endpoint}
runtimeRequestTimeout: 20s
rootDir: {root}
podLogsDir: {logs}
clusterDNS: [198.18.0.10]
evictionHard:
  memory.available: 1Mi
supervision:
  livenessTimeout: 1s
  livenessInterval: 100ms
  backoff:
    initial: 50ms
",
        endpoint = fixture.containerd.endpoint(),
        root = dir.join("root").display(),
        logs = dir.join("logs").display(),
    )
}

pub struct CriNode {
    pub name: String,
    pub supervisor: SupervisorHandle,
    /// What the node's start handed back: its views and its CRI client, as services read them.
    pub handle: NodeHandle,
    /// Its root and log directories; removed with it, its pods' mounts detached first.
    dir: RootDir,
}

impl CriNode {
    /// Starts every actor of a new CRI node on `fixture`'s containerd.
    pub async fn start(kubeconfig: &std::path::Path, fixture: &CriFixture, prefix: &str) -> Self {
        Self::start_with(kubeconfig, fixture, prefix, "").await
    }

    /// The same, with `extra` (top-level YAML settings) after [`cri_node_config`]'s.
    pub async fn start_with(
        kubeconfig: &std::path::Path,
        fixture: &CriFixture,
        prefix: &str,
        extra: &str,
    ) -> Self {
        let name = unique_node_name(prefix);
        let dir = RootDir::new();
        let yaml = format!("{}{extra}", cri_node_config(fixture, dir.path()));
        let (settings, api) = super::node::connect(kubeconfig, &name, &yaml).await;
        let node = NodeActors::new(&settings)
            .api(api)
            .start()
            .expect("a whole node is wired");
        Self {
            name,
            supervisor: node.supervisor.clone(),
            handle: node,
            dir,
        }
    }

    /// Its `rootDir`, as [`cri_node_config`] sets it.
    pub fn root_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }

    /// Runs `body`, then shuts the node down whether `body` passed or panicked (the panic
    /// goes on after), so the fixture's clean-up races no pod worker.
    pub async fn guard(&self, body: impl Future<Output = ()>) {
        let outcome = AssertUnwindSafe(body).catch_unwind().await;
        self.supervisor.shutdown(Duration::from_secs(10)).await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}
