//! The files in `deploy/` are what nodepulse needs on a real cluster, and no more: every YAML
//! parses into its Kubernetes type; the RBAC grants every request nodepulse really makes (taken
//! from the emulator's request log while a whole node runs under a node identity, a pod's life
//! included) and nothing beyond the documented list; the DaemonSet, the ConfigMap and the systemd unit hand the daemon
//! a command line and a configuration it accepts.

use crate::common;

use std::{collections::BTreeSet, path::Path, time::Duration};

use clap::Parser;
use common::{
    cluster::unique_node_name,
    eventually, eventually_async,
    identity::NodeIdentityEmulator,
    pods::{create, pod_manifest, running_and_ready, start_simulated_node, wait_pod},
};
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Pod, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject},
};
use kube::{Api, api::DeleteParams};
use nodepulse::{
    cli::Cli,
    config::{Config, Source},
    daemon::EXIT_CONFIG,
    kube_api::KubeApi,
};
use nodepulse_actors::ports::{PodApi, PodEvent};
use nodepulse_emulator::EmulatorHandle;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");

/// What nodepulse is documented to call, as (API group, resource[/subresource], verbs,
/// namespace or "" for any). The ClusterRole and Role must grant all of it and nothing else.
const DOCUMENTED: &[(&str, &str, &[&str], &str)] = &[
    (
        "",
        "nodes",
        &["get", "list", "watch", "create", "patch"],
        "",
    ),
    ("", "nodes/status", &["patch"], ""),
    (
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update", "patch"],
        "kube-node-lease",
    ),
    ("", "pods", &["get", "list", "watch", "delete"], ""),
    ("", "pods/status", &["patch"], ""),
    ("", "events", &["create", "patch"], ""),
    ("", "configmaps", &["get", "list", "watch"], ""),
    ("", "secrets", &["get", "list", "watch"], ""),
    ("", "services", &["list", "watch"], ""),
    ("", "serviceaccounts/token", &["create"], ""),
    ("", "persistentvolumeclaims", &["get"], ""),
    ("", "persistentvolumes", &["get"], ""),
    ("storage.k8s.io", "csidrivers", &["get"], ""),
    ("storage.k8s.io", "volumeattachments", &["get"], ""),
    (
        "storage.k8s.io",
        "csinodes",
        &["get", "create", "update", "delete"],
        "",
    ),
    ("authentication.k8s.io", "tokenreviews", &["create"], ""),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        &["create"],
        "",
    ),
];

/// One request in RBAC's terms; `namespace` is "" for cluster-scoped resources and requests
/// across all namespaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    verb: String,
    group: String,
    resource: String,
    namespace: String,
}

impl Access {
    fn new(verb: &str, group: &str, resource: &str, namespace: &str) -> Self {
        Self {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
        }
    }
}

/// Every object of every YAML file in deploy/, with the file it came from.
fn deploy_objects() -> Vec<(String, Value)> {
    let mut objects = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(DEPLOY)
        .expect("deploy/ exists")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "deploy/ holds YAML manifests");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|error| panic!("{}: not YAML: {error}", path.display()));
            if value.is_null() {
                continue;
            }
            for field in ["apiVersion", "kind"] {
                assert!(
                    value[field].is_string(),
                    "{}: an object without {field}",
                    path.display()
                );
            }
            objects.push((path.display().to_string(), value));
        }
    }
    objects
}

/// The objects of `kind`, parsed into their k8s-openapi type (a misspelt or mistyped field of
/// the type's schema fails here).
fn of_kind<T: DeserializeOwned>(objects: &[(String, Value)], kind: &str) -> Vec<T> {
    objects
        .iter()
        .filter(|(_, object)| object["kind"] == kind)
        .map(|(file, object)| {
            serde_json::from_value(object.clone())
                .unwrap_or_else(|error| panic!("{file}: not a valid {kind}: {error}"))
        })
        .collect()
}

fn only<T>(mut items: Vec<T>, what: &str) -> T {
    assert_eq!(items.len(), 1, "deploy/ holds exactly one {what}");
    items.remove(0)
}

