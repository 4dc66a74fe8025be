//! Pods' volumes on a simulated node, end to end through the volume manager against an API
//! server (the emulator, or unchanged a real cluster with NODEPULSE_TEST_KUBECONFIG): every
//! type's files byte for byte with their modes under `<rootDir>/pods/<uid>/volumes`, a
//! ConfigMap update reaching its file within one sync period, a missing ConfigMap giving the
//! kubelet's FailedMount event and the pod recovering by itself, the service-account volume
//! every pod is given set up with its token, CA and namespace, a deleted pod leaving nothing,
//! and the volume manager killed in every mode mid-mount, then the node restarted with its pods
//! running: nothing set up twice, nothing leaked.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use nodepulse_supervisor::{ChildState, KillMode, SupervisorHandle};
use nodepulse_testkit::{
    cluster::{TestCluster, unique_node_name},
    daemon::DaemonProcess,
    eventually, eventually_async, objects,
    pods::{create, phase, pod_manifest, running_and_ready, start_simulated_node, wait_running},
    root_dir::RootDir,
};
use serde_json::{Value, json};

const NAMESPACE: &str = "default";
/// Short enough for a test to see a ConfigMap change land; the kubelet's default is 1m.
const SYNC: &str = "syncFrequency: 2s\n";

/// Stops the node, so nothing sets a volume up again while the test's objects are deleted.
async fn stop(supervisor: SupervisorHandle) {
    assert!(
        supervisor.shutdown(Duration::from_secs(10)).await,
        "the node stops"
    );
}

/// A simulated node whose pods' volumes live under a fresh `rootDir`.
async fn volume_node(cluster: &TestCluster, prefix: &str) -> (SupervisorHandle, String, RootDir) {
    let node = unique_node_name(prefix);
    let root = RootDir::new();
    let supervisor =
        start_simulated_node(&cluster.kubeconfig, &node, &node_yaml(root.path())).await;
    (supervisor, node, root)
}

fn node_yaml(root: &Path) -> String {
    format!("rootDir: {}\n{SYNC}", root.display())
}

async fn create_config_map(cluster: &TestCluster, name: &str, body: Value) -> ConfigMap {
    objects::create_config_map(cluster, NAMESPACE, name, body).await
}

async fn create_secret(cluster: &TestCluster, name: &str, body: Value) -> Secret {
    objects::create_secret(cluster, NAMESPACE, name, body).await
}

/// A pod bound to `node` whose container mounts every volume in `volumes`.
fn pod_with_volumes(name: &str, node: &str, volumes: Value) -> Pod {
    let mounts: Vec<Value> = volumes
        .as_array()
        .expect("a list of volumes")
        .iter()
        .map(|v| json!({"name": v["name"], "mountPath": format!("/mnt/{}", v["name"].as_str().unwrap_or_default())}))
        .collect();
    pod_manifest(
        name,
        NAMESPACE,
        node,
        json!({"metadata": {"labels": {"tier": "web"}},
               "spec": {"volumes": volumes,
                        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                        "volumeMounts": mounts,
                                        "resources": {"limits": {"memory": "64Mi"}}}]}}),
    )
}

/// Replaces ConfigMap `name`'s data with `key: content`.
async fn set_key(cluster: &TestCluster, name: &str, content: &str) {
    let config_maps = Api::<ConfigMap>::namespaced(cluster.client.clone(), NAMESPACE);
    let mut updated = config_maps.get(name).await.expect("the ConfigMap");
    updated.data = Some([("key".to_owned(), content.to_owned())].into());
    config_maps
        .replace(name, &PostParams::default(), &updated)
        .await
        .expect("updated");
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().expect("a UID")
}

fn volume_dir(root: &Path, pod_uid: &str, plugin: &str, volume: &str) -> PathBuf {
    root.join("pods")
        .join(pod_uid)
        .join("volumes")
        .join(format!("kubernetes.io~{plugin}"))
        .join(volume)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// The hidden timestamped data directories of an atomic-writer volume.
fn data_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("..") && n != "..data")
                .collect()
        })
        .unwrap_or_default()
}

