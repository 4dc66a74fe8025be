//! The reliability suite on real containers: every actor of a `runtime: cri` node killed in
//! every mode while pods start, finish and are deleted, and at the end no pod status is lost or
//! wrong, no container was started twice, and a deleted pod left nothing in the runtime.

use crate::common;

use common::pods::{phase, running_and_ready, wait_pod};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use nodepulse_supervisor::{ChildState, KillMode};
use serde_json::json;

use crate::cri_pods::{
    Setup, UNTIL_TERM, app, create_pod, delete_and_wait_gone, runtime_containers, shell, spec,
};

const NAMESPACE: &str = "default";

#[actix_rt::test]
async fn every_actor_killed_in_every_mode_while_pods_start_and_stop_loses_no_pod_status() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "every_actor_killed_in_every_mode_while_pods_start_and_stop_loses_no_pod_status",
        "cri-faults",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let running: Vec<String> = (0..3).map(|i| format!("{}-run-{i}", node.name)).collect();
        for name in &running {
            let manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
            create_pod(&cluster, &node.name, name, manifest).await;
        }
        let done = format!("{}-done", node.name);
        let finishing = spec("Never", json!([shell("app", "sleep 2; exit 0")]));
        create_pod(&cluster, &node.name, &done, finishing).await;

        let actors: Vec<String> = node
            .supervisor
            .actors()
            .into_iter()
            .map(|actor| actor.name)
            .collect();
        assert!(
            actors.len() >= 7,
            "every node actor is supervised: {actors:?}"
        );
        let pods_api = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        for (round, mode) in [KillMode::Stop, KillMode::Panic, KillMode::Hang]
            .into_iter()
            .enumerate()
        {
            for name in &actors {
                let before = node.supervisor.actor(name).expect("the actor").restarts;
                node.supervisor
                    .kill(name, mode)
                    .await
                    .unwrap_or_else(|error| panic!("kill {name} ({mode:?}): {error:?}"));
                common::eventually(&format!("{name} runs again after {mode:?}"), || {
                    node.supervisor.actor(name).is_some_and(|actor| {
                        actor.restarts > before && actor.state == ChildState::Running
                    })
                })
                .await;
            }
            if round == 0 {
                // A pod deleted while the actors go down and come back.
                let running_pod = wait_pod(
                    &cluster.client,
                    NAMESPACE,
                    &running[2],
                    "Running",
                    running_and_ready,
                )
                .await;
                let gone = delete_and_wait_gone(&pods_api, &running[2], 2).await;
                assert_eq!(gone.metadata.uid, running_pod.metadata.uid);
                assert!(
                    runtime_containers(&fixture, &running_pod).await.is_empty(),
                    "the deleted pod's container is gone from the runtime"
                );
            }
        }

        for name in &running[..2] {
            let pod = wait_pod(
                &cluster.client,
                NAMESPACE,
                name,
                "Running and Ready",
                running_and_ready,
            )
            .await;
            assert_eq!(
                runtime_containers(&fixture, &pod).await.len(),
                1,
                "{name}: one container, never a second"
            );
            assert_eq!(app(&pod).restart_count, 0, "{name}: never restarted");
        }
        let finished = wait_pod(&cluster.client, NAMESPACE, &done, "Succeeded", |pod| {
            phase(pod) == Some("Succeeded")
        })
        .await;
        let terminated = app(&finished)
            .state
            .and_then(|state| state.terminated)
            .expect("the container's end is in the status");
        assert_eq!(
            (terminated.exit_code, terminated.reason.as_deref()),
            (0, Some("Completed"))
        );
        assert!(
            node.supervisor.escalation().is_none(),
            "three kills per actor stay within the restart bound"
        );
    })
    .await;
}