/// The RBAC of deploy/ as the authorizer sees it, for one service account.
struct Rbac {
    /// Rules that apply in every namespace and to cluster-scoped resources.
    cluster: Vec<PolicyRule>,
    /// Rules that apply only inside one namespace.
    namespaced: Vec<(String, PolicyRule)>,
}

impl Rbac {
    fn of(objects: &[(String, Value)], account: &ServiceAccount) -> Self {
        let account_name = account.metadata.name.clone().expect("a name");
        let account_namespace = account.metadata.namespace.clone().expect("a namespace");
        let binds = |subjects: &Option<Vec<Subject>>| {
            subjects.iter().flatten().any(|subject| {
                subject.kind == "ServiceAccount"
                    && subject.name == account_name
                    && subject.namespace.as_deref() == Some(account_namespace.as_str())
            })
        };
        let cluster_roles: Vec<ClusterRole> = of_kind(objects, "ClusterRole");
        let roles: Vec<Role> = of_kind(objects, "Role");
        let cluster_role_rules = |name: &str| {
            cluster_roles
                .iter()
                .find(|role| role.metadata.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("a binding refers to ClusterRole {name}, not in deploy/"))
                .rules
                .clone()
                .unwrap_or_default()
        };
        let mut cluster = Vec::new();
        for binding in of_kind::<ClusterRoleBinding>(objects, "ClusterRoleBinding") {
            if binds(&binding.subjects) {
                assert_eq!(binding.role_ref.kind, "ClusterRole");
                cluster.extend(cluster_role_rules(&binding.role_ref.name));
            }
        }
        let mut namespaced = Vec::new();
        for binding in of_kind::<RoleBinding>(objects, "RoleBinding") {
            if !binds(&binding.subjects) {
                continue;
            }
            let namespace = binding.metadata.namespace.clone().expect("a namespace");
            let rules = match binding.role_ref.kind.as_str() {
                "ClusterRole" => cluster_role_rules(&binding.role_ref.name),
                _ => roles
                    .iter()
                    .find(|role| {
                        role.metadata.name.as_deref() == Some(binding.role_ref.name.as_str())
                            && role.metadata.namespace.as_deref() == Some(namespace.as_str())
                    })
                    .unwrap_or_else(|| {
                        panic!("RoleBinding refers to a Role not in deploy/ in {namespace}")
                    })
                    .rules
                    .clone()
                    .unwrap_or_default(),
            };
            namespaced.extend(rules.into_iter().map(|rule| (namespace.clone(), rule)));
        }
        Self {
            cluster,
            namespaced,
        }
    }

    fn allows(&self, access: &Access) -> bool {
        let matches = |rule: &PolicyRule| {
            let has = |list: &Option<Vec<String>>, wanted: &str| {
                list.iter()
                    .flatten()
                    .any(|item| item == wanted || item == "*")
            };
            has(&rule.api_groups, &access.group)
                && has(&rule.resources, &access.resource)
                && rule
                    .verbs
                    .iter()
                    .any(|verb| verb == &access.verb || verb == "*")
                && rule.resource_names.as_ref().is_none_or(Vec::is_empty)
        };
        self.cluster.iter().any(matches)
            || (!access.namespace.is_empty()
                && self
                    .namespaced
                    .iter()
                    .any(|(namespace, rule)| *namespace == access.namespace && matches(rule)))
    }

    /// Every (verb, group, resource, namespace) a rule grants, wildcards refused.
    fn grants(&self) -> BTreeSet<Access> {
        let mut granted = BTreeSet::new();
        let all = self
            .cluster
            .iter()
            .map(|rule| (String::new(), rule))
            .chain(self.namespaced.iter().map(|(ns, rule)| (ns.clone(), rule)));
        for (namespace, rule) in all {
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    for verb in &rule.verbs {
                        assert!(
                            ![group, resource, verb].contains(&&"*".to_string()),
                            "deploy/ grants a wildcard: {rule:?}"
                        );
                        granted.insert(Access::new(verb, group, resource, &namespace));
                    }
                }
            }
        }
        granted
    }
}

