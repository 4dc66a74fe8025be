//! What a pod's spec promises, on a real `runtime: cri` node (containerd), against an API server
//! (the emulator, or a real cluster), as the kubelet keeps it: `runAsNonRoot` refuses an
//! explicit root user and an image that runs as root or as a name, with the kubelet's
//! `CreateContainerConfigError` texts and Warning, and lets an image's non-root uid run; a pod
//! past its `activeDeadlineSeconds` (given at creation, or lowered while it runs) ends Failed
//! with `DeadlineExceeded`, its containers stopped; a pod's configMap, secret, projected and
//! emptyDir volumes are given to its `fsGroup` and read through it by a non-root user; a
//! container is ready as soon as its startup probe succeeds; it gets the service-link variables
//! of its namespace's Services (unless `enableServiceLinks: false`) and of `kubernetes`; an
//! ephemeral container added to a running pod starts, is reported and is never restarted; a
//! container sees another's processes only under `shareProcessNamespace` or as an ephemeral
//! container whose `targetContainerName` names it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use nodepulse_actors::ports::{ContainerFilter, ContainerRuntime, ContainerState};
use serde_json::{Value, json};

use crate::cri_pods::{Setup, UNTIL_TERM, app, create_pod, runtime_id, shell, spec, wait_phase};
use nodepulse_testkit::{
    cleanup::{Owned, own},
    cluster::TestCluster,
    cri_fixture::CriFixture,
    cri_node::CriNode,
    objects::{create_config_map, create_secret, wait_pod_event},
    oci_image::{BUSYBOX_IMAGE, NAMED_USER_IMAGE, NON_ROOT_IMAGE},
    pods::{create, pod_manifest, wait_pod, wait_running},
};

const NAMESPACE: &str = "default";

fn waiting(pod: &Pod) -> (Option<String>, String) {
    let waiting = app(pod).state.and_then(|state| state.waiting);
    (
        waiting.as_ref().and_then(|w| w.reason.clone()),
        waiting.and_then(|w| w.message).unwrap_or_default(),
    )
}

/// `id -u` of `image`, written where the pod's status shows it.
fn id_container(image: &str, security_context: Value) -> Value {
    json!({
        "name": "app",
        "image": image,
        "command": ["/bin/sh", "-c", "id -u > /dev/termination-log"],
        "securityContext": security_context,
    })
}

#[actix_rt::test]
async fn run_as_non_root_refuses_root_and_unverifiable_users_with_the_kubelets_texts() {
    let Some(setup) = Setup::start(
        "run_as_non_root_refuses_root_and_unverifiable_users_with_the_kubelets_texts",
        "cri-nonroot",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let non_root = json!({"runAsNonRoot": true});
        let refused = [
            (
                "explicit-root",
                id_container(NON_ROOT_IMAGE, json!({"runAsNonRoot": true, "runAsUser": 0})),
                "container's runAsUser breaks non-root policy",
            ),
            (
                "implicit-root",
                id_container(BUSYBOX_IMAGE, non_root.clone()),
                "container has runAsNonRoot and image will run as root",
            ),
            (
                "named-user",
                id_container(NAMED_USER_IMAGE, non_root.clone()),
                "container has runAsNonRoot and image has non-numeric user (robot), cannot verify user is non-root",
            ),
        ];
        let allowed = format!("{}-image-uid", node.name);
        create_pod(cluster, &node.name, &allowed, spec("Never", json!([id_container(NON_ROOT_IMAGE, non_root)]))).await;
        for (suffix, container, _) in &refused {
            let name = format!("{}-{suffix}", node.name);
            let manifest = pod_manifest(&name, NAMESPACE, &node.name, spec("Never", json!([container])));
            create(&cluster.client, &manifest).await;
        }
        for (suffix, _, text) in &refused {
            let name = format!("{}-{suffix}", node.name);
            let pod = wait_pod(&cluster.client, NAMESPACE, &name, "CreateContainerConfigError", |pod| {
                waiting(pod).0.as_deref() == Some("CreateContainerConfigError")
            })
            .await;
            let expected = format!(
                "{text} (pod: \"{name}_{NAMESPACE}({})\", container: app)",
                pod.metadata.uid.as_deref().unwrap_or_default()
            );
            assert_eq!(waiting(&pod).1, expected);
            wait_pod_event(cluster, &pod, "Warning", "Failed", |message| {
                message == format!("Error: {expected}")
            })
            .await;
        }
        let pod = wait_phase(cluster, &allowed, "Succeeded").await;
        let terminated = app(&pod).state.and_then(|s| s.terminated).expect("terminated");
        assert_eq!(terminated.message.as_deref().map(str::trim), Some("1234"));
    })
    .await;
}

