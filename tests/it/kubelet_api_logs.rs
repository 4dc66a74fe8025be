//! `/containerLogs`, `/exec`, `/attach` and `/portForward` on real containers (containerd): what a container wrote, read from the CRI
//! log file the runtime writes, with the kubelet's query parameters (tailLines, limitBytes,
//! timestamps, sinceTime, previous after a restart, follow until the container ends) and its
//! error texts, through the kubelet API over TLS with the API server's kind of client
//! certificate; and `kubectl logs` through the emulator, which reaches the node's kubelet API
//! as kube-apiserver does.

use std::{io::Write, net::SocketAddr};

use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Settings, Source},
    kubelet_server::{self, KubeletApi, Parts},
};
use nodepulse_actors::ports::ContainerState;

use super::cri_pods::{NAMESPACE, Setup, create_pod, shell, spec};
use nodepulse_testkit::{
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    eventually, eventually_async,
    kubelet_client::{KubeletClient, TestCa, serving_ca},
    pods::wait_running,
    root_dir::RootDir,
};

pub(crate) struct Api {
    pub(crate) served: KubeletApi,
    pub(crate) client: KubeletClient,
    /// The CA whose client certificates the API accepts.
    pub(crate) ca: TestCa,
    _root: RootDir,
    _ca_file: tempfile::NamedTempFile,
}

/// A kubelet API for `node` (x509 clients of a test CA, AlwaysAllow) and a client of it with
/// the API server's kind of certificate.
pub(crate) async fn serve(node: &CriNode, kubeconfig: &std::path::Path) -> Api {
    serve_with(node, kubeconfig, "").await
}

/// [`serve`] with `extra` settings (YAML lines) appended to the configuration.
pub(crate) async fn serve_with(node: &CriNode, kubeconfig: &std::path::Path, extra: &str) -> Api {
    let root = RootDir::new();
    let ca = TestCa::new("test-cluster-ca");
    let mut ca_file = tempfile::NamedTempFile::new().expect("temp file");
    ca_file.write_all(ca.pem.as_bytes()).expect("write");
    let yaml = format!(
        "runtime: cri\nrootDir: {}\nport: 0\nhealthzPort: 0\nauthentication:\n  x509: {{clientCAFile: {}}}\nauthorization: {{mode: AlwaysAllow}}\n{extra}",
        root.path().display(),
        ca_file.path().display()
    );
    let settings = Settings {
        config: Config::parse(&yaml, Source::Embedded).expect("valid"),
        node_name: node.name.clone(),
        kubeconfig: Some(kubeconfig.to_owned()),
        standalone: false,
        bootstrap: None,
    };
    let reviews = KubeApi::connect(Some(kubeconfig), &settings.config)
        .await
        .expect("connects");
    let served = kubelet_server::prepare(&settings)
        .expect("prepared")
        .serve(Parts {
            reviews,
            problems: None,
            pods: node.handle.views.pods.clone(),
            runtime: node.handle.runtime.clone(),
            volumes: node.handle.views.volumes.clone(),
            probes: node.handle.views.probes.clone(),
            pod_storage: Some(node.handle.views.pod_storage.clone()),
        })
        .expect("serving");
    let crt = std::fs::read_to_string(root.path().join("pki/kubelet.crt")).expect("kubelet.crt");
    let identity = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let client = KubeletClient::new(
        SocketAddr::from(([127, 0, 0, 1], served.address.port())),
        &node.name,
        &serving_ca(&crt),
        Some(&identity),
    );
    Api {
        served,
        client,
        ca,
        _root: root,
        _ca_file: ca_file,
    }
}

fn logs_path(pod: &str, query: &str) -> String {
    format!("/containerLogs/{NAMESPACE}/{pod}/app?{query}")
}

