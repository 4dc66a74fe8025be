//! An emulator under node restriction (the Node authorizer and NodeRestriction admission) with a
//! bearer token for one node's own identity, `system:node:<name>`, and kubeconfigs for that node
//! and for an administrator who arranges and checks what the test does.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use nodepulse_emulator::{AuthConfig, Emulator, EmulatorConfig, EmulatorHandle, User};

pub struct NodeIdentityEmulator {
    pub emulator: EmulatorHandle,
    /// `system:node:<name>`, in group `system:nodes`.
    pub user: User,
    /// A kubeconfig that authenticates as [`NodeIdentityEmulator::user`].
    pub node_kubeconfig: PathBuf,
    /// An anonymous client, which the emulator lets do anything.
    pub admin: kube::Client,
    _directory: tempfile::TempDir,
}

impl NodeIdentityEmulator {
    pub async fn start(node: &str) -> Self {
        let user = User::node(node);
        let token = format!("node-token-{node}-0123456789");
        let emulator = Emulator::start(EmulatorConfig {
            auth: AuthConfig {
                tokens: [(token.clone(), user.clone())].into(),
                allow_anonymous: true,
                node_restriction: true,
            },
            ..EmulatorConfig::for_tests()
        })
        .await
        .expect("the emulator starts");
        let directory = tempfile::tempdir().expect("temp dir");
        let node_kubeconfig = directory.path().join("node.kubeconfig");
        emulator
            .write_kubeconfig_with_token(&node_kubeconfig, Some(&token))
            .expect("kubeconfig");
        let admin_kubeconfig = directory.path().join("admin.kubeconfig");
        emulator
            .write_kubeconfig(&admin_kubeconfig)
            .expect("kubeconfig");
        let admin = client(&admin_kubeconfig).await;
        Self {
            emulator,
            user,
            node_kubeconfig,
            admin,
            _directory: directory,
        }
    }
}

/// A client for the kubeconfig at `path`.
pub async fn client(path: &Path) -> kube::Client {
    let file = Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}