/// Waits until pod `name` ended Failed for its active deadline, its container stopped.
async fn wait_deadline_exceeded(setup: &Setup, name: &str) {
    let pod = wait_pod(
        &setup.cluster.client,
        NAMESPACE,
        name,
        "DeadlineExceeded",
        |pod| {
            let status = pod.status.clone().unwrap_or_default();
            status.phase.as_deref() == Some("Failed")
                && app(pod).state.is_some_and(|s| s.terminated.is_some())
        },
    )
    .await;
    let status = pod.status.clone().expect("a status");
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    wait_pod_event(
        &setup.cluster,
        &pod,
        "Normal",
        "DeadlineExceeded",
        |message| message == "Pod was active on the node longer than the specified deadline",
    )
    .await;
    let running = ContainerFilter {
        state: Some(ContainerState::Running),
        labels: [(
            "io.kubernetes.pod.uid".to_owned(),
            pod.metadata.uid.clone().expect("a uid"),
        )]
        .into(),
        ..ContainerFilter::default()
    };
    let left = setup
        .fixture
        .client
        .list_containers(running)
        .await
        .expect("ListContainers");
    assert!(
        left.is_empty(),
        "nothing of the pod is left running: {left:?}"
    );
}

#[actix_rt::test]
async fn a_pod_past_its_active_deadline_fails_also_when_the_deadline_is_lowered() {
    let Some(setup) = Setup::start(
        "a_pod_past_its_active_deadline_fails_also_when_the_deadline_is_lowered",
        "cri-deadline",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let lowered = format!("{}-lowered", node.name);
        let timed = format!("{}-timed", node.name);
        for (name, deadline) in [(&lowered, 3600), (&timed, 6)] {
            let mut manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
            manifest["spec"]["activeDeadlineSeconds"] = json!(deadline);
            // A SIGTERM before the shell's trap is set is ignored: the kill ends in seconds.
            manifest["spec"]["terminationGracePeriodSeconds"] = json!(1);
            create(
                &cluster.client,
                &pod_manifest(name, NAMESPACE, &node.name, manifest),
            )
            .await;
        }
        wait_running(&cluster.client, NAMESPACE, &lowered).await;
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let lower = json!({"spec": {"activeDeadlineSeconds": 1}});
        pods.patch(&lowered, &PatchParams::default(), &Patch::Strategic(lower))
            .await
            .expect("the deadline is lowered");
        // The lowered one ends on its update; the other when its deadline comes, unprompted.
        wait_deadline_exceeded(&setup, &lowered).await;
        wait_deadline_exceeded(&setup, &timed).await;
    })
    .await;
}

/// What the fsGroup pod prints: each file's content, octal mode and group, the emptyDir's,
/// the group of a file it makes there, and its own groups.
const OWNERSHIP_SCRIPT: &str = "set -e; exec > /dev/termination-log 2>&1; \
    for f in /cm/data-1 /secret/data-1 /projected/cm-data /projected/secret-data; do \
      echo \"$(cat $f) $(stat -L -c '%n %a %g' $f)\"; done; \
    stat -c '%n %a %g' /scratch; touch /scratch/made; stat -c '%n %g' /scratch/made; \
    echo \"groups $(id -G)\"";