fn service_account(objects: &[(String, Value)]) -> ServiceAccount {
    only(of_kind(objects, "ServiceAccount"), "ServiceAccount")
}

fn documented() -> BTreeSet<Access> {
    DOCUMENTED
        .iter()
        .flat_map(|(group, resource, verbs, namespace)| {
            verbs
                .iter()
                .map(|verb| Access::new(verb, group, resource, namespace))
        })
        .collect()
}

#[test]
fn the_rbac_grants_exactly_the_documented_permissions() {
    let objects = deploy_objects();
    let rbac = Rbac::of(&objects, &service_account(&objects));
    for access in documented() {
        assert!(rbac.allows(&access), "deploy/ does not grant {access:?}");
    }
    let extra: Vec<_> = rbac.grants().difference(&documented()).cloned().collect();
    assert!(
        extra.is_empty(),
        "deploy/ grants more than nodepulse is documented to use: {extra:?}"
    );
    // Leases only in kube-node-lease: the Role is what keeps other namespaces' Leases out.
    let elsewhere = Access::new("update", "coordination.k8s.io", "leases", "default");
    assert!(
        !rbac.allows(&elsewhere),
        "Leases are writable outside kube-node-lease"
    );
}

#[actix_rt::test]
async fn every_request_nodepulse_makes_is_granted_by_the_deploy_rbac() {
    if common::skip::on_real_cluster() {
        common::skip::skipped(
            "every_request_nodepulse_makes_is_granted_by_the_deploy_rbac",
            "the emulator's request log",
        );
        return;
    }
    let name = unique_node_name("rbac");
    let cluster = NodeIdentityEmulator::start(&name).await;
    let (emulator, user, node_kubeconfig, admin) = (
        &cluster.emulator,
        &cluster.user,
        &cluster.node_kubeconfig,
        &cluster.admin,
    );

    // The whole node (every actor, a simulated runtime and pod provider) under the node's own
    // identity: registration, status, events, Lease renewals and the pods' lives.
    let yaml = "nodeStatusUpdateFrequency: 1s\nnodeLeaseDurationSeconds: 4\nrootDir: /\n";
    let supervisor = start_simulated_node(node_kubeconfig, &name, yaml).await;
    let leases = Api::<Lease>::namespaced(admin.clone(), "kube-node-lease");
    eventually_async("the Lease is renewed with its owner", || async {
        leases
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .is_some_and(|lease| lease.metadata.owner_references.is_some())
    })
    .await;

    // A pod bound to the node runs, then is deleted: nodepulse patches its status, finishes
    // it and deletes it for good. Outside "default", so its namespace is the pod's own.
    let namespace = "kube-public";
    let pod_name = format!("{name}-pod");
    let pod = create(admin, &pod_manifest(&pod_name, namespace, &name, json!({}))).await;
    wait_pod(admin, namespace, &pod_name, "running", running_and_ready).await;
    Api::<Pod>::namespaced(admin.clone(), namespace)
        .delete(&pod_name, &DeleteParams::default())
        .await
        .expect("the pod is deleted gracefully");
    let pods = Api::<Pod>::namespaced(admin.clone(), namespace);
    eventually_async("nodepulse deletes the finished pod", || async {
        pods.get_opt(&pod_name).await.is_ok_and(|pod| pod.is_none())
    })
    .await;
    // The one pod call the lifecycle above does not make: an event about a pod (evictions
    // record them), through the adapter.
    let config = Config::parse(yaml, Source::Embedded).expect("valid");
    let api = KubeApi::connect(Some(node_kubeconfig), &config)
        .await
        .expect("connects");
    api.record_pod_event(
        &pod,
        PodEvent {
            warning: true,
            reason: "Evicted".into(),
            message: "The node was low on resource: memory.".into(),
            annotations: Default::default(),
        },
    )
    .await
    .expect("a pod event");

    // Wait until the log has seen all of that, so the check below is not vacuous.
    let expected = [
        Access::new("create", "", "nodes", ""),
        Access::new("patch", "", "nodes/status", ""),
        Access::new("watch", "", "nodes", ""),
        Access::new("create", "coordination.k8s.io", "leases", "kube-node-lease"),
        Access::new("patch", "coordination.k8s.io", "leases", "kube-node-lease"),
        Access::new("create", "", "events", "default"),
        Access::new("create", "", "events", namespace),
        Access::new("watch", "", "pods", ""),
        Access::new("patch", "", "pods/status", namespace),
        Access::new("delete", "", "pods", namespace),
    ];
    let made = || requests_of(emulator, &user.name);
    eventually("the request log holds a node's whole life", || {
        let made = made();
        expected.iter().all(|access| made.contains(access))
    })
    .await;
    supervisor.shutdown(Duration::from_secs(10)).await;

    let refused: Vec<_> = emulator
        .requests()
        .into_iter()
        .filter(|request| request.user == user.name && matches!(request.code, 401 | 403))
        .collect();
    assert!(
        refused.is_empty(),
        "a node identity was refused: {refused:?}"
    );
    let made = made();
    let objects = deploy_objects();
    let rbac = Rbac::of(&objects, &service_account(&objects));
    let denied: Vec<_> = made.iter().filter(|access| !rbac.allows(access)).collect();
    assert!(
        denied.is_empty(),
        "nodepulse made requests deploy/ does not grant: {denied:?}"
    );
    println!("{} distinct requests, all granted:", made.len());
    for access in &made {
        println!("  {access:?}");
    }
}