#[actix_rt::test]
async fn a_containers_output_is_served_with_the_kubelets_query_parameters() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "a_containers_output_is_served_with_the_kubelets_query_parameters",
        "logs",
    )
    .await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-out", node.name);
        let script = "for i in 1 2 3 4 5; do echo line-$i; done; echo to-stderr >&2; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", script)])),
        )
        .await;
        // The runtime copies stdout and stderr on readers of their own, so the log holds the
        // stderr line wherever it arrived among the stdout ones: the whole output is compared
        // as lines, and the tails against the order the log has.
        let everything = ["line-1", "line-2", "line-3", "line-4", "line-5", "to-stderr"];
        let sorted = |body: &str| {
            let mut lines: Vec<String> = body.lines().map(str::to_owned).collect();
            lines.sort();
            lines
        };
        eventually_async("the whole output is served", || async {
            let answer = api.client.get(&logs_path(&name, "")).await;
            answer.status == 200 && sorted(&answer.body) == everything
        })
        .await;
        let served = api.client.get(&logs_path(&name, "")).await.body;
        let served: Vec<&str> = served.lines().collect();
        let stdout: Vec<&str> = served.iter().copied().filter(|l| l.starts_with("line-")).collect();
        assert_eq!(stdout, everything[..5], "one stream keeps its own order: {served:?}");
        let last = served[5];
        let last_two = format!("{}\n{last}\n", served[4]);
        let body = |query: &'static str| {
            let path = logs_path(&name, query);
            let client = &api.client;
            async move { client.get(&path).await.body }
        };
        assert_eq!(body("tailLines=2").await, last_two);
        assert_eq!(body("tail=1").await, format!("{last}\n"));
        assert_eq!(body("limitBytes=3").await, served[0][..3]);
        assert_eq!(body("sinceTime=2999-01-01T00:00:00Z").await, "");
        let stamped = body("timestamps=true&tailLines=1").await;
        let (time, line) = stamped.split_once(' ').expect("a timestamp, then the line");
        assert!(time.parse::<jiff::Timestamp>().is_ok(), "{stamped}");
        assert_eq!(time.len(), "2026-12-01T10:00:00.000000000Z".len(), "{stamped}");
        assert_eq!(line, format!("{last}\n"));

        let previous = api.client.get(&logs_path(&name, "previous=true")).await;
        assert_eq!(
            (previous.status, previous.body),
            (
                400,
                format!("previous terminated container \"app\" in pod \"{name}\" not found\n")
            )
        );
        let nobody = api
            .client
            .get(&format!("/containerLogs/{NAMESPACE}/nope/app"))
            .await;
        assert_eq!((nobody.status, nobody.body.as_str()), (404, "pod \"nope\" does not exist\n"));
        let running: serde_json::Value =
            serde_json::from_str(&api.client.get("/runningpods/").await.body).expect("a PodList");
        let ours: Vec<&serde_json::Value> = running["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|pod| pod["metadata"]["name"] == name.as_str())
            .collect();
        assert_eq!(ours.len(), 1, "{running}");
        assert_eq!(ours[0]["spec"]["containers"][0]["name"], "app");
        let configz: serde_json::Value =
            serde_json::from_str(&api.client.get("/configz").await.body).expect("JSON");
        assert_eq!(configz["kubeletconfig"]["kind"], "KubeletConfiguration");
        assert_eq!(configz["kubeletconfig"]["authorization"]["mode"], "AlwaysAllow");

        let invalid = api.client.get(&logs_path(&name, "tailLines=-1")).await;
        assert_eq!(
            (invalid.status, invalid.body.as_str()),
            (422, r#"{"message": "Invalid request."}"#)
        );
    })
    .await;
    api.served.stop();
}