#[actix_rt::test]
async fn a_pods_volumes_are_given_to_its_fs_group_and_readable_as_non_root() {
    let Some(setup) = Setup::start(
        "a_pods_volumes_are_given_to_its_fs_group_and_readable_as_non_root",
        "cri-fsgroup",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-fsgroup", node.name);
        create_config_map(cluster, NAMESPACE, &name, json!({"data": {"data-1": "value-1"}})).await;
        create_secret(cluster, NAMESPACE, &name, json!({"stringData": {"data-1": "secret-1"}})).await;
        let mut container = shell("app", OWNERSHIP_SCRIPT);
        container["volumeMounts"] = json!([
            {"name": "cm", "mountPath": "/cm"},
            {"name": "secret", "mountPath": "/secret"},
            {"name": "projected", "mountPath": "/projected"},
            {"name": "scratch", "mountPath": "/scratch"},
        ]);
        let mut manifest = spec("Never", json!([container]));
        // As the e2e specs: not the files' owner nor in root's group, readable through the
        // fsGroup alone (0440).
        manifest["spec"]["securityContext"] =
            json!({"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 1001, "supplementalGroups": [2002]});
        manifest["spec"]["volumes"] = json!([
            {"name": "cm", "configMap": {"name": name, "defaultMode": 0o440}},
            {"name": "secret", "secret": {"secretName": name, "defaultMode": 0o440}},
            {"name": "projected", "projected": {"defaultMode": 0o440, "sources": [
                {"configMap": {"name": name, "items": [{"key": "data-1", "path": "cm-data"}]}},
                {"secret": {"name": name, "items": [{"key": "data-1", "path": "secret-data"}]}},
            ]}},
            {"name": "scratch", "emptyDir": {}},
        ]);
        create_pod(cluster, &node.name, &name, manifest).await;
        let pod = wait_pod(&cluster.client, NAMESPACE, &name, "ended", |pod| {
            matches!(nodepulse_testkit::pods::phase(pod), Some("Succeeded" | "Failed"))
        })
        .await;
        let terminated = app(&pod).state.and_then(|s| s.terminated).expect("terminated");
        let output = terminated.message.unwrap_or_default();
        assert_eq!(
            (nodepulse_testkit::pods::phase(&pod), terminated.exit_code),
            (Some("Succeeded"), 0),
            "{output}"
        );
        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(
            lines,
            [
                "value-1 /cm/data-1 440 1001",
                "secret-1 /secret/data-1 440 1001",
                "value-1 /projected/cm-data 440 1001",
                "secret-1 /projected/secret-data 440 1001",
                "/scratch 2777 1001",
                "/scratch/made 1001",
                "groups 3000 1001 2002",
            ],
            "{output}"
        );
    })
    .await;
}

#[actix_rt::test]
async fn a_container_is_ready_as_soon_as_its_startup_probe_succeeds() {
    let Some(setup) = Setup::start(
        "a_container_is_ready_as_soon_as_its_startup_probe_succeeds",
        "cri-ready-startup",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-startup", node.name);
        let script = format!("echo ok > /tmp/health; sleep 3; echo ok > /tmp/startup; {UNTIL_TERM}");
        let mut container = shell("app", &script);
        container["startupProbe"] =
            json!({"exec": {"command": ["cat", "/tmp/startup"]}, "periodSeconds": 1, "failureThreshold": 120});
        // Its own period would make it wait up to an hour: only the startup success runs it.
        container["readinessProbe"] =
            json!({"exec": {"command": ["cat", "/tmp/health"]}, "periodSeconds": 3600});
        create_pod(cluster, &node.name, &name, spec("Always", json!([container]))).await;
        wait_pod(&cluster.client, NAMESPACE, &name, "started", |pod| app(pod).started == Some(true)).await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
    })
    .await;
}

