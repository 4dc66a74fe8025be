//! The API server a test talks to: the in-repo emulator, started by the test, or the real
//! cluster named by `NODEPULSE_TEST_KUBECONFIG`. Tests create uniquely named objects, and the
//! cluster's clean-up guard deletes them, so they can run in parallel and on a shared cluster.

use std::{
    path::PathBuf,
    sync::atomic::{AtomicU32, Ordering},
};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use nodepulse_emulator::{Emulator, EmulatorConfig, EmulatorHandle, FaultHandle};

use crate::cleanup::{Cleanup, RUN_LABEL, own_node, run_id};

pub struct TestCluster {
    // First, so it drops (deleting what the test made) while the emulator still serves.
    _cleanup: Cleanup,
    pub kubeconfig: PathBuf,
    /// An administrator's client for arranging and checking what the test does.
    pub client: kube::Client,
    /// Present when the test runs against the emulator.
    pub emulator: Option<EmulatorHandle>,
    _directory: tempfile::TempDir,
}

impl TestCluster {
    pub async fn start() -> Self {
        Self::start_with(EmulatorConfig::for_tests()).await
    }

    /// Like [`TestCluster::start`], with this emulator configuration when no real cluster is named.
    pub async fn start_with(emulator_config: EmulatorConfig) -> Self {
        let directory = tempfile::tempdir().expect("temp dir");
        let (kubeconfig, emulator) = match std::env::var_os("NODEPULSE_TEST_KUBECONFIG") {
            Some(path) => (PathBuf::from(path), None),
            None => {
                let emulator = Emulator::start(emulator_config)
                    .await
                    .expect("the emulator starts");
                let path = directory.path().join("kubeconfig");
                emulator
                    .write_kubeconfig(&path)
                    .expect("kubeconfig written");
                (path, Some(emulator))
            }
        };
        let file = Kubeconfig::read_from(&kubeconfig).expect("a readable kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .expect("a usable kubeconfig");
        let client = kube::Client::try_from(config).expect("a client");
        Self {
            _cleanup: Cleanup::new(&kubeconfig),
            kubeconfig,
            client,
            emulator,
            _directory: directory,
        }
    }

    /// Whether emulator-only facilities (fault injection, short lifecycle periods) are here.
    pub fn is_emulator(&self) -> bool {
        self.emulator.is_some()
    }

    /// The emulator's fault injection. Only for tests that checked [`is_emulator`] (through
    /// `attack::needs_emulator`): a real cluster has none.
    ///
    /// [`is_emulator`]: TestCluster::is_emulator
    pub fn faults(&self) -> &FaultHandle {
        self.emulator
            .as_ref()
            .expect("fault injection needs the emulator")
            .faults()
    }

    /// Creates a Node the way a registrar would and returns its UID.
    pub async fn create_node(&self, name: &str) -> String {
        let node: Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": name, "labels": { "nodepulse.test/owner": "tests", RUN_LABEL: run_id() } },
        }))
        .expect("a node");
        own_node(name);
        let created = Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), &node)
            .await
            .expect("the node is created");
        created.metadata.uid.expect("a uid")
    }

    pub async fn delete_node(&self, name: &str) {
        let _ = Api::<Node>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await;
    }
}

/// A node name unique to this test process and call. The running test owns the Node (and
/// Lease) of that name, however it comes to be created: the clean-up guard deletes them.
pub fn unique_node_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    own_node(&name);
    name
}
