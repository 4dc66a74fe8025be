//! `volumeMounts[].subPathExpr` on a real `runtime: cri` node (containerd), as the upstream
//! "Variable Expansion" subpath specs check it: `$(VAR)` expanded with the container's
//! environment (a downward-API annotation included) names the directory mounted, made in the
//! volume, and what is written through one mount is read through the other; an expansion to
//! an absolute path, to `..`, or with a variable unset fails with `CreateContainerConfigError`
//! and the kubelet's text, and one failing for a missing annotation starts once it is added.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use nodepulse_actors::ports::ContainerRuntime;
use serde_json::{Value, json};

use crate::cri_pods::{NAMESPACE, Setup, UNTIL_TERM, app, create_pod, runtime_id, shell};
use nodepulse_testkit::{
    objects::wait_pod_event,
    pods::{phase, wait_pod, wait_running},
};

/// The specs' container: `POD_NAME=foo`, `ANNOTATION` from the pod's annotation `mysubpath`,
/// the volume at `/volume_mount` and its `subPathExpr` at `/subpath_mount`.
fn expanding(expr: &str, pod_name_value: &str) -> Value {
    let mut container = shell("dapi-container", UNTIL_TERM);
    container["env"] = json!([
        {"name": "POD_NAME", "value": pod_name_value},
        {"name": "ANNOTATION", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['mysubpath']"}}},
    ]);
    container["volumeMounts"] = json!([
        {"name": "workdir1", "mountPath": "/subpath_mount", "subPathExpr": expr},
        {"name": "workdir1", "mountPath": "/volume_mount"},
    ]);
    container
}

fn pod_spec(container: Value, annotations: Value) -> Value {
    json!({
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "workdir1", "emptyDir": {}}],
            "containers": [container],
        },
    })
}

fn waiting(pod: &Pod) -> (Option<String>, Option<String>) {
    let waiting = app(pod).state.and_then(|state| state.waiting);
    (
        waiting.as_ref().and_then(|w| w.reason.clone()),
        waiting.and_then(|w| w.message),
    )
}

async fn set_annotation(setup: &Setup, name: &str, value: &str) {
    let pods = Api::<Pod>::namespaced(setup.cluster.client.clone(), NAMESPACE);
    let patch = json!({"metadata": {"annotations": {"mysubpath": value}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("the annotation is set");
}

/// Runs `command` in the pod's container; its exit code.
async fn exec(setup: &Setup, pod: &Pod, command: &str) -> i32 {
    let command = vec!["/bin/sh".into(), "-c".into(), command.into()];
    let output = setup
        .fixture
        .client
        .exec_sync(runtime_id(&app(pod)), command, Duration::from_secs(10))
        .await
        .expect("ExecSync");
    output.exit_code
}

#[actix_rt::test]
async fn a_sub_path_expr_mounts_the_directory_its_expansion_names_in_the_volume() {
    let test = "a_sub_path_expr_mounts_the_directory_its_expansion_names_in_the_volume";
    let Some(setup) = Setup::start(test, "cri-subpathexpr").await else {
        return;
    };
    let node = &setup.node;
    node.guard(async {
        let name = format!("{}-writes", node.name);
        let container = expanding("$(ANNOTATION)/$(POD_NAME)", "foo");
        let spec = pod_spec(container, json!({"mysubpath": "mypath"}));
        let created = create_pod(&setup.cluster, &node.name, &name, spec).await;
        let pod = wait_running(&setup.cluster.client, NAMESPACE, &name).await;
        let volume = node
            .root_dir()
            .join("pods")
            .join(created.metadata.uid.as_deref().expect("a UID"))
            .join("volumes/kubernetes.io~empty-dir/workdir1");
        assert!(
            volume.join("mypath/foo").is_dir(),
            "the expanded subPath is made in the volume"
        );
        assert_eq!(
            exec(&setup, &pod, "touch /volume_mount/mypath/foo/test.log").await,
            0
        );
        assert_eq!(
            exec(&setup, &pod, "test -f /subpath_mount/test.log").await,
            0
        );
        assert_eq!(
            exec(&setup, &pod, "test -d /volume_mount/mypath/foo").await,
            0
        );

        // The environment is the container's at its start: a new value restarts nothing.
        set_annotation(&setup, &name, "mynewpath").await;
        let pod = wait_running(&setup.cluster.client, NAMESPACE, &name).await;
        assert_eq!(app(&pod).restart_count, 0);
        assert_eq!(
            exec(&setup, &pod, "test -f /subpath_mount/test.log").await,
            0
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_sub_path_expr_that_is_absolute_climbs_or_misses_a_value_fails_the_container_config() {
    let test =
        "a_sub_path_expr_that_is_absolute_climbs_or_misses_a_value_fails_the_container_config";
    let Some(setup) = Setup::start(test, "cri-subpathexpr-bad").await else {
        return;
    };
    let node = &setup.node;
    node.guard(async {
        let refused = [
            (
                "absolute",
                "$(POD_NAME)",
                "/tmp",
                "error SubPath `/tmp` must not be an absolute path",
            ),
            (
                "backticks",
                "$(POD_NAME)",
                "..",
                "unable to provision SubPath `..`: must not contain '..'",
            ),
            (
                "missing",
                "$(ANNOTATION)/$(POD_NAME)",
                "foo",
                "missing value for ANNOTATION",
            ),
        ];
        for (suffix, expr, value, _) in refused {
            let spec = pod_spec(expanding(expr, value), json!({"notmysubpath": "mypath"}));
            create_pod(
                &setup.cluster,
                &node.name,
                &format!("{}-{suffix}", node.name),
                spec,
            )
            .await;
        }
        for (suffix, _, _, message) in refused {
            let name = format!("{}-{suffix}", node.name);
            let pod = wait_pod(
                &setup.cluster.client,
                NAMESPACE,
                &name,
                "CreateContainerConfigError",
                |pod| waiting(pod).0.as_deref() == Some("CreateContainerConfigError"),
            )
            .await;
            assert_eq!(waiting(&pod).1.as_deref(), Some(message), "{suffix}");
            assert_eq!(phase(&pod), Some("Pending"), "{suffix}");
            wait_pod_event(&setup.cluster, &pod, "Warning", "Failed", |text| {
                text == format!("Error: {message}")
            })
            .await;
        }

        // The missing annotation added: the next try starts the container.
        let name = format!("{}-missing", node.name);
        set_annotation(&setup, &name, "mypath").await;
        let pod = wait_running(&setup.cluster.client, NAMESPACE, &name).await;
        assert_eq!(
            exec(&setup, &pod, "test -d /volume_mount/mypath/foo").await,
            0
        );
    })
    .await;
}