#[actix_rt::test]
async fn a_container_gets_its_namespaces_services_and_the_kubernetes_one_as_variables() {
    let test = "a_container_gets_its_namespaces_services_and_the_kubernetes_one_as_variables";
    let Some(()) = CriFixture::required(test) else {
        return;
    };
    // The Service exists before the node starts: its watch lists it before any container
    // starts, instead of racing the pod's start.
    let cluster = TestCluster::start().await;
    let service = format!("svc-env-{}", std::process::id());
    own(Owned::Object {
        path: format!("/api/v1/namespaces/{NAMESPACE}/services/{service}"),
    });
    let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
    let body = json!({"metadata": {"name": service}, "spec": {"ports": [
        {"name": "sql", "port": 5432},
        {"name": "stats", "port": 9100, "protocol": "UDP"},
    ]}});
    let created = services
        .create(
            &PostParams::default(),
            &serde_json::from_value(body).expect("a Service"),
        )
        .await
        .expect("the Service is created");
    let ip = created
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");
    let fixture = CriFixture::start("cri-svc-env").await;
    let node = CriNode::start(&cluster.kubeconfig, &fixture, "cri-svc-env").await;
    let setup = Setup {
        node,
        fixture,
        cluster,
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let kubernetes = services.get("kubernetes").await.expect("the kubernetes Service");
        let master_ip = kubernetes.spec.and_then(|s| s.cluster_ip).expect("its cluster IP");
        let prefix = service.replace('-', "_").to_uppercase();
        // Printed by a command run in the container (ExecSync runs with its environment).
        let script = format!(
            "for v in {prefix}_SERVICE_HOST {prefix}_SERVICE_PORT \
             {prefix}_SERVICE_PORT_STATS {prefix}_PORT {prefix}_PORT_9100_UDP \
             {prefix}_PORT_9100_UDP_PROTO {prefix}_PORT_5432_TCP_ADDR KUBERNETES_SERVICE_HOST \
             KUBERNETES_PORT; do eval echo \"$v=\\${{$v:-unset}}\"; done"
        );
        for (suffix, links) in [("links", true), ("no-links", false)] {
            let mut manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
            manifest["spec"]["enableServiceLinks"] = json!(links);
            let name = format!("{}-{suffix}", node.name);
            create_pod(cluster, &node.name, &name, manifest).await;
        }
        let fixture = &setup.fixture;
        let printed = |suffix: &'static str| {
            let script = script.clone();
            async move {
                let name = format!("{}-{suffix}", node.name);
                let pod = wait_running(&cluster.client, NAMESPACE, &name).await;
                let output = fixture
                    .client
                    .exec_sync(
                        runtime_id(&app(&pod)),
                        vec!["/bin/sh".into(), "-c".into(), script],
                        Duration::from_secs(10),
                    )
                    .await
                    .expect("ExecSync");
                String::from_utf8_lossy(&output.stdout).into_owned()
            }
        };
        let master = format!("KUBERNETES_SERVICE_HOST={master_ip}\nKUBERNETES_PORT=tcp://{master_ip}:443\n");
        assert_eq!(
            printed("links").await,
            format!(
                "{prefix}_SERVICE_HOST={ip}\n{prefix}_SERVICE_PORT=5432\n{prefix}_SERVICE_PORT_STATS=9100\n\
                 {prefix}_PORT=tcp://{ip}:5432\n{prefix}_PORT_9100_UDP=udp://{ip}:9100\n\
                 {prefix}_PORT_9100_UDP_PROTO=udp\n{prefix}_PORT_5432_TCP_ADDR={ip}\n{master}"
            )
        );
        assert_eq!(
            printed("no-links").await,
            format!(
                "{prefix}_SERVICE_HOST=unset\n{prefix}_SERVICE_PORT=unset\n{prefix}_SERVICE_PORT_STATS=unset\n\
                 {prefix}_PORT=unset\n{prefix}_PORT_9100_UDP=unset\n{prefix}_PORT_9100_UDP_PROTO=unset\n\
                 {prefix}_PORT_5432_TCP_ADDR=unset\n{master}"
            )
        );
    })
    .await;
}

/// The status of ephemeral container `name`, if the pod reports one.
fn ephemeral_status(pod: &Pod, name: &str) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .ephemeral_container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == name)
        .cloned()
}

