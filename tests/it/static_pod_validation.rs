//! Static pods are validated as the API server's `ValidatePodCreate` would (issue 53): a
//! manifest whose namespace, UID, container or volume names would become host paths, or
//! whose mounts climb out of their volume, is refused with the kubelet's `invalid pod: [...]`
//! while the manifests beside it load.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use nodepulse_testkit::{
    attack::clean_up,
    cluster::{TestCluster, unique_node_name},
    daemon::{DaemonProcess, attack_config},
    eventually_async,
};

/// A manifest named `name` whose pod has `metadata` and `container` lines added.
fn manifest(name: &str, metadata: &str, container: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}{metadata}}}\nspec:\n  volumes: [{{name: data, emptyDir: {{}}}}]\n  containers: [{{name: app, image: busybox{container}}}]\n"
    )
}

#[actix_rt::test]
async fn a_static_pod_whose_fields_would_become_paths_is_refused_and_the_others_load() {
    let cluster = TestCluster::start().await;
    let name = unique_node_name("static-validation");
    let manifests = tempfile::tempdir().expect("a manifest directory");
    let refused = [
        (
            "namespace.yaml",
            manifest("ns", ", namespace: ../../etc", ""),
            "metadata.namespace: Invalid value: \"../../etc\": a lowercase RFC 1123 label",
        ),
        (
            "uid.yaml",
            manifest("uid", ", uid: ../../../etc", ""),
            "metadata.uid: Invalid value: \"../../../etc\": must be usable as a single path segment",
        ),
        (
            "container.yaml",
            manifest("container", "", "}, {name: ../app, image: busybox"),
            "spec.containers[1].name: Invalid value: \"../app\": a lowercase RFC 1123 label",
        ),
        (
            "sub-path.yaml",
            manifest(
                "subpath",
                "",
                ", volumeMounts: [{name: data, mountPath: /d, subPath: ../../etc}]",
            ),
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"../../etc\": must not contain '..'",
        ),
    ];
    for (file, text, _) in &refused {
        std::fs::write(manifests.path().join(file), text).expect("written");
    }
    std::fs::write(manifests.path().join("good.yaml"), manifest("good", "", "")).expect("written");
    let config = format!(
        "staticPodPath: {}\nfileCheckFrequency: 20s\n",
        manifests.path().display()
    );
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &name, &attack_config(&config)).await;

    let pods = Api::<Pod>::namespaced(cluster.client.clone(), "default");
    let mirror = format!("good-{}", name.to_lowercase());
    eventually_async("the good manifest's mirror pod", || async {
        pods.get_opt(&mirror).await.ok().flatten().is_some()
    })
    .await;
    let refusals = daemon.events("Could not process manifest file");
    for (file, _, expected) in refused {
        let logged = refusals.iter().find(|event| {
            event["path"]
                .as_str()
                .is_some_and(|path| path.ends_with(file))
        });
        let error = logged
            .and_then(|event| event["error"].as_str())
            .unwrap_or_default();
        assert!(
            error.starts_with("invalid pod: [") && error.contains(expected),
            "{file}: {error:?} (all refusals: {refusals:?})"
        );
    }
    clean_up(&cluster, daemon, &name).await;
}
