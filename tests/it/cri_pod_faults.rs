//! The reliability suite on real containers: every actor of a `runtime: cri` node killed in
//! every mode while pods start, finish and are deleted, and at the end no pod status is lost or
//! wrong, no container was started twice, and a deleted pod left nothing in the runtime; and
//! a panic inside the CRI engine's own task for a pod is caught, counted, and the pod synced
//! again.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use nodepulse_actors::pods::{InjectProviderFault, ProviderFault};
use nodepulse_supervisor::{ChildState, KillMode};
use nodepulse_testkit::pods::{phase, running_and_ready, wait_pod};
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
                nodepulse_testkit::eventually(&format!("{name} runs again after {mode:?}"), || {
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

/// Issue 25: a panic inside the CRI engine's task for a pod (fault injection) is caught and
/// counted in `/debug/`, and the pod syncs again: its deletion, interrupted by the panic, goes
/// through and leaves nothing in the runtime.
#[actix_rt::test]
async fn a_pod_worker_that_panics_is_counted_and_its_pod_still_deleted_and_cleaned_up() {
    let Some(Setup {
        node,
        fixture,
        cluster,
    }) = Setup::start(
        "a_pod_worker_that_panics_is_counted_and_its_pod_still_deleted_and_cleaned_up",
        "cri-worker-panic",
    )
    .await
    else {
        return;
    };
    node.guard(async {
        let name = format!("{}-panics", node.name);
        let manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
        create_pod(&cluster, &node.name, &name, manifest).await;
        let running = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "Running and Ready",
            running_and_ready,
        )
        .await;
        let uid = running.metadata.uid.clone().expect("a uid");
        let armed = node
            .pod_lifecycle
            .request(InjectProviderFault(ProviderFault::PodWorker {
                pod_uid: uid,
            }))
            .await
            .expect("the pod lifecycle actor answers");
        assert!(armed, "the CRI provider takes the fault");

        // The deletion's first sync panics; the re-armed one stops the container.
        let pods_api = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let gone = delete_and_wait_gone(&pods_api, &name, 2).await;
        assert_eq!(gone.metadata.uid, running.metadata.uid);
        nodepulse_testkit::eventually_async(
            "the deleted pod's container is gone from the runtime",
            || {
                let (fixture, pod) = (&fixture, &running);
                async move { runtime_containers(fixture, pod).await.is_empty() }
            },
        )
        .await;
        let state = node
            .supervisor
            .actor_state(nodepulse_actors::pods::NAME, Duration::from_secs(5))
            .await
            .expect("the pod lifecycle actor's state");
        assert_eq!(
            state["provider"]["taskPanics"]["podWorkers"], 1,
            "the panic is counted: {state}"
        );
    })
    .await;
}