#[actix_rt::test]
async fn an_ephemeral_container_starts_when_added_to_a_running_pod_and_is_never_restarted() {
    let Some(setup) = Setup::start(
        "an_ephemeral_container_starts_when_added_to_a_running_pod_and_is_never_restarted",
        "cri-ephemeral",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let name = format!("{}-target", node.name);
        create_pod(cluster, &node.name, &name, spec("Always", json!([shell("app", UNTIL_TERM)]))).await;
        let pod = wait_running(&cluster.client, NAMESPACE, &name).await;
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let add = |containers: Value| {
            let pods = pods.clone();
            let name = name.clone();
            async move {
                let patch = json!({"spec": {"ephemeralContainers": containers}});
                pods.patch_ephemeral_containers(&name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                    .expect("the ephemeral container is added")
            }
        };
        // As `kubectl debug`: one that exits at once with 3, then one that keeps running.
        let debugger = json!({"name": "debugger", "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", "exit 3"]});
        add(json!([debugger])).await;
        let exited = wait_pod(&cluster.client, NAMESPACE, &name, "the debugger exited", |pod| {
            ephemeral_status(pod, "debugger")
                .and_then(|s| s.state?.terminated)
                .is_some_and(|t| t.exit_code == 3)
        })
        .await;
        let status = ephemeral_status(&exited, "debugger").expect("its status");
        assert_eq!((status.ready, status.restart_count, status.started), (false, 0, None));
        assert!(nodepulse_testkit::pods::running_and_ready(&exited), "the pod stays Ready");
        add(json!([debugger, {"name": "sleeper", "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", UNTIL_TERM]}])).await;
        let later = wait_pod(&cluster.client, NAMESPACE, &name, "the sleeper runs", |pod| {
            ephemeral_status(pod, "sleeper").and_then(|s| s.state?.running).is_some()
        })
        .await;
        // The pod was synced again since the debugger exited; it was not started again.
        let debugger_now = ephemeral_status(&later, "debugger").and_then(|s| s.state?.terminated);
        assert_eq!(debugger_now.map(|t| t.exit_code), Some(3));
        let filter = ContainerFilter {
            labels: [("io.kubernetes.pod.uid".to_owned(), pod.metadata.uid.clone().expect("a uid"))].into(),
            ..ContainerFilter::default()
        };
        let containers = setup.fixture.client.list_containers(filter).await.expect("ListContainers");
        let debuggers = containers.iter().filter(|c| c.name == "debugger").count();
        assert_eq!(debuggers, 1, "{containers:?}");
    })
    .await;
}

/// The target's script: a process whose command line carries `pid-target-marker`.
const MARKED: &str =
    "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done # pid-target-marker";
/// Exits 0 once a process with the marker is visible (the bracket keeps this script's and
/// grep's own command lines from matching), 7 if none shows within a few seconds.
const SEES_MARKED: &str = "for i in $(seq 50); do \
     cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q 'pid-target-marke[r]' && exit 0; \
     sleep 0.1; done; exit 7";

fn terminated_exit(status: Option<k8s_openapi::api::core::v1::ContainerStatus>) -> Option<i32> {
    status?.state?.terminated.map(|t| t.exit_code)
}

