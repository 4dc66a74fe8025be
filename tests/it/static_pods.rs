//! Static pods with real containers (issue 27): a manifest in `staticPodPath` runs as the pod
//! `<name>-<node>` on a `runtime: cri` node (containerd), with a mirror pod in the API that
//! carries the kubelet's annotations, an owner reference to the Node and the static pod's
//! status; a deleted mirror pod comes back while the pod keeps running; an edited manifest
//! replaces the pod and its mirror; a removed manifest stops the pod and deletes the mirror;
//! and the pod keeps running while the API server is down (the emulator's outage), its mirror
//! pod showing the right status after.

use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, api::DeleteParams};
use nodepulse_actors::ports::{ContainerFilter, ContainerRuntime, ContainerState, SandboxFilter};
use nodepulse_emulator::Outage;
use serde_json::json;

use crate::cri_pods::{UNTIL_TERM, app, runtime_id};
use nodepulse_testkit::{
    attack::needs_emulator,
    cleanup::{Owned, RUN_LABEL, own, run_id},
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    eventually_async,
    oci_image::BUSYBOX_IMAGE,
    outage::outage_length,
    pods::{running_and_ready, wait_pod},
};

pub(crate) const NAMESPACE: &str = "default";
pub(crate) const MIRROR: &str = "kubernetes.io/config.mirror";
pub(crate) const HASH: &str = "kubernetes.io/config.hash";

/// A CRI node reading static pods from a directory of the test's, against a test cluster.
pub(crate) struct StaticSetup {
    pub(crate) node: CriNode,
    pub(crate) fixture: CriFixture,
    pub(crate) cluster: TestCluster,
    pub(crate) manifests: tempfile::TempDir,
}

impl StaticSetup {
    pub(crate) async fn start(test: &str, prefix: &str) -> Option<Self> {
        Self::start_with(test, prefix, "").await
    }

    /// [`Self::start`], with `extra` configuration lines (another static pod source).
    pub(crate) async fn start_with(test: &str, prefix: &str, extra: &str) -> Option<Self> {
        CriFixture::required(test)?;
        let cluster = TestCluster::start().await;
        let fixture = CriFixture::start(prefix).await;
        let manifests = tempfile::tempdir().expect("a manifest directory");
        let path = manifests.path().to_owned();
        let node = CriNode::start_with(&cluster.kubeconfig, &fixture, prefix, |_| {
            format!(
                "staticPodPath: {}\nfileCheckFrequency: 20s\n{extra}",
                path.display()
            )
        })
        .await;
        Some(Self {
            node,
            fixture,
            cluster,
            manifests,
        })
    }

    /// The mirror pod's name for the manifest pod `name`, owned by the test for its clean-up.
    pub(crate) fn mirror_name(&self, name: &str) -> String {
        let mirror = format!("{name}-{}", self.node.name.to_lowercase());
        own(Owned::Pod {
            namespace: NAMESPACE.to_owned(),
            name: mirror.clone(),
        });
        mirror
    }

    pub(crate) fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.cluster.client.clone(), NAMESPACE)
    }

    /// Waits until the mirror pod `name` is gone from the API.
    pub(crate) async fn wait_mirror_deleted(&self, name: &str) {
        eventually_async("the mirror pod is deleted", || async {
            self.pods()
                .get_opt(name)
                .await
                .is_ok_and(|pod| pod.is_none())
        })
        .await;
    }

    /// Waits until the runtime holds nothing of the static pod `uid`.
    pub(crate) async fn wait_containers_gone(&self, uid: &str, what: &str) {
        eventually_async(what, || async {
            static_containers(&self.fixture, uid).await == 0
        })
        .await;
    }
}

/// Writes the manifest of pod `name` (one long-running busybox container saying `version` in
/// its environment) into `dir`, replacing it in one rename as an editor or kubeadm does.
pub(crate) fn write_manifest(dir: &Path, name: &str, version: &str) {
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {RUN_LABEL: run_id(), "app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "app", "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", UNTIL_TERM],
                "env": [{"name": "VERSION", "value": version}],
            }],
        },
    });
    write_pod(dir, name, &manifest);
}

/// Writes `manifest` as `<name>.yaml` into `dir` in one rename.
pub(crate) fn write_pod(dir: &Path, name: &str, manifest: &serde_json::Value) {
    let yaml = serde_yaml_ng::to_string(manifest).expect("yaml");
    let staged = dir.join(format!(".{name}.yaml.tmp"));
    std::fs::write(&staged, yaml).expect("the manifest is written");
    std::fs::rename(&staged, dir.join(format!("{name}.yaml"))).expect("the manifest is in place");
}

