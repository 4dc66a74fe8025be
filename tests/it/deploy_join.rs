//! The DaemonSet of deploy/ joins as a kubelet does, and then asks for nothing the Node
//! authorizer would refuse its node. nodepulse runs with the DaemonSet's arguments, the
//! ConfigMap's bootstrap kubeconfig and a ServiceAccount token where the pod has them (the
//! emulator's address in place of `kubernetes.default.svc`), against an emulator serving TLS
//! under node restriction whose approver says yes to whom deploy/'s RBAC lets create
//! `certificatesigningrequests/nodeclient`. Every request of the ServiceAccount must be granted
//! by deploy/'s RBAC, and every request of the node (registration, status, Lease, a pod with a
//! Secret, a ConfigMap and a projected token through its whole life, an event) allowed by the
//! model of the Node authorizer for that node alone.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
};

use k8s_openapi::api::{
    certificates::v1::CertificateSigningRequest,
    core::v1::{PersistentVolume, Pod},
    storage::v1::VolumeAttachment,
};
use kube::{Api, api::DeleteParams, config::Kubeconfig};
use nodepulse::{
    apiserver_client::KubeApi,
    config::{Config, Source},
};
use nodepulse_actors::ports::{PodApi, PodEvent};
use nodepulse_emulator::{AuthConfig, EmulatorConfig, User};
use nodepulse_testkit::{
    bootstrap::{CsrSweep, node_ready},
    cluster::{TestCluster, unique_node_name},
    daemon::DaemonProcess,
    deploy::{Access, DaemonSetPod, Rbac, deploy_objects, requests_of, service_account},
    eventually, eventually_async,
    node_authorizer::{NodeAuthorizer, NodeRequest},
    objects::{create_config_map, create_secret},
    pods::{create, pod_manifest, running_and_ready, wait_pod},
    root_dir::RootDir,
    skip,
};
use serde_json::json;

const NAMESPACE: &str = "kube-public";