#[actix_rt::test]
async fn containers_share_a_pid_namespace_only_when_the_pod_or_an_ephemeral_target_says_so() {
    let Some(setup) = Setup::start(
        "containers_share_a_pid_namespace_only_when_the_pod_or_an_ephemeral_target_says_so",
        "cri-pid-ns",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        // shareProcessNamespace: a peer sees the app's process; without it, it does not.
        for (suffix, share, expected) in [("shared", true, 0), ("own", false, 7)] {
            let name = format!("{}-{suffix}", node.name);
            let mut extra = spec(
                "Never",
                json!([shell("app", MARKED), shell("peer", SEES_MARKED)]),
            );
            extra["spec"]["shareProcessNamespace"] = json!(share);
            create_pod(cluster, &node.name, &name, extra).await;
            let done = wait_pod(
                &cluster.client,
                NAMESPACE,
                &name,
                "the peer exited",
                |pod| {
                    let statuses = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.container_statuses.clone());
                    terminated_exit(statuses.into_iter().flatten().find(|s| s.name == "peer"))
                        .is_some()
                },
            )
            .await;
            let statuses = done
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default();
            let peer = statuses.into_iter().find(|s| s.name == "peer");
            assert_eq!(
                terminated_exit(peer),
                Some(expected),
                "shareProcessNamespace: {share}"
            );
        }
        // An ephemeral container with targetContainerName sees the target's processes; one
        // without sees only its own.
        let name = format!("{}-debugged", node.name);
        create_pod(
            cluster,
            &node.name,
            &name,
            spec("Always", json!([shell("app", MARKED)])),
        )
        .await;
        wait_running(&cluster.client, NAMESPACE, &name).await;
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let debugger = |name: &str, target: Option<&str>| {
            let mut container = shell(name, SEES_MARKED);
            if let Some(target) = target {
                container["targetContainerName"] = json!(target);
            }
            container
        };
        let patch = json!({"spec": {"ephemeralContainers": [
            debugger("targeted", Some("app")),
            debugger("untargeted", None),
        ]}});
        pods.patch_ephemeral_containers(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .expect("the ephemeral containers are added");
        let done = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "both debuggers exited",
            |pod| {
                ["targeted", "untargeted"]
                    .iter()
                    .all(|debugger| terminated_exit(ephemeral_status(pod, debugger)).is_some())
            },
        )
        .await;
        assert_eq!(
            terminated_exit(ephemeral_status(&done, "targeted")),
            Some(0)
        );
        assert_eq!(
            terminated_exit(ephemeral_status(&done, "untargeted")),
            Some(7)
        );
    })
    .await;
}

#[actix_rt::test]
async fn containers_get_the_kubelets_etc_hosts_with_host_aliases_and_the_pods_host_name() {
    let Some(setup) = Setup::start(
        "containers_get_the_kubelets_etc_hosts_with_host_aliases_and_the_pods_host_name",
        "cri-etc-hosts",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let aliases = json!([{"ip": "123.45.67.89", "hostnames": ["foo", "bar"]}]);
        let show =
            "cat /etc/hosts > /dev/termination-log; echo \"$(hostname)\" >> /dev/termination-log";
        let cases = [
            (
                "managed",
                json!({"hostname": "db", "subdomain": "backend", "hostAliases": aliases}),
            ),
            (
                "host-net",
                json!({"hostNetwork": true, "hostAliases": aliases}),
            ),
            ("override", json!({"hostnameOverride": "override-host"})),
        ];
        for (suffix, extra) in &cases {
            let mut manifest = spec("Never", json!([shell("app", show)]));
            for (key, value) in extra.as_object().expect("an object") {
                manifest["spec"][key] = value.clone();
            }
            let name = format!("{}-{suffix}", node.name);
            create_pod(cluster, &node.name, &name, manifest).await;
        }
        let output = |suffix: &'static str| async move {
            let name = format!("{}-{suffix}", node.name);
            let pod = wait_phase(cluster, &name, "Succeeded").await;
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default();
            let terminated = app(&pod)
                .state
                .and_then(|s| s.terminated)
                .expect("terminated");
            let message = terminated.message.clone().unwrap_or_default();
            assert!(
                !message.is_empty(),
                "{suffix} wrote nothing: {terminated:?}"
            );
            (message, ip)
        };
        let alias_lines = "\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n";

        let (managed, ip) = output("managed").await;
        assert_eq!(
            managed,
            format!(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n\
                 ::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n\
                 fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n\
                 {ip}\tdb.backend.{NAMESPACE}.svc.cluster.local\tdb\n{alias_lines}db\n"
            )
        );
        let (host_net, _) = output("host-net").await;
        assert!(
            host_net.starts_with("# Kubernetes-managed hosts file (host network).\n")
                && host_net.contains("localhost")
                && host_net.ends_with(&format!("{alias_lines}{}\n", host_name())),
            "{host_net}"
        );
        let (overridden, ip) = output("override").await;
        assert!(
            overridden.ends_with(&format!("{ip}\toverride-host\noverride-host\n")),
            "{overridden}"
        );
    })
    .await;
}

/// The machine's host name, which a `hostNetwork` container shares.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host name")
        .trim()
        .to_owned()
}