#[test]
fn the_daemonset_runs_the_node_it_is_on_with_read_only_host_access() {
    let objects = deploy_objects();
    let daemonset: DaemonSet = only(of_kind(&objects, "DaemonSet"), "DaemonSet");
    let account = service_account(&objects);
    let pod = daemonset
        .spec
        .expect("a spec")
        .template
        .spec
        .expect("a pod spec");
    assert_eq!(
        pod.host_network,
        Some(true),
        "addresses come from the host's routes"
    );
    assert_eq!(pod.service_account_name, account.metadata.name);
    assert_eq!(daemonset.metadata.namespace, account.metadata.namespace);
    let container = only(pod.containers.clone(), "container");
    assert!(container.command.is_none(), "the image's entrypoint runs");

    let node_name = container
        .env
        .iter()
        .flatten()
        .find(|env| env.name == "NODE_NAME")
        .expect("a NODE_NAME variable");
    let field = node_name
        .value_from
        .as_ref()
        .and_then(|from| from.field_ref.as_ref())
        .expect("NODE_NAME from the downward API");
    assert_eq!(field.field_path, "spec.nodeName");

    // The arguments parse, as the daemon will parse them, once Kubernetes expands $(NODE_NAME).
    let args: Vec<String> = container.args.clone().expect("arguments");
    assert!(args.iter().any(|arg| arg == "--node-name=$(NODE_NAME)"));
    let expanded = args
        .iter()
        .map(|arg| arg.replace("$(NODE_NAME)", "worker-1"));
    let cli = Cli::try_parse_from(std::iter::once("nodepulse".to_owned()).chain(expanded))
        .unwrap_or_else(|error| panic!("the DaemonSet's arguments are refused: {error}"));
    assert!(cli.kubeconfig.is_none(), "in-cluster config, not a file");

    // The configuration file it names is the ConfigMap's, and the daemon accepts it.
    let config_path = cli.config.clone().expect("--config");
    let mounts = container.volume_mounts.clone().expect("volume mounts");
    let volumes = pod.volumes.clone().expect("volumes");
    let config_mount = mounts
        .iter()
        .find(|mount| config_path.starts_with(&mount.mount_path))
        .expect("--config lies in a mounted volume");
    let config_volume = volumes
        .iter()
        .find(|volume| volume.name == config_mount.name)
        .expect("the mount's volume");
    let config_map_name = &config_volume
        .config_map
        .as_ref()
        .expect("the configuration comes from a ConfigMap")
        .name;
    let config_map = of_kind::<ConfigMap>(&objects, "ConfigMap")
        .into_iter()
        .find(|map| &map.metadata.name.clone().unwrap_or_default() == config_map_name)
        .expect("the ConfigMap is in deploy/");
    let key = config_path
        .strip_prefix(&config_mount.mount_path)
        .expect("under the mount")
        .to_string_lossy()
        .into_owned();
    let text = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(&key))
        .unwrap_or_else(|| panic!("the ConfigMap has no key {key}"));
    let config = Config::parse(text, Source::File(config_path.clone()))
        .unwrap_or_else(|error| panic!("the ConfigMap's configuration is refused: {error}"));

    // Host paths are mounted read-only, and cover what the configuration reads on the host;
    // the one writable mount is the pod's own emptyDir for the kubelet API's certificate.
    for mount in &mounts {
        let scratch = volumes
            .iter()
            .any(|volume| volume.name == mount.name && volume.empty_dir.is_some());
        if scratch {
            assert_eq!(
                Path::new(&mount.mount_path),
                config.cert_dir_on_host(),
                "the only emptyDir holds the self-signed certificate"
            );
            continue;
        }
        assert_eq!(
            mount.read_only,
            Some(true),
            "{} is writable",
            mount.mount_path
        );
    }
    let host_path = |inside: &Path| {
        mounts.iter().any(|mount| {
            inside.starts_with(&mount.mount_path)
                && volumes
                    .iter()
                    .any(|volume| volume.name == mount.name && volume.host_path.is_some())
        })
    };
    let socket = config
        .container_runtime_endpoint
        .strip_prefix("unix://")
        .expect("a unix socket");
    assert!(
        host_path(Path::new(socket)),
        "the CRI socket's directory is mounted"
    );
    assert!(
        host_path(&config.root_dir),
        "rootDir is mounted from the host"
    );
    assert!(
        host_path(Path::new("/sys/fs/cgroup")),
        "the host's cgroups are mounted"
    );

    // The liveness probe asks the debug endpoint the configuration binds.
    let probe = container
        .liveness_probe
        .and_then(|probe| probe.http_get)
        .expect("an HTTP liveness probe");
    assert_eq!(probe.path.as_deref(), Some("/healthz"));
    let port = match probe.port {
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port) => port.to_string(),
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(port) => port,
    };
    assert!(
        config.debug.address.ends_with(&format!(":{port}")),
        "the probe's port {port} is not the debug address {}",
        config.debug.address
    );
}