pub(crate) fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The mirror pod `name` once it is Running and Ready, not being deleted, and `check` holds.
pub(crate) async fn wait_mirror(
    setup: &StaticSetup,
    name: &str,
    what: &str,
    check: impl Fn(&Pod) -> bool,
) -> Pod {
    wait_pod(&setup.cluster.client, NAMESPACE, name, what, |pod| {
        pod.metadata.deletion_timestamp.is_none()
            && annotation(pod, MIRROR).is_some()
            && running_and_ready(pod)
            && check(pod)
    })
    .await
}

/// Whether the runtime runs container `id`.
pub(crate) async fn runs(fixture: &CriFixture, id: &str) -> bool {
    let filter = ContainerFilter {
        id: Some(id.to_owned()),
        state: Some(ContainerState::Running),
        ..ContainerFilter::default()
    };
    fixture
        .client
        .list_containers(filter)
        .await
        .is_ok_and(|found| !found.is_empty())
}

/// The containers the runtime holds for the static pod `uid` (its hash), in any state.
pub(crate) async fn static_containers(fixture: &CriFixture, uid: &str) -> usize {
    let filter = ContainerFilter {
        labels: [("io.kubernetes.pod.uid".to_owned(), uid.to_owned())].into(),
        ..ContainerFilter::default()
    };
    fixture
        .client
        .list_containers(filter)
        .await
        .expect("ListContainers")
        .len()
}

/// The sandboxes the runtime holds for the static pod `uid` (its hash), in any state.
pub(crate) async fn static_sandboxes(fixture: &CriFixture, hash: &str) -> usize {
    let filter = SandboxFilter {
        labels: [("io.kubernetes.pod.uid".to_owned(), hash.to_owned())].into(),
        ..SandboxFilter::default()
    };
    fixture
        .client
        .list_pod_sandboxes(filter)
        .await
        .expect("ListPodSandbox")
        .len()
}

#[actix_rt::test]
async fn a_manifest_runs_with_a_mirror_pod_that_follows_deletion_edits_and_removal() {
    let test = "a_manifest_runs_with_a_mirror_pod_that_follows_deletion_edits_and_removal";
    let Some(setup) = StaticSetup::start(test, "static").await else {
        return;
    };
    let node = &setup.node;
    node.guard(async {
        let mirror_name = setup.mirror_name("web");
        write_manifest(setup.manifests.path(), "web", "1");
        let first = wait_mirror(&setup, &mirror_name, "the mirror pod Running", |_| true).await;
        let hash = annotation(&first, HASH).expect("config.hash").to_owned();
        assert_eq!(
            annotation(&first, MIRROR),
            Some(hash.as_str()),
            "the mirror names its static pod"
        );
        assert_eq!(
            annotation(&first, "kubernetes.io/config.source"),
            Some("file")
        );
        assert!(annotation(&first, "kubernetes.io/config.seen").is_some());
        assert_eq!(hash.len(), 32, "a 128-bit hash: {hash}");
        assert_ne!(
            first.metadata.uid.as_deref(),
            Some(hash.as_str()),
            "the API gave it its own UID"
        );
        let node_uid = Api::<Node>::all(setup.cluster.client.clone())
            .get(&node.name)
            .await
            .expect("the Node")
            .metadata
            .uid;
        let owners = first.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1, "{owners:?}");
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].name.as_str()),
            ("Node", node.name.as_str())
        );
        assert_eq!(Some(owners[0].uid.clone()), node_uid);
        assert_eq!(owners[0].controller, Some(true));
        let spec = first.spec.clone().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some(node.name.as_str()));
        assert!(
            spec.tolerations
                .iter()
                .flatten()
                .any(|t| t.operator.as_deref() == Some("Exists")
                    && t.effect.as_deref() == Some("NoExecute")
                    && t.key.is_none()),
            "{:?}",
            spec.tolerations
        );
        let container = runtime_id(&app(&first));
        assert!(runs(&setup.fixture, &container).await);

        // A user deletes the mirror pod: it comes back, and the pod was never restarted.
        setup
            .pods()
            .delete(&mirror_name, &DeleteParams::default())
            .await
            .expect("the mirror pod is deleted");
        let first_uid = first.metadata.uid.clone();
        let back = wait_mirror(&setup, &mirror_name, "the mirror pod back", |pod| {
            pod.metadata.uid != first_uid && runtime_id(&app(pod)) == container
        })
        .await;
        assert_eq!(annotation(&back, MIRROR), Some(hash.as_str()));
        assert_eq!(app(&back).restart_count, 0);

        // An edited manifest: a new static pod, a new mirror, the old container gone.
        write_manifest(setup.manifests.path(), "web", "2");
        let edited = wait_mirror(
            &setup,
            &mirror_name,
            "the mirror pod of the edited manifest",
            |pod| annotation(pod, HASH).is_some_and(|new| new != hash),
        )
        .await;
        let new_hash = annotation(&edited, HASH).expect("config.hash").to_owned();
        assert_eq!(annotation(&edited, MIRROR), Some(new_hash.as_str()));
        assert_ne!(runtime_id(&app(&edited)), container);
        setup
            .wait_containers_gone(&hash, "the old static pod's containers are gone")
            .await;

        // A removed manifest: the pod stops and its mirror pod goes.
        std::fs::remove_file(setup.manifests.path().join("web.yaml")).expect("removed");
        setup.wait_mirror_deleted(&mirror_name).await;
        setup
            .wait_containers_gone(&new_hash, "the static pod's containers are gone")
            .await;
    })
    .await;
}

