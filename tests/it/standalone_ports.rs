//! `nodepulse --standalone` as a new user runs it on a host that already runs a kubelet (or
//! another nodepulse): every well-known port it would take (the API server's 16443, the
//! kubelet API's 10250, healthz's 10248, the debug endpoint's 10280) is held by someone else,
//! and the node's name is one nothing resolves. It still starts, says where each listener went,
//! and `kubectl logs` and `kubectl exec` reach the node's containers through its API server.

use std::{net::TcpListener, time::Duration};

use crate::{
    cri_pods::{NAMESPACE, UNTIL_TERM, shell, spec},
    kubelet_api_logs::{kubectl, kubectl_available},
};
use nodepulse_testkit::{
    cluster::unique_node_name, cri_fixture::CriFixture, cri_node::cri_node_config,
    daemon::DaemonProcess, pods::wait_running, root_dir::RootDir,
};

/// The addresses of the listeners standalone mode opens by default, as a kubelet and another
/// nodepulse hold them.
const WELL_KNOWN: &[(&str, &str)] = &[
    ("the standalone API server", "127.0.0.1:16443"),
    ("the kubelet API", "0.0.0.0:10250"),
    ("the kubelet API's healthz", "127.0.0.1:10248"),
    ("the debug endpoint", "127.0.0.1:10280"),
];

/// Holds every well-known address (one something else holds already is taken all the same).
fn hold_well_known_ports() -> Vec<TcpListener> {
    WELL_KNOWN
        .iter()
        .filter_map(|(_, address)| match TcpListener::bind(address) {
            Ok(listener) => Some(listener),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => None,
            Err(error) => panic!("cannot hold {address}: {error}"),
        })
        .collect()
}

#[tokio::test]
async fn standalone_beside_a_kubelet_needs_no_well_known_port_nor_a_resolvable_name() {
    let test = "standalone_beside_a_kubelet_needs_no_well_known_port_nor_a_resolvable_name";
    if CriFixture::required(test).is_none() || !kubectl_available(test) {
        return;
    }
    let _held = hold_well_known_ports();
    let fixture = CriFixture::start("standalone-ports").await;
    let dir = RootDir::new();
    let kubeconfig = dir.path().join("kubeconfig");
    // The defaults for every listener: the node's test configuration without its port 0s.
    let yaml = cri_node_config(&fixture, dir.path())
        .replace("port: 0\n", "")
        .replace("healthzPort: 0\n", "")
        .replace("debug:\n  address: 127.0.0.1:0\n", "")
        + &format!("standalone:\n  kubeconfigPath: {}\n", kubeconfig.display());
    // `.invalid` never resolves (RFC 6761).
    let node = format!("{}.invalid", unique_node_name("standalone"));
    let mut daemon = DaemonProcess::standalone(&node, &yaml).await;
    for (what, address) in WELL_KNOWN {
        let moved = daemon.events(&format!(
            "{what}: the address is taken, serving on a port of its own"
        ));
        let wanted = address.replace("0.0.0.0", "127.0.0.1");
        eprintln!(
            "{what}: {wanted} taken, {}",
            moved
                .first()
                .map_or("not moved".to_owned(), |event| format!(
                    "serves on {}",
                    event["bound"]
                ))
        );
        assert!(
            moved
                .first()
                .is_some_and(|event| event["wanted"] == wanted.as_str()),
            "{what} says where it went instead of {wanted}: {moved:?}"
        );
    }

    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("the standalone kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client configuration");
    let client = kube::Client::try_from(config).expect("a client");
    let name = "hello";
    let script = format!("echo from-standalone; {UNTIL_TERM}");
    nodepulse_testkit::pods::create(
        &client,
        &nodepulse_testkit::pods::pod_manifest(
            name,
            NAMESPACE,
            &node,
            spec("Always", serde_json::json!([shell("app", &script)])),
        ),
    )
    .await;
    wait_running(&client, NAMESPACE, name).await;
    let logs = kubectl(&kubeconfig, &["logs", "-n", NAMESPACE, name]).await;
    assert_eq!(logs.1, "from-standalone\n", "kubectl logs: {logs:?}");
    eprintln!(
        "kubectl logs through the standalone API server: {:?}",
        logs.1
    );
    let exec = kubectl(
        &kubeconfig,
        &["exec", "-n", NAMESPACE, name, "--", "echo", "hi"],
    )
    .await;
    assert_eq!(exec.1, "hi\n", "kubectl exec: {exec:?}");
    let healthz = kubectl(
        &kubeconfig,
        &[
            "get",
            "--raw",
            &format!("/api/v1/nodes/{node}/proxy/healthz"),
        ],
    )
    .await;
    assert_eq!(healthz.1, "ok", "the node proxy: {healthz:?}");

    // Stopped as a user stops it, so its pods' workers are done before the fixture's clean-up.
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(30)).await, Some(0));
}
