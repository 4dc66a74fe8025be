//! `kubectl exec`, `kubectl attach` and `kubectl port-forward` as a user types them, through
//! the API server (the emulator: `pods/exec|attach|portforward` translated or tunnelled as
//! kube-apiserver 1.36 does for a node without `ExtendWebSocketsToKubelet`) to the node's
//! kubelet API and containerd; and `/run`, the kubelet's one-shot ExecSync, on the kubelet
//! API itself.

use std::process::Stdio;

use nodepulse_actors::ports::ContainerState;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::cri_pods::{NAMESPACE, Setup, UNTIL_TERM, create_pod, shell, spec};
use super::kubelet_api_logs::{kubectl_node, serve};
use nodepulse_testkit::{eventually, eventually_async, pods::wait_running};

/// `kubectl` with the cluster's kubeconfig and `args`, its exit code, stdout and stderr.
async fn kubectl(
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: &[u8],
) -> (i32, String, String) {
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).await.expect("stdin written");
    drop(input);
    let output = child.wait_with_output().await.expect("kubectl ends");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[actix_rt::test]
async fn kubectl_exec_attach_and_port_forward_reach_a_container_through_the_api_server() {
    let test = "kubectl_exec_attach_and_port_forward_reach_a_container_through_the_api_server";
    let Some((cluster, _fixture, node, served)) = kubectl_node(test, "kubectl-exec").await else {
        return;
    };
    node.guard(async {
        let kubeconfig = cluster.kubeconfig.clone();
        let name = format!("{}-exec", node.name);
        create_pod(
            &cluster,
            &node.name,
            &name,
            spec(
                "Never",
                serde_json::json!([
                    shell("app", "while :; do echo pong | nc -l -p 8080; done"),
                    shell("done", "true"),
                ]),
            ),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let pods = node.handle.views.pods.clone();
        eventually("the short container ended", || {
            pods.snapshot()
                .container(NAMESPACE, &name, "done")
                .is_some_and(|c| c.state == ContainerState::Exited)
        })
        .await;
        let exec = |args: &'static [&'static str], stdin: &'static [u8]| {
            let (kubeconfig, name) = (kubeconfig.clone(), name.clone());
            async move {
                let mut all = vec!["exec", "-n", NAMESPACE, name.as_str()];
                all.extend_from_slice(args);
                kubectl(&kubeconfig, &all, stdin).await
            }
        };

        // stdout, stderr and the exit code, over WebSocket v5 translated to SPDY.
        let (code, stdout, stderr) = exec(
            &[
                "-c",
                "app",
                "--",
                "sh",
                "-c",
                "echo hi; echo oops >&2; exit 3",
            ],
            b"",
        )
        .await;
        assert_eq!((code, stdout.as_str()), (3, "hi\n"), "{stderr}");
        assert!(stderr.contains("oops\n"), "{stderr}");
        assert!(
            stderr.contains("command terminated with exit code 3"),
            "{stderr}"
        );
        // stdin, and its end (v5's CLOSE) ending the command.
        let (code, stdout, stderr) = exec(&["-i", "-c", "app", "--", "cat"], b"abc\n").await;
        assert_eq!((code, stdout.as_str()), (0, "abc\n"), "{stderr}");
        // The errors: a container the pod does not have (the API server's), one that is not
        // running (the kubelet's, through the refused upgrade).
        let (code, _, stderr) = exec(&["-c", "nope", "--", "true"], b"").await;
        assert_ne!(code, 0);
        assert!(
            stderr.contains(&format!("container nope is not valid for pod {name}")),
            "{stderr}"
        );
        let (code, _, stderr) = exec(&["-c", "done", "--", "true"], b"").await;
        assert_ne!(code, 0);
        assert!(
            stderr.contains("unable to upgrade connection: container not found (\"done\")"),
            "{stderr}"
        );
        let (_, _, stderr) = kubectl(
            &kubeconfig,
            &[
                "get",
                "--raw",
                &format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}-gone/exec?command=true"),
            ],
            b"",
        )
        .await;
        assert!(
            stderr.contains(&format!("pods \"{name}-gone\" not found")),
            "{stderr}"
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
        wait_running(&cluster.client, NAMESPACE, &talker).await;
        let mut attach = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["attach", "-n", NAMESPACE, &talker])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl runs");
        let mut lines = tokio::io::BufReader::new(attach.stdout.take().expect("stdout")).lines();
        let first = lines.next_line().await.expect("attach reads");
        if first.as_deref() != Some("tick") {
            let mut stderr = String::new();
            let _ = attach
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut stderr)
                .await;
            panic!("attach heard {first:?}: {stderr}");
        }
        attach.kill().await.expect("kubectl attach stops");

        // port-forward: a local port reaching the server inside the pod.
        let mut forward = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["port-forward", "-n", NAMESPACE, &name, ":8080"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl runs");
        let mut lines = tokio::io::BufReader::new(forward.stdout.take().expect("stdout")).lines();
        let announced = lines.next_line().await.expect("port-forward reads");
        // "Forwarding from 127.0.0.1:PORT -> 8080"
        let port: u16 = announced
            .as_deref()
            .and_then(|line| line.strip_prefix("Forwarding from 127.0.0.1:"))
            .and_then(|rest| rest.split_once(' '))
            .and_then(|(port, _)| port.parse().ok())
            .unwrap_or_else(|| panic!("no local port in {announced:?}"));
        eventually_async(
            "a forwarded connection reaches the pod's server",
            || async move {
                let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                else {
                    return false;
                };
                let _ = stream.write_all(b"ping\n").await;
                let mut answer = String::new();
                let _ = stream.read_to_string(&mut answer).await;
                // nc may be between two listens: the connection then ends with nothing.
                answer == "pong\n"
            },
        )
        .await;
        forward.kill().await.expect("kubectl port-forward stops");
    })
    .await;
    served.stop();
}