/// A running container of pod `name` that is not the static pod `old_uid`'s.
async fn replacement_container(fixture: &CriFixture, name: &str, old_uid: &str) -> Option<String> {
    let filter = ContainerFilter {
        state: Some(ContainerState::Running),
        labels: [("io.kubernetes.pod.name".to_owned(), name.to_owned())].into(),
        ..ContainerFilter::default()
    };
    let running = fixture.client.list_containers(filter).await.ok()?;
    running
        .into_iter()
        .find(|c| c.labels.get("io.kubernetes.pod.uid").map(String::as_str) != Some(old_uid))
        .map(|c| c.id)
}

#[actix_rt::test]
async fn a_static_pod_keeps_running_while_the_api_server_is_down_and_its_mirror_shows_it_after() {
    let test =
        "a_static_pod_keeps_running_while_the_api_server_is_down_and_its_mirror_shows_it_after";
    let Some(setup) = StaticSetup::start(test, "static-outage").await else {
        return;
    };
    if !needs_emulator(&setup.cluster, test) {
        return;
    }
    let node = &setup.node;
    node.guard(async {
        let mirror_name = setup.mirror_name("control");
        write_manifest(setup.manifests.path(), "control", "1");
        let before = wait_mirror(&setup, &mirror_name, "the mirror pod Running", |_| true).await;
        let container = runtime_id(&app(&before));
        let faults = setup.cluster.faults();
        faults
            .schedule_outage(Outage::abrupt(outage_length()))
            .expect("the outage starts");
        eventually_async("the API server is down", || async { faults.serving().down }).await;
        // A kubeadm upgrade while its API server restarts: the manifest changes, and the new
        // pod must start without the API.
        write_manifest(setup.manifests.path(), "control", "2");
        let old_hash = annotation(&before, HASH).expect("config.hash").to_owned();
        eventually_async(
            "the edited static pod runs while the API server is down",
            || async {
                replacement_container(&setup.fixture, &mirror_name, &old_hash)
                    .await
                    .is_some()
            },
        )
        .await;
        assert!(
            faults.serving().down,
            "the new static pod started only after the outage: raise NODEPULSE_OUTAGE_SECONDS"
        );
        let replacement = replacement_container(&setup.fixture, &mirror_name, &old_hash)
            .await
            .expect("the new container");
        assert!(
            !runs(&setup.fixture, &container).await,
            "the old pod was replaced"
        );
        faults.outage_over().await.expect("the API server is back");

        let after = wait_mirror(
            &setup,
            &mirror_name,
            "the mirror pod of the new manifest",
            |pod| {
                annotation(pod, HASH).is_some_and(|hash| hash != old_hash)
                    && runtime_id(&app(pod)) == replacement
            },
        )
        .await;
        assert_eq!(app(&after).restart_count, 0);
        assert!(runs(&setup.fixture, &replacement).await);

        std::fs::remove_file(setup.manifests.path().join("control.yaml")).expect("removed");
        setup.wait_mirror_deleted(&mirror_name).await;
    })
    .await;
}
