//! Pod `observedGeneration` (GA in 1.35), on a real `runtime: cri` node against an API server
//! (the emulator, or a real cluster): the status nodepulse writes says which `metadata.generation`
//! of the pod it was made from, on `status.observedGeneration` and on every condition nodepulse
//! owns, and follows each spec update of a running pod as the upstream "Pod Generation"
//! conformance specs check (updates of tolerations and `activeDeadlineSeconds`).

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::cri_pods::{NAMESPACE, Setup, UNTIL_TERM, create_pod, shell, spec};
use nodepulse_testkit::pods::{wait_pod, wait_running};

/// The conditions nodepulse writes for a running pod, all of them kubelet-owned.
const OWNED: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// Whether the pod's status and each condition nodepulse owns observed `generation`.
fn observed(pod: &Pod, generation: i64) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    status.observed_generation == Some(generation)
        && OWNED.iter().all(|kind| {
            conditions
                .iter()
                .any(|c| c.type_ == *kind && c.observed_generation == Some(generation))
        })
}

async fn update(pods: &Api<Pod>, name: &str, spec: Value) -> Pod {
    pods.patch(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({ "spec": spec })),
    )
    .await
    .expect("the spec is updated")
}

#[actix_rt::test]
async fn each_spec_update_is_observed_on_the_status_and_the_conditions_nodepulse_owns() {
    let Some(setup) = Setup::start(
        "each_spec_update_is_observed_on_the_status_and_the_conditions_nodepulse_owns",
        "cri-generation",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-generation", node.name);
        let created = create_pod(
            cluster,
            &node.name,
            &name,
            spec("Always", json!([shell("app", UNTIL_TERM)])),
        )
        .await;
        assert_eq!(created.metadata.generation, Some(1));
        wait_running(&cluster.client, NAMESPACE, &name).await;
        wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "generation 1 observed",
            |pod| observed(pod, 1),
        )
        .await;
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let updates = [
            json!({"tolerations": [{"key": "nodepulse.test/generation", "operator": "Equal",
                "value": "v", "effect": "NoSchedule"}]}),
            json!({"activeDeadlineSeconds": 5000}),
            json!({"activeDeadlineSeconds": 4999}),
        ];
        for (step, change) in updates.into_iter().enumerate() {
            let generation = i64::try_from(step).expect("a small step") + 2;
            let updated = update(&pods, &name, change).await;
            assert_eq!(updated.metadata.generation, Some(generation));
            let what = format!("generation {generation} observed");
            let pod = wait_pod(&cluster.client, NAMESPACE, &name, &what, |pod| {
                observed(pod, generation)
            })
            .await;
            assert_eq!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Running"),
                "a spec update leaves the pod running"
            );
        }
    })
    .await;
}