#[actix_rt::test]
async fn the_daemonset_joins_as_its_node_and_asks_only_what_the_node_authorizer_allows() {
    const TEST: &str =
        "the_daemonset_joins_as_its_node_and_asks_only_what_the_node_authorizer_allows";
    if skip::on_real_cluster() {
        return skip::skipped(TEST, "the emulator's request log");
    }
    let objects = deploy_objects();
    let account = service_account(&objects);
    let rbac = Rbac::of(&objects, &account);
    let account_user = format!(
        "system:serviceaccount:{}:{}",
        account.metadata.namespace.as_deref().unwrap_or_default(),
        account.metadata.name.as_deref().unwrap_or_default()
    );
    let token = "nodepulse-daemonset-pod-token-4b1e07c2";
    let nodeclient = Access::new(
        "create",
        "certificates.k8s.io",
        "certificatesigningrequests/nodeclient",
        "",
    );
    let cluster = TestCluster::start_with(EmulatorConfig {
        tls: true,
        auth: AuthConfig {
            tokens: [(token.to_owned(), service_account_user(&account_user))].into(),
            allow_anonymous: true,
            node_restriction: true,
        },
        // kube-controller-manager's SubjectAccessReview, answered by deploy/'s RBAC.
        node_client_requesters: match rbac.allows(&nodeclient) {
            true => vec![account_user.clone()],
            false => Vec::new(),
        },
        ..EmulatorConfig::for_tests()
    })
    .await;
    let emulator = cluster.emulator.as_ref().expect("the emulator");
    let node = unique_node_name("daemonset");
    let node_user = format!("system:node:{node}");
    let _sweep = CsrSweep {
        kubeconfig: cluster.kubeconfig.clone(),
        users: vec![account_user.clone(), node_user.clone()],
    };

    // The pod's files under a directory of the test's: the projected token and CA, the
    // ConfigMap's bootstrap kubeconfig, and the host's /var/lib/nodepulse.
    let host = RootDir::new();
    let pod = DaemonSetPod::of(&objects);
    let cli = pod.cli(&node);
    let bootstrap = cli.bootstrap_kubeconfig.clone().expect("a bootstrap");
    let text = pod.config_map_file(&objects, &bootstrap);
    let mut kubeconfig = Kubeconfig::from_yaml(&text).expect("a kubeconfig");
    let user = kubeconfig.auth_infos[0].auth_info.as_mut().expect("a user");
    let token_file = under(host.path(), user.token_file.as_deref().expect("tokenFile"));
    user.token_file = Some(token_file.display().to_string());
    let cluster_entry = kubeconfig.clusters[0].cluster.as_mut().expect("a cluster");
    let ca_file = under(
        host.path(),
        cluster_entry
            .certificate_authority
            .as_deref()
            .expect("a CA"),
    );
    cluster_entry.certificate_authority = Some(ca_file.display().to_string());
    cluster_entry.server = Some(emulator.base_url());
    write(&token_file, token);
    write(&ca_file, emulator.ca_pem());
    let bootstrap = under(host.path(), &bootstrap.display().to_string());
    write(
        &bootstrap,
        &serde_yaml_ng::to_string(&kubeconfig).expect("YAML"),
    );
    let written = under(
        host.path(),
        &cli.kubeconfig.expect("--kubeconfig").display().to_string(),
    );
    let cert_dir = under(
        host.path(),
        &cli.cert_dir.expect("--cert-dir").display().to_string(),
    );

    // The ConfigMap's configuration says whether to rotate; the runtime is simulated here.
    let config_path = cli.config.clone().expect("--config");
    let deployed = Config::parse(
        &pod.config_map_file(&objects, &config_path),
        Source::File(config_path),
    )
    .expect("valid");
    let root = RootDir::new();
    let yaml = format!(
        "runtime: simulated\nrootDir: {}\npodCIDR: 10.126.0.0/16\nsyncFrequency: 2s\nnodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nrotateCertificates: {}\nevictionHard:\n  memory.available: 1Mi\ndebug:\n  address: 127.0.0.1:0\n",
        root.path().display(),
        deployed.rotate_certificates
    );
    let args: [&OsStr; 4] = [
        "--bootstrap-kubeconfig".as_ref(),
        bootstrap.as_os_str(),
        "--cert-dir".as_ref(),
        cert_dir.as_os_str(),
    ];
    let daemon = DaemonProcess::start_with_args(&written, &node, &yaml, &[], &args).await;
    eventually_async("the node is Ready", || node_ready(&cluster.client, &node)).await;

    // Joined by the pod's token, approved as deploy/'s RBAC allows.
    let csrs = Api::<CertificateSigningRequest>::all(cluster.client.clone());
    let by_account =
        nodepulse_testkit::bootstrap::requests_by(&csrs, std::slice::from_ref(&account_user)).await;
    assert_eq!(by_account.len(), 1, "one CSR with the ServiceAccount token");
    let approved = by_account[0]
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    assert!(
        approved
            .clone()
            .any(|c| c.type_ == "Approved" && c.reason.as_deref() == Some("AutoApproved")),
        "{:?}",
        approved.collect::<Vec<_>>()
    );

    // A pod bound to the node with a Secret, a ConfigMap and (admission's) a projected token
    // runs, then is deleted; nodepulse finishes it and deletes it for good.
    let secret = format!("{node}-secret");
    let config_map = format!("{node}-config");
    create_secret(
        &cluster,
        NAMESPACE,
        &secret,
        json!({"stringData": {"key": "s"}}),
    )
    .await;
    create_config_map(
        &cluster,
        NAMESPACE,
        &config_map,
        json!({"data": {"key": "c"}}),
    )
    .await;
    let pod_name = format!("{node}-pod");
    let bound = create(
        &cluster.client,
        &pod_manifest(
            &pod_name,
            NAMESPACE,
            &node,
            json!({"spec": {"volumes": [
                {"name": "secret", "secret": {"secretName": secret}},
                {"name": "config", "configMap": {"name": config_map}}],
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                    "volumeMounts": [{"name": "secret", "mountPath": "/secret"},
                                     {"name": "config", "mountPath": "/config"}]}]}}),
        ),
    )
    .await;
    wait_pod(
        &cluster.client,
        NAMESPACE,
        &pod_name,
        "running",
        running_and_ready,
    )
    .await;
    let read = |resource: &str, name: &str| {
        emulator.requests().iter().any(|request| {
            request.user == node_user
                && request.resource == resource
                && NodeRequest::of(request).name == name
        })
    };
    eventually("the node read the pod's Secret and ConfigMap", || {
        read("secrets", &secret) && read("configmaps", &config_map)
    })
    .await;
    let pods = Api::<Pod>::namespaced(cluster.client.clone(), NAMESPACE);
    pods.delete(&pod_name, &DeleteParams::default())
        .await
        .expect("deleted gracefully");
    eventually_async("nodepulse deletes the finished pod", || async {
        pods.get_opt(&pod_name).await.is_ok_and(|pod| pod.is_none())
    })
    .await;
    // An event about a pod (evictions record them), through the adapter, as the node.
    let config = Config::parse(&yaml, Source::Embedded).expect("valid");
    let api = KubeApi::connect(Some(&written), &config)
        .await
        .expect("connects with the written kubeconfig");
    api.record_pod_event(
        &bound,
        PodEvent {
            warning: true,
            reason: "Evicted".into(),
            message: "The node was low on resource: memory.".into(),
            annotations: Default::default(),
        },
    )
    .await
    .expect("a pod event");

    // Wait until the log holds all of that, so the checks below are not vacuous.
    let expected = [
        Access::new("create", "", "nodes", ""),
        Access::new("patch", "", "nodes/status", ""),
        Access::new("watch", "", "nodes", ""),
        Access::new("create", "coordination.k8s.io", "leases", "kube-node-lease"),
        Access::new("create", "", "events", NAMESPACE),
        Access::new("watch", "", "pods", ""),
        Access::new("patch", "", "pods/status", NAMESPACE),
        Access::new("delete", "", "pods", NAMESPACE),
        Access::new("create", "", "serviceaccounts/token", NAMESPACE),
    ];
    eventually("the request log holds a node's whole life", || {
        let made = requests_of(emulator, &node_user);
        expected.iter().all(|access| made.contains(access))
    })
    .await;
    drop(daemon);

    let requests = emulator.requests();
    let refused: Vec<_> = requests
        .iter()
        .filter(|r| [&account_user, &node_user].contains(&&r.user) && matches!(r.code, 401 | 403))
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    // The ServiceAccount only asked for the certificate.
    let by_account = requests_of(emulator, &account_user);
    assert!(by_account.contains(&Access::new(
        "create",
        "certificates.k8s.io",
        "certificatesigningrequests",
        ""
    )));
    let beyond: Vec<_> = by_account.iter().filter(|a| !rbac.allows(a)).collect();
    assert!(beyond.is_empty(), "deploy/ does not grant {beyond:?}");
    // The node asked for nothing its Node authorizer would refuse it.
    let authorizer = NodeAuthorizer::new(&node).pod(&bound);
    let mut made: Vec<NodeRequest> = requests
        .iter()
        .filter(|r| r.user == node_user)
        .map(NodeRequest::of)
        .collect();
    made.sort();
    made.dedup();
    let denied: Vec<_> = made
        .iter()
        .filter_map(|r| authorizer.decide(r).err().map(|why| (r, why)))
        .collect();
    assert!(denied.is_empty(), "the Node authorizer refuses {denied:#?}");
    println!(
        "{} distinct requests of {node_user}, all allowed:",
        made.len()
    );
    for request in &made {
        println!("  {request:?}");
    }
}

