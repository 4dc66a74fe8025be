//! A whole `runtime: cri` node (every actor, the CRI pod provider) on a private containerd,
//! against a test cluster: its configuration, and a guard that shuts the node down before the
//! fixture removes every sandbox, also when the test fails, so no pod outlives its test.

use std::{future::Future, panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;
use nodepulse::node::{NodeActors, NodeHandle};
use nodepulse_actors::pods::PodLifecycleActor;
use nodepulse_supervisor::{Mailbox, SupervisorHandle};

use crate::{cluster::unique_node_name, cri_fixture::CriFixture, root_dir::RootDir};

/// The configuration of a CRI node on `fixture`: its socket, a root and log directory of its
/// own, a cluster DNS address, quick restarts, thresholds no test host meets, and the kubelet
/// API and the debug endpoint on ports the kernel picks (tests run side by side).
pub fn cri_node_config(fixture: &CriFixture, dir: &std::path::Path) -> String {
    format!(
        "runtime: cri
containerRuntimeEndpoint: {endpoint}
runtimeRequestTimeout: 20s
rootDir: {root}
podLogsDir: {logs}
port: 0
healthzPort: 0
clusterDNS: [198.18.0.10]
evictionHard:
  memory.available: 1Mi
supervision:
  livenessTimeout: 1s
  livenessInterval: 100ms
  backoff:
    initial: 50ms
debug:
  address: 127.0.0.1:0
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
    /// Its pod lifecycle actor, for fault injection into the CRI engine's tasks.
    pub pod_lifecycle: Mailbox<PodLifecycleActor>,
    /// Its root and log directories; removed with it, its pods' mounts detached first.
    dir: RootDir,
}

impl CriNode {
    /// The node's `cgroupRoot` (one of its own, removed with its directory).
    pub fn cgroup_root(&self) -> String {
        crate::test_cgroups::cgroup_root_for(self.dir.path())
    }

    /// Starts every actor of a new CRI node on `fixture`'s containerd.
    pub async fn start(kubeconfig: &std::path::Path, fixture: &CriFixture, prefix: &str) -> Self {
        Self::start_with(kubeconfig, fixture, prefix, |_| String::new()).await
    }

    /// [`Self::start`], with the configuration lines `extra` gives for the node's directory
    /// (it may prepare the directory too) appended to [`cri_node_config`].
    pub async fn start_with(
        kubeconfig: &std::path::Path,
        fixture: &CriFixture,
        prefix: &str,
        extra: impl FnOnce(&std::path::Path) -> String,
    ) -> Self {
        let name = unique_node_name(prefix);
        let dir = RootDir::new();
        let config = cri_node_config(fixture, dir.path()) + &extra(dir.path());
        let (settings, api) = crate::node::connect(kubeconfig, &name, &config).await;
        let node = NodeActors::new(&settings)
            .api(api)
            .start()
            .expect("a whole node is wired");
        Self {
            name,
            supervisor: node.supervisor.clone(),
            pod_lifecycle: node.addresses.pod_lifecycle.clone(),
            handle: node,
            dir,
        }
    }

    /// Like [`CriNode::start`], with the kubelet API served as the daemon serves it: bound
    /// first, the port bound reported in `daemonEndpoints`, client certificates of
    /// `client_ca_pem` accepted, Webhook authorization (the API server's reviews).
    pub async fn start_with_kubelet_api(
        kubeconfig: &std::path::Path,
        fixture: &CriFixture,
        prefix: &str,
        client_ca_pem: &str,
    ) -> (Self, nodepulse::kubelet_server::KubeletApi) {
        let name = unique_node_name(prefix);
        let dir = RootDir::new();
        let ca = dir.path().join("kubelet-client-ca.crt");
        std::fs::write(&ca, client_ca_pem).expect("write the client CA");
        let yaml = format!(
            "{}authentication:\n  x509: {{clientCAFile: {}}}\n",
            cri_node_config(fixture, dir.path()),
            ca.display()
        );
        let (mut settings, api) = crate::node::connect(kubeconfig, &name, &yaml).await;
        let prepared =
            nodepulse::kubelet_server::prepare(&settings).expect("the kubelet API binds");
        settings.config.port = prepared.port();
        let node = NodeActors::new(&settings)
            .api(api.clone())
            .start()
            .expect("a whole node is wired");
        let served = prepared
            .serve(nodepulse::kubelet_server::Parts {
                reviews: api,
                problems: None,
                pods: node.views.pods.clone(),
                runtime: node.runtime.clone(),
                volumes: node.views.volumes.clone(),
                probes: node.views.probes.clone(),
                pod_storage: Some(node.views.pod_storage.clone()),
            })
            .expect("the kubelet API serves");
        let node = Self {
            name,
            supervisor: node.supervisor.clone(),
            pod_lifecycle: node.addresses.pod_lifecycle.clone(),
            handle: node,
            dir,
        };
        (node, served)
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