/// Whether this process can mount the tmpfs of secret and projected volumes (it needs root);
/// if not, the test's tmpfs checks are skipped visibly, and in CI the test fails.
fn tmpfs_mountable(test: &str) -> bool {
    let Some(why) = nodepulse::volume_plugins::host::probe_tmpfs() else {
        return true;
    };
    nodepulse_testkit::skip::missing(
        &format!("{test} (its tmpfs checks)"),
        &format!("a tmpfs mount: {why}"),
    );
    false
}

#[actix_rt::test]
async fn each_volume_type_is_written_byte_for_byte_with_its_modes() {
    let cluster = TestCluster::start().await;
    let (supervisor, node, root) = volume_node(&cluster, "vol-types").await;
    let (cm, secret) = (format!("{node}-cm"), format!("{node}-secret"));
    create_config_map(
        &cluster,
        &cm,
        json!({"data": {"app.conf": "listen 80\n", "other": "x"}, "binaryData": {"blob": "AAEC"}}),
    )
    .await;
    create_secret(
        &cluster,
        &secret,
        json!({"stringData": {"password": "s3cr3t"}}),
    )
    .await;
    let host_dir = root.path().join("host-data");
    let name = format!("{node}-pod");
    let pod = create(
        &cluster.client,
        &pod_with_volumes(
            &name,
            &node,
            json!([
                {"name": "cfg", "configMap": {"name": cm, "items": [{"key": "app.conf", "path": "conf/app.conf", "mode": 0o600}]}},
                {"name": "all", "configMap": {"name": cm}},
                {"name": "creds", "secret": {"secretName": secret, "defaultMode": 0o400}},
                {"name": "info", "downwardAPI": {"items": [
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels['tier']"}},
                    {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"}}]}},
                {"name": "proj", "projected": {"sources": [
                    {"configMap": {"name": cm, "items": [{"key": "other", "path": "other"}]}},
                    {"secret": {"name": secret}},
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                    {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "host", "hostPath": {"path": host_dir.display().to_string(), "type": "DirectoryOrCreate"}},
            ]),
        ),
    )
    .await;
    let pod_uid = uid(&pod);
    wait_running(&cluster.client, NAMESPACE, &name).await;
    let dir = |plugin: &str, volume: &str| volume_dir(root.path(), &pod_uid, plugin, volume);

    let cfg = dir("configmap", "cfg").join("conf/app.conf");
    assert_eq!(read(&cfg), b"listen 80\n");
    assert_eq!(mode(&cfg), 0o600);
    assert!(
        std::fs::symlink_metadata(dir("configmap", "cfg").join("conf"))
            .expect("conf")
            .is_symlink(),
        "user-visible names are links into ..data"
    );
    let all = dir("configmap", "all");
    assert_eq!(read(&all.join("blob")), [0, 1, 2]);
    assert_eq!(read(&all.join("other")), b"x");
    assert_eq!(mode(&all.join("app.conf")), 0o644, "the default mode");
    assert_eq!(read(&dir("secret", "creds").join("password")), b"s3cr3t");
    assert_eq!(mode(&dir("secret", "creds").join("password")), 0o400);
    let info = dir("downward-api", "info");
    assert_eq!(read(&info.join("name")), name.as_bytes());
    assert_eq!(read(&info.join("labels")), b"web");
    assert_eq!(read(&info.join("mem")), b"64");
    let proj = dir("projected", "proj");
    assert_eq!(read(&proj.join("other")), b"x");
    assert_eq!(read(&proj.join("password")), b"s3cr3t");
    assert_eq!(read(&proj.join("ns")), NAMESPACE.as_bytes());
    let token = String::from_utf8(read(&proj.join("token"))).expect("a text token");
    assert_eq!(
        token.split('.').count(),
        3,
        "a JWT from TokenRequest: {token}"
    );
    let scratch = dir("empty-dir", "scratch");
    assert_eq!(mode(&scratch), 0o777);
    assert!(host_dir.is_dir(), "DirectoryOrCreate made the host path");
    assert!(
        !root
            .path()
            .join("pods")
            .join(&pod_uid)
            .join("volumes/kubernetes.io~host-path")
            .exists(),
        "hostPath mounts nothing under the pod"
    );
    if tmpfs_mountable("each_volume_type_is_written_byte_for_byte_with_its_modes") {
        let tmpfs = |dir: PathBuf| {
            nodepulse::volume_plugins::mount::is_tmpfs_mount_point(&dir).expect("stat the volume")
        };
        assert!(
            tmpfs(dir("secret", "creds")),
            "a secret is on a tmpfs, as the kubelet does"
        );
        assert!(tmpfs(dir("projected", "proj")));
        assert!(!tmpfs(dir("configmap", "all")), "a configMap is on disk");
    }
    stop(supervisor).await;
}

/// The volume kube-apiserver's ServiceAccount admission gives every pod (`kube-api-access-*`,
/// mounted in every container): a bound token, the cluster CA from the namespace's
/// `kube-root-ca.crt` ConfigMap and the namespace, files of mode 0644 on a tmpfs.
#[actix_rt::test]
async fn the_service_account_volume_every_pod_gets_holds_a_token_the_cluster_ca_and_its_namespace()
{
    let cluster = TestCluster::start().await;
    let (supervisor, node, root) = volume_node(&cluster, "vol-sa").await;
    let name = format!("{node}-pod");
    let pod = create(&cluster.client, &pod_with_volumes(&name, &node, json!([]))).await;
    let spec = pod.spec.clone().expect("a spec");
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .unwrap_or_else(|| panic!("the admitted pod has the API access volume: {spec:?}"))
        .name
        .clone();
    wait_running(&cluster.client, NAMESPACE, &name).await;
    let dir = volume_dir(root.path(), &uid(&pod), "projected", &volume);
    let root_ca = Api::<ConfigMap>::namespaced(cluster.client.clone(), NAMESPACE)
        .get("kube-root-ca.crt")
        .await
        .expect("the namespace's root CA ConfigMap");
    let ca = root_ca
        .data
        .as_ref()
        .and_then(|data| data.get("ca.crt"))
        .expect("ca.crt");
    assert_eq!(read(&dir.join("ca.crt")), ca.as_bytes());
    assert_eq!(read(&dir.join("namespace")), NAMESPACE.as_bytes());
    let token = String::from_utf8(read(&dir.join("token"))).expect("a text token");
    assert_eq!(
        token.split('.').count(),
        3,
        "a JWT from TokenRequest: {token}"
    );
    for file in ["ca.crt", "namespace", "token"] {
        assert_eq!(mode(&dir.join(file)), 0o644, "{file}: defaultMode 420");
    }
    if nodepulse::volume_plugins::host::probe_tmpfs().is_none() {
        assert!(
            nodepulse::volume_plugins::mount::is_tmpfs_mount_point(&dir).expect("stat the volume"),
            "a token volume is on a tmpfs"
        );
    }
    stop(supervisor).await;
}

#[actix_rt::test]
async fn a_config_map_update_reaches_the_file_within_one_sync_period() {
    let cluster = TestCluster::start().await;
    let (supervisor, node, root) = volume_node(&cluster, "vol-update").await;
    let cm = format!("{node}-cm");
    create_config_map(&cluster, &cm, json!({"data": {"key": "one"}})).await;
    let name = format!("{node}-pod");
    let pod = create(
        &cluster.client,
        &pod_with_volumes(
            &name,
            &node,
            json!([{"name": "cfg", "configMap": {"name": cm}}]),
        ),
    )
    .await;
    wait_running(&cluster.client, NAMESPACE, &name).await;
    let file = volume_dir(root.path(), &uid(&pod), "configmap", "cfg").join("key");
    assert_eq!(read(&file), b"one");
    set_key(&cluster, &cm, "two").await;
    let changed = Instant::now();
    eventually("the new content reaches the file", || {
        std::fs::read(&file).is_ok_and(|bytes| bytes == b"two")
    })
    .await;
    eprintln!(
        "a ConfigMap change reached its file after {:?} (syncFrequency 2s)",
        changed.elapsed()
    );
    // The atomic writer removes the old data directory just after swapping `..data`, which is
    // when the new content became visible: poll rather than race it.
    eventually("the old data directory is gone", || {
        data_dirs(file.parent().expect("the volume")).len() == 1
    })
    .await;
    stop(supervisor).await;
}

/// The kubelet's `Watch` strategy: a pod's ConfigMaps (its own and the service-account
/// volume's `kube-root-ca.crt`) are listed and watched once, so the remount every sync period
/// reads no object again, and a change still reaches the file through the watch. Counted by the
/// daemon's own `/metrics` (a process of its own), so it holds on a real cluster too.
#[actix_rt::test]
async fn a_config_map_is_watched_so_remounts_cost_no_request() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("vol-watch");
    let root = RootDir::new();
    let yaml = format!("runtime: simulated\n{}", node_yaml(root.path()));
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let cm = format!("{node}-cm");
    create_config_map(&cluster, &cm, json!({"data": {"key": "one"}})).await;
    let name = format!("{node}-pod");
    let pod = create(
        &cluster.client,
        &pod_with_volumes(
            &name,
            &node,
            json!([{"name": "cfg", "configMap": {"name": cm}}]),
        ),
    )
    .await;
    wait_running(&cluster.client, NAMESPACE, &name).await;
    let file = volume_dir(root.path(), &uid(&pod), "configmap", "cfg").join("key");
    assert_eq!(read(&file), b"one");
    // Two changes, each landing only through a remount after it (syncFrequency 2s).
    for content in ["two", "three"] {
        set_key(&cluster, &cm, content).await;
        eventually("the new content reaches the file", || {
            std::fs::read(&file).is_ok_and(|bytes| bytes == content.as_bytes())
        })
        .await;
    }
    assert_eq!(
        daemon.api_requests("get", "configmaps").await,
        0.0,
        "a ConfigMap was read with a GET (remounts read the watch)"
    );
    assert!(
        daemon.api_requests("list", "configmaps").await >= 2.0,
        "the pod's ConfigMap and kube-root-ca.crt were each listed for their watch"
    );
    drop(daemon);
}

#[actix_rt::test]
async fn a_missing_config_map_gives_failed_mount_and_the_pod_recovers_when_it_appears() {
    let cluster = TestCluster::start().await;
    let (supervisor, node, root) = volume_node(&cluster, "vol-missing").await;
    let cm = format!("{node}-late");
    let name = format!("{node}-pod");
    let pod = create(
        &cluster.client,
        &pod_with_volumes(
            &name,
            &node,
            json!([{"name": "cfg", "configMap": {"name": cm}}]),
        ),
    )
    .await;
    let wanted =
        format!("MountVolume.SetUp failed for volume \"cfg\" : configmap \"{cm}\" not found");
    objects::wait_pod_event(&cluster, &pod, "Warning", "FailedMount", |message| {
        message == wanted
    })
    .await;
    let waiting = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
        .get(&name)
        .await
        .expect("the pod");
    assert_ne!(
        phase(&waiting),
        Some("Running"),
        "no container starts before its volumes"
    );
    let reason = waiting
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.clone());
    if reason.is_some() {
        assert_eq!(reason.as_deref(), Some("ContainerCreating"));
    }
    create_config_map(&cluster, &cm, json!({"data": {"key": "here"}})).await;
    wait_running(&cluster.client, NAMESPACE, &name).await;
    let file = volume_dir(root.path(), &uid(&pod), "configmap", "cfg").join("key");
    assert_eq!(read(&file), b"here");
    stop(supervisor).await;
}

#[actix_rt::test]
async fn a_deleted_pod_leaves_nothing_and_another_pods_volumes_stay() {
    let cluster = TestCluster::start().await;
    let (supervisor, node, root) = volume_node(&cluster, "vol-delete").await;
    let cm = format!("{node}-cm");
    create_config_map(&cluster, &cm, json!({"data": {"key": "v"}})).await;
    let volumes = json!([
        {"name": "cfg", "configMap": {"name": cm}},
        {"name": "scratch", "emptyDir": {}},
    ]);
    let (gone, stays) = (format!("{node}-gone"), format!("{node}-stays"));
    let gone_pod = create(
        &cluster.client,
        &pod_with_volumes(&gone, &node, volumes.clone()),
    )
    .await;
    let stays_pod = create(&cluster.client, &pod_with_volumes(&stays, &node, volumes)).await;
    wait_running(&cluster.client, NAMESPACE, &gone).await;
    wait_running(&cluster.client, NAMESPACE, &stays).await;
    let gone_dir = root.path().join("pods").join(uid(&gone_pod));
    let kept = volume_dir(root.path(), &uid(&stays_pod), "empty-dir", "scratch").join("work");
    std::fs::write(
        volume_dir(root.path(), &uid(&gone_pod), "empty-dir", "scratch").join("work"),
        b"data",
    )
    .expect("a container's file");
    std::fs::write(&kept, b"kept").expect("another pod's file");
    Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE)
        .delete(&gone, &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("the deleted pod's directory is gone", || !gone_dir.exists()).await;
    assert_eq!(read(&kept), b"kept", "the other pod's volume is untouched");
    assert_eq!(
        read(&volume_dir(root.path(), &uid(&stays_pod), "configmap", "cfg").join("key")),
        b"v"
    );
    stop(supervisor).await;
}

#[actix_rt::test]
async fn the_volume_manager_killed_mid_mount_and_the_node_restarted_set_up_nothing_twice() {
    let cluster = TestCluster::start().await;
    let (supervisor, node, root) = volume_node(&cluster, "vol-kill").await;
    let cm = format!("{node}-cm");
    create_config_map(&cluster, &cm, json!({"data": {"key": "v"}})).await;
    let secret = format!("{node}-secret");
    create_secret(&cluster, &secret, json!({"stringData": {"password": "p"}})).await;
    let tmpfs = tmpfs_mountable(
        "the_volume_manager_killed_mid_mount_and_the_node_restarted_set_up_nothing_twice",
    );
    let mut names = Vec::new();
    for (round, mode) in [KillMode::Stop, KillMode::Panic, KillMode::Hang]
        .into_iter()
        .enumerate()
    {
        let batch: Vec<String> = (0..4).map(|i| format!("{node}-{round}-{i}")).collect();
        for name in &batch {
            create(
                &cluster.client,
                &pod_with_volumes(
                    name,
                    &node,
                    json!([
                        {"name": "cfg", "configMap": {"name": cm}},
                        {"name": "creds", "secret": {"secretName": secret}},
                        {"name": "scratch", "emptyDir": {}},
                    ]),
                ),
            )
            .await;
        }
        let before = supervisor
            .actor("volume-manager")
            .expect("the volume manager")
            .restarts;
        supervisor
            .kill("volume-manager", mode)
            .await
            .expect("the kill is accepted");
        eventually("the volume manager runs again", || {
            supervisor.actor("volume-manager").is_some_and(|snapshot| {
                snapshot.restarts > before && snapshot.state == ChildState::Running
            })
        })
        .await;
        names.extend(batch);
    }
    let mut uids = Vec::new();
    for name in &names {
        uids.push(uid(&wait_running(&cluster.client, NAMESPACE, name).await));
    }
    let check = |root: &Path| {
        for pod_uid in &uids {
            let cfg = volume_dir(root, pod_uid, "configmap", "cfg");
            assert_eq!(read(&cfg.join("key")), b"v");
            assert_eq!(
                data_dirs(&cfg),
                vec![data_dirs(&cfg)[0].clone()],
                "one data directory"
            );
            assert!(!cfg.join("..data_tmp").exists(), "no half-swapped link");
            let creds = volume_dir(root, pod_uid, "secret", "creds");
            assert_eq!(read(&creds.join("password")), b"p");
            if tmpfs {
                assert_eq!(
                    nodepulse::volume_plugins::mount::mount_count(&creds).expect("the mount table"),
                    1,
                    "one tmpfs, never a second stacked on it: {}",
                    creds.display()
                );
            }
        }
        let pods: Vec<String> = std::fs::read_dir(root.join("pods"))
            .expect("pods dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            pods.len(),
            uids.len(),
            "one directory per pod, none leaked: {pods:?}"
        );
    };
    check(root.path());
    let before: Vec<Vec<String>> = uids
        .iter()
        .map(|u| data_dirs(&volume_dir(root.path(), u, "configmap", "cfg")))
        .collect();

    // The whole node restarted with its pods running: the disk is read back, SetUp runs again
    // and finds every file as it was.
    assert!(
        supervisor.shutdown(Duration::from_secs(10)).await,
        "the node stops"
    );
    drop(supervisor);
    let restarted = start_simulated_node(&cluster.kubeconfig, &node, &node_yaml(root.path())).await;
    eventually_async(
        "the restarted volume manager has set up every volume again",
        || async {
            restarted
                .actor_state("volume-manager", Duration::from_secs(5))
                .await
                .is_ok_and(|state| all_mounted(&state, uids.len()))
        },
    )
    .await;
    check(root.path());
    let after: Vec<Vec<String>> = uids
        .iter()
        .map(|u| data_dirs(&volume_dir(root.path(), u, "configmap", "cfg")))
        .collect();
    assert_eq!(before, after, "unchanged content is not written again");
    for name in &names {
        assert!(running_and_ready(
            &wait_running(&cluster.client, NAMESPACE, name).await
        ));
    }
    stop(restarted).await;
}

/// Whether the volume manager's debug state shows `pods` pods with every volume mounted.
fn all_mounted(state: &Value, pods: usize) -> bool {
    let Some(all) = state["pods"].as_object() else {
        return false;
    };
    let mounted = all
        .values()
        .filter(|pod| {
            pod["desired"].as_object().is_some_and(|volumes| {
                !volumes.is_empty() && volumes.values().all(|v| v["state"] == "mounted")
            })
        })
        .count();
    mounted == pods
}

#[actix_rt::test]
async fn the_daemon_killed_mid_mount_and_restarted_shows_every_volume_once_in_debug_volumes() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("vol-daemon");
    let root = RootDir::new();
    let yaml = format!(
        "runtime: simulated\nrootDir: {}\n{SYNC}podCIDR: 10.125.0.0/16\nevictionHard:\n  memory.available: 1Mi\ndebug:\n  address: 127.0.0.1:0\n",
        root.path().display()
    );
    let mut daemon =
        nodepulse_testkit::daemon::DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let cm = format!("{node}-cm");
    create_config_map(&cluster, &cm, json!({"data": {"key": "v"}})).await;
    let names: Vec<String> = (0..5).map(|i| format!("{node}-{i}")).collect();
    for name in &names {
        create(
            &cluster.client,
            &pod_with_volumes(
                name,
                &node,
                json!([{"name": "cfg", "configMap": {"name": cm}}]),
            ),
        )
        .await;
    }
    // Killed while it sets the volumes up (SIGKILL: no drain, nothing finished on purpose).
    daemon.signal("KILL");
    daemon.wait_exit(Duration::from_secs(10)).await;
    let daemon =
        nodepulse_testkit::daemon::DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    let mut uids = Vec::new();
    for name in &names {
        uids.push(uid(&wait_running(&cluster.client, NAMESPACE, name).await));
    }
    eventually_async(
        "/debug/volumes shows every pod's volume mounted",
        || async {
            let (status, state) = daemon.get("/debug/volumes").await;
            status.is_success() && all_mounted(&state, names.len())
        },
    )
    .await;
    for pod_uid in &uids {
        let cfg = volume_dir(root.path(), pod_uid, "configmap", "cfg");
        assert_eq!(read(&cfg.join("key")), b"v");
        assert_eq!(
            data_dirs(&cfg).len(),
            1,
            "one data directory in {}",
            cfg.display()
        );
    }
    let (_, node_view) = daemon.get("/debug/node").await;
    assert_eq!(
        node_view["volumes"]["volumesInUse"]["reported"], true,
        "the reconciler synced, so volumesInUse is reported: {}",
        node_view["volumes"]
    );
}

#[actix_rt::test]
async fn fleet_pods_with_volumes_write_under_each_nodes_own_root_dir() {
    use nodepulse::{
        apiserver_client::KubeApi,
        config::{self, Config, Settings, Source},
        fleet::{Fleet, FleetOptions, node_root_dir},
    };
    let cluster = TestCluster::start().await;
    let base = unique_node_name("vol-fleet");
    let root = RootDir::new();
    let yaml = format!(
        "{}rootDir: {}\n",
        nodepulse_testkit::pods::SIMULATED_FLEET,
        root.path().display()
    );
    let mut config = Config::parse(&yaml, Source::Embedded).expect("a fleet configuration");
    config.nodes = config::with_generated(&[], &base, 3).expect("three nodes");
    config.node_labels.insert(
        nodepulse_testkit::cleanup::RUN_LABEL.to_owned(),
        nodepulse_testkit::cleanup::run_id().to_owned(),
    );
    for node in &config.nodes {
        nodepulse_testkit::cleanup::own_node(&node.name);
    }
    let names: Vec<String> = config.nodes.iter().map(|n| n.name.clone()).collect();
    let settings = Settings {
        config,
        node_name: base.clone(),
        kubeconfig: Some(cluster.kubeconfig.clone()),
        standalone: false,
        bootstrap: None,
    };
    let api = KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config)
        .await
        .expect("connects");
    let fleet = Fleet::start(&settings, api, &FleetOptions { arbiters: 2 });
    let cm = format!("{base}-cm");
    create_config_map(&cluster, &cm, json!({"data": {"key": "fleet"}})).await;
    let mut placed = Vec::new();
    for node in &names[..2] {
        let name = format!("{node}-pod");
        let pod = create(
            &cluster.client,
            &pod_with_volumes(
                &name,
                node,
                json!([{"name": "cfg", "configMap": {"name": cm}}]),
            ),
        )
        .await;
        placed.push((node.clone(), name, uid(&pod)));
    }
    for (node, name, pod_uid) in &placed {
        wait_running(&cluster.client, NAMESPACE, name).await;
        let own_root = node_root_dir(root.path(), node);
        let file = volume_dir(&own_root, pod_uid, "configmap", "cfg").join("key");
        assert_eq!(read(&file), b"fleet", "{node}'s pod under its own rootDir");
        for (other, _, _) in placed.iter().filter(|(other, _, _)| other != node) {
            let elsewhere = node_root_dir(root.path(), other).join("pods").join(pod_uid);
            assert!(
                !elsewhere.exists(),
                "{node}'s pod is not under {other}'s rootDir"
            );
        }
    }
    assert!(
        !root.path().join("pods").exists(),
        "no node of a fleet writes to the shared rootDir itself"
    );
    assert!(
        fleet.shutdown(Duration::from_secs(10)).await,
        "the fleet stops"
    );
}