#[actix_rt::test]
async fn a_privileged_container_runs_with_the_privileges_an_unprivileged_one_lacks() {
    let Some(setup) = Setup::start(
        "a_privileged_container_runs_with_the_privileges_an_unprivileged_one_lacks",
        "cri-privileged",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        // Mounting needs CAP_SYS_ADMIN, which only a privileged container has.
        let mount = "mkdir -p /scratch && mount -t tmpfs scratch /scratch";
        for (suffix, privileged, phase) in [
            ("privileged", true, "Succeeded"),
            ("plain", false, "Failed"),
        ] {
            let mut container = shell("app", mount);
            container["securityContext"] = json!({"privileged": privileged});
            let name = format!("{}-{suffix}", node.name);
            create_pod(
                cluster,
                &node.name,
                &name,
                spec("Never", json!([container])),
            )
            .await;
            let ended = wait_pod(&cluster.client, NAMESPACE, &name, "ended", |pod| {
                matches!(
                    nodepulse_testkit::pods::phase(pod),
                    Some("Succeeded" | "Failed")
                )
            })
            .await;
            assert_eq!(
                nodepulse_testkit::pods::phase(&ended),
                Some(phase),
                "{:?}",
                ended.status
            );
        }
    })
    .await;
}

#[actix_rt::test]
async fn a_pod_is_ready_only_once_its_readiness_gates_conditions_are_true() {
    let Some(setup) = Setup::start(
        "a_pod_is_ready_only_once_its_readiness_gates_conditions_are_true",
        "cri-gates",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        use nodepulse_testkit::pods::condition;
        let gate = "nodepulse.test/gate";
        let mut manifest = spec("Always", json!([shell("app", UNTIL_TERM)]));
        manifest["spec"]["readinessGates"] = json!([{"conditionType": gate}]);
        let name = format!("{}-gated", node.name);
        create_pod(cluster, &node.name, &name, manifest).await;
        let held = wait_pod(
            &cluster.client,
            NAMESPACE,
            &name,
            "running, held back by its gate",
            |pod| {
                nodepulse_testkit::pods::phase(pod) == Some("Running")
                    && condition(pod, "ContainersReady").as_deref() == Some("True")
            },
        )
        .await;
        let ready = |pod: &Pod| {
            let conditions = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            conditions
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| (c.status, c.reason, c.message))
        };
        assert_eq!(
            ready(&held),
            Some((
                "False".to_owned(),
                Some("ReadinessGatesNotReady".to_owned()),
                Some(format!(
                    "corresponding condition of pod readiness gate \"{gate}\" does not exist."
                )),
            ))
        );
        // Another controller sets the gate's condition: the pod becomes Ready, the condition stays.
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
        let opened = json!({"status": {"conditions": [{"type": gate, "status": "True"}]}});
        pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(opened))
            .await
            .expect("the gate's condition is set");
        let ready_now = wait_pod(&cluster.client, NAMESPACE, &name, "Ready", |pod| {
            condition(pod, "Ready").as_deref() == Some("True")
        })
        .await;
        assert_eq!(condition(&ready_now, gate).as_deref(), Some("True"));
    })
    .await;
}

#[actix_rt::test]
async fn a_pod_with_an_unsafe_sysctl_the_node_does_not_allow_is_refused() {
    let Some(setup) = Setup::start(
        "a_pod_with_an_unsafe_sysctl_the_node_does_not_allow_is_refused",
        "cri-sysctl",
    )
    .await
    else {
        return;
    };
    let (node, cluster) = (&setup.node, &setup.cluster);
    node.guard(async {
        let mut manifest = spec("Never", json!([shell("app", "true")]));
        manifest["spec"]["securityContext"] =
            json!({"sysctls": [{"name": "kernel.msgmax", "value": "10000000000"}]});
        let name = format!("{}-unsafe", node.name);
        create_pod(cluster, &node.name, &name, manifest).await;
        let refused = wait_phase(cluster, &name, "Failed").await;
        let status = refused.status.expect("a status");
        assert_eq!(status.reason.as_deref(), Some("SysctlForbidden"));
        assert_eq!(
            status.message.as_deref(),
            Some("Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted")
        );
    })
    .await;
}
