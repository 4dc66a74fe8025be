//! The kubelet API holds what it promises under load a stranger can make: `/logs/` streams a
//! file of any size in the same memory (the daemon's peak RSS, read from `/proc`, while three
//! clients read a 256 MiB file at once) and never waits on a FIFO.

use std::net::SocketAddr;

use super::kubelet_api::free_port;
use crate::common::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
    daemon::DaemonProcess,
    kubelet_client::{KubeletClient, TestCa, serving_ca},
    root_dir::RootDir,
};

const MIB: u64 = 1024 * 1024;

/// The most a process has had resident (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

#[tokio::test]
async fn node_logs_stream_a_huge_file_to_three_readers_in_constant_memory() {
    let cluster = TestCluster::start().await;
    let root = RootDir::new();
    let ca = TestCa::new("test-cluster-ca");
    let ca_file = root.path().join("client-ca.crt");
    std::fs::write(&ca_file, &ca.pem).expect("write the client CA");
    let port = free_port();
    let yaml = format!(
        "runtime: cri\ncontainerRuntimeEndpoint: unix://{root}/no-runtime.sock\nrootDir: {root}\naddress: 127.0.0.1\nport: {port}\nhealthzPort: 0\nauthentication:\n  x509: {{clientCAFile: {ca}}}\nauthorization: {{mode: AlwaysAllow}}\ndebug:\n  address: 127.0.0.1:0\n",
        root = root.path().display(),
        ca = ca_file.display(),
    );
    let node = unique_node_name("kapi-logs-rss");
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    // A directory of its own under the node's /var/log, removed however the test ends; the
    // file is sparse, so it costs no disk.
    let logs = tempfile::Builder::new()
        .prefix("nodepulse-test-")
        .tempdir_in("/var/log")
        .expect("a directory under /var/log");
    let size = 256 * MIB;
    std::fs::File::create(logs.path().join("huge.log"))
        .and_then(|file| file.set_len(size))
        .expect("a 256 MiB file");
    let dir = logs.path().file_name().expect("a name").to_string_lossy();
    let crt = std::fs::read_to_string(root.path().join("pki/kubelet.crt")).expect("kubelet.crt");
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let client = KubeletClient::new(
        SocketAddr::from(([127, 0, 0, 1], port)),
        &node,
        &serving_ca(&crt),
        Some(&admin),
    );
    assert_eq!(client.get("/healthz").await.status, 200);
    let before = peak_rss(daemon.pid());
    let path = format!("/logs/{dir}/huge.log");
    let reads = futures::future::join_all((0..3).map(|_| client.get_counted(&path))).await;
    let after = peak_rss(daemon.pid());
    eprintln!(
        "the daemon's peak RSS: {} MiB before, {} MiB after three reads of a {} MiB file at once",
        before / MIB,
        after / MIB,
        size / MIB
    );
    assert_eq!(reads, vec![(200, size); 3], "every byte to every reader");
    assert!(
        after - before < 32 * MIB,
        "the peak RSS grew by {} MiB",
        (after - before) / MIB
    );

    rustix::fs::mknodat(
        rustix::fs::CWD,
        logs.path().join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    // Bounded only so a daemon that waits for the FIFO's writer fails the test, not hangs it.
    let fifo = tokio::time::timeout(PATIENCE, client.get(&format!("/logs/{dir}/fifo")))
        .await
        .expect("an answer without a writer");
    assert_eq!(
        (fifo.status, fifo.body.as_str()),
        (404, "404 page not found\n")
    );
}