#[actix_rt::test]
async fn follow_streams_until_the_container_ends_and_previous_reads_the_last_run() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "follow_streams_until_the_container_ends_and_previous_reads_the_last_run",
        "logs-follow",
    )
    .await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        // Runs a little while, then exits 1; restarted (Always), it runs again.
        let name = format!("{}-run", node.name);
        let script = "echo run-start; for i in 1 2 3; do sleep 0.3; echo tick-$i; done; exit 1";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", script)])),
        )
        .await;
        let pods = node.handle.views.pods.clone();
        eventually("the container runs", || {
            pods.snapshot()
                .container(NAMESPACE, &name, "app")
                .is_some_and(|c| c.state == ContainerState::Running)
        })
        .await;
        let followed = api.client.get(&logs_path(&name, "follow=true")).await;
        assert_eq!(followed.status, 200);
        assert!(
            followed.body.ends_with("tick-1\ntick-2\ntick-3\n"),
            "the follow ends with the container's last line: {:?}",
            followed.body
        );

        eventually("the container ran twice", || {
            pods.snapshot()
                .by_name(NAMESPACE, &name)
                .and_then(|pod| {
                    pod.previous("app")
                        .map(|c| c.state == ContainerState::Exited)
                })
                .unwrap_or(false)
        })
        .await;
        let previous = api.client.get(&logs_path(&name, "previous=true")).await;
        assert_eq!(
            (previous.status, previous.body.as_str()),
            (200, "run-start\ntick-1\ntick-2\ntick-3\n")
        );
    })
    .await;
    api.served.stop();
}

/// `kubectl logs` with its flags as a user types them, through the API server (the emulator,
/// dialing the node's InternalIP as `--kubelet-preferred-address-types=InternalIP,Hostname`
/// makes kube-apiserver dial it) to the node's kubelet API with its client certificate.
#[actix_rt::test]
async fn kubectl_logs_reads_a_container_through_the_api_server_and_the_kubelet_api() {
    let test = "kubectl_logs_reads_a_container_through_the_api_server_and_the_kubelet_api";
    let Some((cluster, _fixture, node, served)) = kubectl_node(test, "kubectl-logs").await else {
        return;
    };
    node.guard(async {
        let name = format!("{}-out", node.name);
        let script = "for i in 1 2 3; do echo line-$i; done; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", script)])),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let kubeconfig = cluster.kubeconfig.clone();
        let logs = |flags: &'static [&'static str]| {
            let (kubeconfig, name) = (kubeconfig.clone(), name.clone());
            async move {
                let mut args = vec!["logs", "-n", NAMESPACE, &name];
                args.extend_from_slice(flags);
                kubectl(&kubeconfig, &args).await
            }
        };
        eventually_async("kubectl logs shows the whole output", || async {
            logs(&[]).await.1 == "line-1\nline-2\nline-3\n"
        })
        .await;
        assert_eq!(logs(&["--tail=1"]).await.1, "line-3\n");
        assert_eq!(logs(&["--limit-bytes=2"]).await.1, "li");
        assert_eq!(logs(&["--since=1h"]).await.1, "line-1\nline-2\nline-3\n");
        let stamped = logs(&["--timestamps", "--tail=1"]).await.1;
        let (time, line) = stamped.split_once(' ').expect("a timestamp, then the line");
        assert!(time.parse::<jiff::Timestamp>().is_ok(), "{stamped}");
        assert_eq!(line, "line-3\n");
        let (ok, _, stderr) = logs(&["--previous"]).await;
        assert!(!ok);
        assert!(
            stderr.contains(&format!(
                "previous terminated container \"app\" in pod \"{name}\" not found"
            )),
            "{stderr}"
        );
        let (ok, _, stderr) = logs(&["-c", "nope"]).await;
        assert!(!ok);
        assert!(
            stderr.contains(&format!("container nope is not valid for pod {name}")),
            "{stderr}"
        );

        // -f follows a container until it ends.
        let finite = format!("{}-finite", node.name);
        create_pod(
            &cluster,
            &node.name,
            &finite,
            spec(
                "Never",
                serde_json::json!([shell("app", "echo first; sleep 1; echo second")]),
            ),
        )
        .await;
        let pods = node.handle.views.pods.clone();
        eventually("the finite container started", || {
            pods.snapshot().container(NAMESPACE, &finite, "app").is_some_and(|c| {
                matches!(c.state, ContainerState::Running | ContainerState::Exited)
            })
        })
        .await;
        let followed = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["logs", "-f", "-n", NAMESPACE, &finite])
            .output()
            .await
            .expect("kubectl runs");
        assert_eq!(
            String::from_utf8_lossy(&followed.stdout),
            "first\nsecond\n",
            "{}",
            String::from_utf8_lossy(&followed.stderr)
        );

        // The node proxy reaches the same API.
        let raw = |path: String| {
            let kubeconfig = kubeconfig.clone();
            async move {
                let output = tokio::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["get", "--raw", &path])
                    .output()
                    .await
                    .expect("kubectl runs");
                String::from_utf8_lossy(&output.stdout).into_owned()
            }
        };
        assert_eq!(raw(format!("/api/v1/nodes/{}/proxy/healthz", node.name)).await, "ok");
        let running = raw(format!("/api/v1/nodes/{}/proxy/runningpods/", node.name)).await;
        assert!(running.contains(&format!("\"name\":\"{name}\"")), "{running}");
    })
    .await;
    served.stop();
}

