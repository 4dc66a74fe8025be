//! What the black-box tests share (tests/it, tests/heavy, the examples, bench/tests): the test
//! cluster (the API emulator, or a real one named by `NODEPULSE_TEST_KUBECONFIG`), daemons as
//! processes, nodes in-process, fixture hosts, a private containerd with an offline image,
//! actors written for the tests, and polling helpers. A crate, not `#[path]` includes.

// Fixtures whose `new()` makes a temporary directory: a `Default` doing I/O would surprise.
#![allow(clippy::new_without_default)]

pub mod actors;
pub mod attack;
pub mod bootstrap;
pub mod cleanup;
pub mod cluster;
pub mod collector;
pub mod containerd;
pub mod cri_fixture;
pub mod cri_node;
pub mod csi_plugin;
pub mod daemon;
pub mod deploy;
pub mod host_cgroups;
pub mod host_fixture;
pub mod identity;
pub mod kubelet_client;
pub mod leftovers;
pub mod node;
pub mod node_authorizer;
pub mod node_history;
pub mod node_references;
pub mod objects;
pub mod observer;
pub mod oci_image;
pub mod outage;
pub mod pods;
pub mod poll;
pub mod prometheus_text;
pub mod root_dir;
pub mod settled;
pub mod skip;
pub mod spoiling_proxy;
pub mod storage;
pub mod tar_archive;
pub mod test_cgroups;

pub use poll::{PATIENCE, eventually, eventually_async};