/// `/run` runs the command once (ExecSync) and answers stdout then stderr, whatever order
/// they were written in; a failing command, a pod or container that is not there and a GET
/// get the kubelet's answers.
#[actix_rt::test]
async fn run_answers_a_commands_stdout_then_stderr() {
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start("run_answers_a_commands_stdout_then_stderr", "run").await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    node.guard(async {
        let name = format!("{}-run", node.name);
        let pod = create_pod(
            &cluster,
            &node.name,
            &name,
            spec("Always", serde_json::json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        let pods = node.handle.views.pods.clone();
        eventually("the container runs", || {
            pods.snapshot()
                .container(NAMESPACE, &name, "app")
                .is_some_and(|c| c.state == ContainerState::Running)
        })
        .await;
        let uid = pod.metadata.uid.clone().expect("a uid");
        // `cmd` is split on single spaces, so the script spells its spaces ${IFS}.
        let script = "sh%20-c%20echo%24%7BIFS%7Derr%3E%262%3Becho%24%7BIFS%7Dout";
        for path in [
            format!("/run/{NAMESPACE}/{name}/app?cmd={script}"),
            format!("/run/{NAMESPACE}/{name}/{uid}/app?cmd={script}"),
        ] {
            let answer = api.client.request("POST", &path, &[]).await;
            assert_eq!((answer.status, answer.body.as_str()), (200, "out\nerr\n"), "{path}");
            assert_eq!(
                answer.headers.get("content-type").and_then(|v| v.to_str().ok()),
                Some("application/json")
            );
        }
        let failing = api
            .client
            .request(
                "POST",
                &format!("/run/{NAMESPACE}/{name}/app?cmd=sh%20-c%20echo%24%7BIFS%7Dbad%3E%262%3Bexit%24%7BIFS%7D3"),
                &[],
            )
            .await;
        assert_eq!(
            (failing.status, failing.body.as_str()),
            (500, "command 'sh -c echo${IFS}bad>&2;exit${IFS}3' exited with 3: bad\n")
        );
        let nobody = api
            .client
            .request("POST", &format!("/run/{NAMESPACE}/{name}-gone/app?cmd=true"), &[])
            .await;
        assert_eq!((nobody.status, nobody.body.as_str()), (404, "pod does not exist"));
        let nothing = api
            .client
            .request("POST", &format!("/run/{NAMESPACE}/{name}/nope?cmd=true"), &[])
            .await;
        assert_eq!(
            (nothing.status, nothing.body.as_str()),
            (500, "container not found (\"nope\")")
        );
        let get = api.client.get(&format!("/run/{NAMESPACE}/{name}/app?cmd=true")).await;
        assert_eq!(get.status, 405);
    })
    .await;
    api.served.stop();
}