/// The emulator (dialing the node's InternalIP, as `--kubelet-preferred-address-types=
/// InternalIP,Hostname` makes kube-apiserver dial it) and a node on containerd serving the
/// kubelet API to its kubelet-client certificate; `None` (the test skipped) without
/// containerd or kubectl, or on a real cluster, whose API server dials the node's Hostname, a
/// unique test name nothing resolves.
pub(crate) async fn kubectl_node(
    test: &str,
    prefix: &str,
) -> Option<(TestCluster, CriFixture, CriNode, KubeletApi)> {
    if CriFixture::required(test).is_none() || !kubectl_available(test) {
        return None;
    }
    let cluster = TestCluster::start_with(nodepulse_emulator::EmulatorConfig {
        kubelet_preferred_address_types: vec!["InternalIP".into(), "Hostname".into()],
        ..nodepulse_emulator::EmulatorConfig::for_tests()
    })
    .await;
    let Some(emulator) = cluster.emulator.as_ref() else {
        nodepulse_testkit::skip::skipped(
            test,
            "the emulator (a node address the API server dials)",
        );
        return None;
    };
    let fixture = CriFixture::start(prefix).await;
    let (node, served) = CriNode::start_with_kubelet_api(
        &cluster.kubeconfig,
        &fixture,
        prefix,
        emulator.kubelet_client_ca_pem(),
    )
    .await;
    Some((cluster, fixture, node, served))
}

/// `kubectl --kubeconfig <kubeconfig> <args>`: whether it succeeded, its stdout and stderr.
pub(crate) async fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .expect("kubectl runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

pub(crate) fn kubectl_available(test: &str) -> bool {
    let found = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl is required in CI"
        );
        nodepulse_testkit::skip::skipped(test, "kubectl");
    }
    found
}

