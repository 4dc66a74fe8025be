//! A pod above its `ephemeral-storage` limit is evicted, on a real container (containerd): the
//! upstream e2e "evicted pods should be terminal" — 10 MiB written into the writable layer
//! under a 5Mi limit — measured by the kubelet API's summary and ended Failed/Evicted with the
//! kubelet's message.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::{
    cri_pods::{NAMESPACE, Setup, create_pod, shell},
    kubelet_api_logs::serve_with,
};
use nodepulse_testkit::poll::eventually_async_within;

#[actix_rt::test]
async fn a_pod_writing_past_its_ephemeral_storage_limit_is_evicted() {
    let test = "a_pod_writing_past_its_ephemeral_storage_limit_is_evicted";
    let Some(Setup {
        node,
        fixture: _fixture,
        cluster,
    }) = Setup::start(test, "ephemeral").await
    else {
        return;
    };
    let _api = serve_with(&node, &cluster.kubeconfig, "").await;
    node.guard(async {
        let name = format!("{}-writer", node.name);
        let mut writer = shell(
            "bar",
            "dd if=/dev/zero of=/file bs=1M count=10; trap 'exit 0' TERM; sleep 10000 & wait",
        );
        writer["resources"] = serde_json::json!({"limits": {"ephemeral-storage": "5Mi"}});
        create_pod(
            &cluster,
            &node.name,
            &name,
            serde_json::json!({"spec": {"restartPolicy": "OnFailure", "containers": [writer]}}),
        )
        .await;
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), NAMESPACE);
        // Two housekeeping intervals (10 s): one to measure, one to evict.
        eventually_async_within(Duration::from_secs(60), "the pod is evicted", || async {
            let status = pods.get(&name).await.ok().and_then(|pod| pod.status);
            status.is_some_and(|status| {
                status.phase.as_deref() == Some("Failed")
                    && status.reason.as_deref() == Some("Evicted")
                    && status.message.as_deref()
                        == Some(
                            "Pod ephemeral local storage usage exceeds the total limit of \
                             containers 5Mi. ",
                        )
            })
        })
        .await;
    })
    .await;
}
