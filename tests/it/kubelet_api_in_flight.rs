//! The kubelet API's open connections and streams in the debug endpoint: while a client
//! follows a running container's log, `/debug/kubelet-api` counts its TLS connection and its
//! `containerLogs` stream. The counters are process-wide and the tests of this binary run side
//! by side, so only "at least this one" is asserted.

use nodepulse::debug::{self, FaultInjectionGate};
use nodepulse_actors::ports::ContainerState;
use serde_json::Value;

use super::cri_pods::{NAMESPACE, Setup, create_pod, shell, spec};
use super::kubelet_api_logs::serve;
use nodepulse_testkit::{PATIENCE, eventually};

#[actix_rt::test]
async fn a_followed_log_counts_as_an_open_stream_and_connection_in_the_debug_endpoint() {
    let test = "a_followed_log_counts_as_an_open_stream_and_connection_in_the_debug_endpoint";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "api-in-flight").await
    else {
        return;
    };
    let api = serve(&node, &cluster.kubeconfig).await;
    let endpoint = debug::start(
        "127.0.0.1:0".parse().expect("address"),
        vec![node.supervisor.clone()],
        FaultInjectionGate::new(false, None),
        debug::Extras::default(),
    )
    .expect("the debug endpoint binds");
    let in_flight_url = format!("http://{}/debug/kubelet-api", endpoint.address);
    actix_rt::spawn(endpoint.server);
    node.guard(async {
        let name = format!("{}-followed", node.name);
        let script = "echo hello; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";
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
        let path = format!("/containerLogs/{NAMESPACE}/{name}/app?follow=true");
        let follow = api.client.get(&path);
        let counted = async {
            let client = reqwest::Client::new();
            let deadline = std::time::Instant::now() + PATIENCE;
            loop {
                let seen: Value = client
                    .get(&in_flight_url)
                    .send()
                    .await
                    .expect("the debug endpoint answers")
                    .json()
                    .await
                    .expect("JSON");
                let at_least_one = |value: &Value| value.as_i64().is_some_and(|open| open >= 1);
                if at_least_one(&seen["connections"])
                    && at_least_one(&seen["streams"]["containerLogs"])
                {
                    return;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the open follow is not counted: {seen}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            answer = follow => panic!(
                "the follow of a running container ended: {} {:?}", answer.status, answer.body
            ),
            () = counted => {}
        }
    })
    .await;
    api.served.stop();
}