#[test]
fn the_systemd_unit_runs_a_command_line_the_daemon_accepts() {
    let unit = std::fs::read_to_string(Path::new(DEPLOY).join("nodepulse.service"))
        .expect("deploy/nodepulse.service");
    let value = |key: &str| {
        unit.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("the unit has no {key}="))
            .to_owned()
    };
    let exec = value("ExecStart");
    let mut words = exec.split_whitespace();
    let binary = words.next().expect("a program");
    assert!(binary.starts_with('/'), "systemd needs an absolute path");
    let cli = Cli::try_parse_from(std::iter::once("nodepulse").chain(words))
        .unwrap_or_else(|error| panic!("ExecStart is refused: {error}"));
    assert!(
        cli.kubeconfig.is_some(),
        "a host runs with a kubeconfig file"
    );
    assert!(cli.config.is_some(), "and a configuration file");
    assert!(!cli.standalone);
    assert_eq!(value("Restart"), "always");
    assert!(
        value("RestartPreventExitStatus")
            .split_whitespace()
            .any(|code| code == EXIT_CONFIG.to_string()),
        "a bad configuration must not be restarted in a loop"
    );
}

/// The distinct requests `user` made, in RBAC's terms.
fn requests_of(emulator: &EmulatorHandle, user: &str) -> BTreeSet<Access> {
    emulator
        .requests()
        .into_iter()
        .filter(|request| request.user == user)
        .map(|request| {
            let resource = match request.subresource.as_str() {
                "" => request.resource.clone(),
                sub => format!("{}/{sub}", request.resource),
            };
            Access::new(
                request.verb.as_str(),
                &request.group,
                &resource,
                &request.namespace,
            )
        })
        .collect()
}