/// A ServiceAccount's user as kube-apiserver authenticates its token.
fn service_account_user(name: &str) -> User {
    let namespace = name.split(':').nth(2).unwrap_or_default();
    User {
        name: name.to_owned(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    }
}

/// `path` of the pod's filesystem, under the test's `root`.
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
    std::fs::write(path, text).expect("written");
}

/// The model refuses what kube-apiserver's Node authorizer refuses, so the check above can fail.
#[test]
fn the_node_authorizer_model_holds_a_node_to_its_own_pods() {
    let pod = |name: &str, node: &str, secret: &str| -> Pod {
        pod_manifest(
            name,
            "apps",
            node,
            json!({"spec": {"serviceAccountName": format!("{name}-account"),
                "volumes": [{"name": "s", "secret": {"secretName": secret}},
                            {"name": "c", "configMap": {"name": format!("{name}-config")}}]}}),
        )
    };
    let claimer = pod_manifest(
        "claimer",
        "apps",
        "n1",
        json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}}]}}),
    );
    let volume = |name: &str, claim: &str| -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
            "claimRef": {"namespace": "apps", "name": claim},
            "csi": {"driver": "d", "volumeHandle": name,
                    "nodeStageSecretRef": {"namespace": "storage", "name": format!("{name}-stage")}}}}))
        .expect("a PersistentVolume")
    };
    let attachment = |name: &str, node: &str| -> VolumeAttachment {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {
            "attacher": "d", "nodeName": node, "source": {"persistentVolumeName": "pv-1"}}}))
        .expect("a VolumeAttachment")
    };
    let authorizer = NodeAuthorizer::new("n1")
        .pod(&pod("mine", "n1", "my-secret"))
        .pod(&pod("theirs", "n2", "their-secret"))
        .pod(&claimer)
        .volume(&volume("pv-1", "data-claim"))
        .volume(&volume("pv-2", "other-claim"))
        .attachment(&attachment("va-1", "n1"))
        .attachment(&attachment("va-2", "n2"));
    let request =
        |verb: &str, group: &str, resource: &str, namespace: &str, name: &str| NodeRequest {
            verb: verb.into(),
            group: group.into(),
            resource: resource.split('/').next().unwrap_or_default().into(),
            subresource: resource.split('/').nth(1).unwrap_or_default().into(),
            namespace: namespace.into(),
            name: name.into(),
            field_selector: String::new(),
        };
    let selecting = |verb: &str, resource: &str, namespace: &str, selector: &str| NodeRequest {
        field_selector: selector.into(),
        name: String::new(),
        ..request(verb, "", resource, namespace, "")
    };
    let allowed = [
        request("get", "", "secrets", "apps", "my-secret"),
        request("watch", "", "configmaps", "apps", "mine-config"),
        request(
            "create",
            "",
            "serviceaccounts/token",
            "apps",
            "mine-account",
        ),
        request("patch", "", "pods/status", "apps", "mine"),
        request("delete", "", "pods", "apps", "mine"),
        request("get", "", "nodes", "", "n1"),
        request("patch", "", "nodes/status", "", "n1"),
        request(
            "update",
            "coordination.k8s.io",
            "leases",
            "kube-node-lease",
            "n1",
        ),
        request("create", "authentication.k8s.io", "tokenreviews", "", ""),
        request("list", "", "services", "", ""),
        selecting("watch", "pods", "", "spec.nodeName=n1"),
        request("get", "", "persistentvolumeclaims", "apps", "data-claim"),
        request("get", "", "persistentvolumes", "", "pv-1"),
        request("get", "", "secrets", "storage", "pv-1-stage"),
        request("get", "storage.k8s.io", "volumeattachments", "", "va-1"),
    ];
    for request in &allowed {
        assert_eq!(authorizer.decide(request), Ok(()), "{request:?}");
    }
    let refused = [
        request("get", "", "secrets", "apps", "their-secret"),
        request("get", "", "secrets", "kube-system", "my-secret"),
        request("list", "", "secrets", "", ""),
        request("list", "", "secrets", "apps", ""),
        request("get", "", "configmaps", "apps", "theirs-config"),
        request(
            "create",
            "",
            "serviceaccounts/token",
            "apps",
            "theirs-account",
        ),
        request(
            "create",
            "",
            "serviceaccounts/token",
            "kube-system",
            "namespace-controller",
        ),
        request("patch", "", "pods/status", "apps", "theirs"),
        request("delete", "", "pods", "apps", "theirs"),
        request("get", "", "nodes", "", "n2"),
        request("watch", "", "nodes", "", ""),
        request("patch", "", "nodes/status", "", "n2"),
        request(
            "update",
            "coordination.k8s.io",
            "leases",
            "kube-node-lease",
            "n2",
        ),
        request("update", "coordination.k8s.io", "leases", "default", "n1"),
        request(
            "create",
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "",
            "",
        ),
        selecting("watch", "pods", "", "spec.nodeName=n2"),
        selecting("watch", "pods", "", ""),
        request("get", "", "persistentvolumeclaims", "apps", "other-claim"),
        request("get", "", "persistentvolumes", "", "pv-2"),
        request("list", "", "persistentvolumes", "", ""),
        request("get", "", "secrets", "storage", "pv-2-stage"),
        request("get", "storage.k8s.io", "volumeattachments", "", "va-2"),
    ];
    for request in &refused {
        assert!(authorizer.decide(request).is_err(), "{request:?} allowed");
    }
}