/// `/exec`, `/attach` and `/portForward` relayed to containerd's streaming server, as the
/// kubelet's upgrade proxy relays them: over the legacy WebSocket protocol the runtime speaks
/// itself, a command's stdout and stderr arrive on their channels and its exit code in the v4
/// status, an attached container's output streams, a forwarded port reaches a server inside
/// the pod; a pod that is not there, no stream asked for and a request that is no upgrade get
/// the kubelet's texts.
#[actix_rt::test]
async fn exec_attach_and_port_forward_are_relayed_to_the_runtimes_streaming_server() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(
        "exec_attach_and_port_forward_are_relayed_to_the_runtimes_streaming_server",
        "exec",
    )
    .await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-exec", node.name);
        let script = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", script)])),
        )
        .await;
        let pods = node.handle.views.pods.clone();
        eventually("the container runs", || {
            pods.snapshot()
                .container(NAMESPACE, &name, "app")
                .is_some_and(|c| c.state == ContainerState::Running)
        })
        .await;
        let path = format!(
            "/exec/{NAMESPACE}/{name}/app?command=sh&command=-c&command=echo%20out%3B%20echo%20err%20%3E%262%3B%20exit%203&output=1&error=1"
        );
        let (status, headers, socket) = api.client.websocket(&path, "v4.channel.k8s.io").await;
        assert_eq!(status, 101, "{headers:?}");
        assert_eq!(
            headers.get("sec-websocket-protocol").and_then(|v| v.to_str().ok()),
            Some("v4.channel.k8s.io")
        );
        let messages = socket.expect("a socket").read_to_close().await;
        let on = |channel: u8| -> String {
            messages
                .iter()
                .filter(|(ch, _)| *ch == channel)
                .map(|(_, data)| String::from_utf8_lossy(data).into_owned())
                .collect()
        };
        assert_eq!(on(1), "out\n", "{messages:?}");
        assert_eq!(on(2), "err\n", "{messages:?}");
        let status: serde_json::Value = serde_json::from_str(&on(3)).expect("a v4 status");
        assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
        assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");

        let nobody = api
            .client
            .websocket(&format!("/exec/{NAMESPACE}/nope/app?command=true&output=1"), "v4.channel.k8s.io")
            .await;
        assert_eq!(nobody.0, 404);
        let nothing = api
            .client
            .get(&format!("/exec/{NAMESPACE}/{name}/app?command=true"))
            .await;
        assert_eq!(
            (nothing.status, nothing.body.as_str()),
            (400, "you must specify at least 1 of stdin, stdout, stderr\n")
        );
        let plain = api
            .client
            .get(&format!("/exec/{NAMESPACE}/{name}/app?command=true&output=1"))
            .await;
        assert_eq!(
            (plain.status, plain.body.as_str()),
            (500, "Upgrade request required\n")
        );

        // attach: the container's own output, as it writes it.
        let talker = format!("{}-talk", node.name);
        create_pod(
            &cluster,
            &node.name,
            &talker,
            spec(
                "Always",
                serde_json::json!([shell("app", "while :; do echo tick; sleep 0.2; done")]),
            ),
        )
        .await;
        eventually("the talker runs", || {
            pods.snapshot()
                .container(NAMESPACE, &talker, "app")
                .is_some_and(|c| c.state == ContainerState::Running)
        })
        .await;
        let (status, _, socket) = api
            .client
            .websocket(
                &format!("/attach/{NAMESPACE}/{talker}/app?output=1"),
                "v4.channel.k8s.io",
            )
            .await;
        assert_eq!(status, 101);
        let mut socket = socket.expect("a socket");
        let mut heard = String::new();
        while !heard.contains("tick\n") {
            let (channel, data) = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                socket.next_message(),
            )
            .await
            .expect("output in time")
            .expect("the stream is open");
            if channel == 1 {
                heard.push_str(&String::from_utf8_lossy(&data));
            }
        }

        // port-forward: a connection to a port inside the pod (its network namespace).
        let server = format!("{}-port", node.name);
        create_pod(
            &cluster,
            &node.name,
            &server,
            spec(
                "Always",
                serde_json::json!([shell("app", "while :; do echo pong | nc -l -p 8080; done")]),
            ),
        )
        .await;
        eventually("the port server runs", || {
            pods.snapshot()
                .container(NAMESPACE, &server, "app")
                .is_some_and(|c| c.state == ContainerState::Running)
        })
        .await;
        let mut answer = String::new();
        for _ in 0..50 {
            let (status, _, socket) = api
                .client
                .websocket(
                    &format!("/portForward/{NAMESPACE}/{server}?port=8080"),
                    "v4.channel.k8s.io",
                )
                .await;
            assert_eq!(status, 101);
            let mut socket = socket.expect("a socket");
            socket.send(0, b"ping\n").await;
            // Each channel first carries its port (2 bytes, little-endian), then data.
            while let Ok(Some((channel, data))) =
                tokio::time::timeout(std::time::Duration::from_secs(2), socket.next_message()).await
            {
                if channel == 0 && data != 8080u16.to_le_bytes() {
                    answer.push_str(&String::from_utf8_lossy(&data));
                }
                if answer.contains("pong") {
                    break;
                }
            }
            if answer.contains("pong") {
                break;
            }
            // nc was between two listens; try again.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(answer.contains("pong\n"), "{answer:?}");
    })
    .await;
    api.served.stop();
}
