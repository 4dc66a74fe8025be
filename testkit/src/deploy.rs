//! deploy/'s manifests as a test reads them: every object of every YAML file, each kind parsed
//! into its k8s-openapi type, and the RBAC they give a ServiceAccount as the RBAC authorizer
//! evaluates it; the DaemonSet's pod, its arguments and the files of its ConfigMap; requests
//! from the emulator's log in RBAC's terms.

use std::{collections::BTreeSet, path::Path};

use clap::Parser as _;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{ConfigMap, Container, PodSpec, ServiceAccount, Volume, VolumeMount},
    rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject},
};
use nodepulse::cli::Cli;
use nodepulse_emulator::EmulatorHandle;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");

/// One request in RBAC's terms; `namespace` is "" for cluster-scoped resources and requests
/// across all namespaces.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub namespace: String,
}

impl Access {
    pub fn new(verb: &str, group: &str, resource: &str, namespace: &str) -> Self {
        Self {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
        }
    }
}

/// Every object of every YAML file in deploy/, with the file it came from.
pub fn deploy_objects() -> Vec<(String, Value)> {
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
pub fn of_kind<T: DeserializeOwned>(objects: &[(String, Value)], kind: &str) -> Vec<T> {
    objects
        .iter()
        .filter(|(_, object)| object["kind"] == kind)
        .map(|(file, object)| {
            serde_json::from_value(object.clone())
                .unwrap_or_else(|error| panic!("{file}: not a valid {kind}: {error}"))
        })
        .collect()
}

pub fn only<T>(mut items: Vec<T>, what: &str) -> T {
    assert_eq!(items.len(), 1, "deploy/ holds exactly one {what}");
    items.remove(0)
}

/// The RBAC of deploy/ as the authorizer sees it, for one service account.
pub struct Rbac {
    /// Rules that apply in every namespace and to cluster-scoped resources.
    cluster: Vec<PolicyRule>,
    /// Rules that apply only inside one namespace.
    namespaced: Vec<(String, PolicyRule)>,
}

impl Rbac {
    pub fn of(objects: &[(String, Value)], account: &ServiceAccount) -> Self {
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

    pub fn allows(&self, access: &Access) -> bool {
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
    pub fn grants(&self) -> BTreeSet<Access> {
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

pub fn service_account(objects: &[(String, Value)]) -> ServiceAccount {
    only(of_kind(objects, "ServiceAccount"), "ServiceAccount")
}

/// The distinct requests `user` made, in RBAC's terms.
pub fn requests_of(emulator: &EmulatorHandle, user: &str) -> BTreeSet<Access> {
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

/// The DaemonSet's pod as deploy/ describes it: its one container, and the files of its mounts.
pub struct DaemonSetPod {
    pub spec: PodSpec,
    pub container: Container,
}

impl DaemonSetPod {
    pub fn of(objects: &[(String, Value)]) -> Self {
        let daemonset: DaemonSet = only(of_kind(objects, "DaemonSet"), "DaemonSet");
        let spec = daemonset
            .spec
            .expect("a spec")
            .template
            .spec
            .expect("a pod spec");
        let container = only(spec.containers.clone(), "container");
        Self { spec, container }
    }

    /// The container's arguments once Kubernetes expands `$(NODE_NAME)` to `node`.
    pub fn args(&self, node: &str) -> Vec<String> {
        let args = self.container.args.clone().expect("arguments");
        assert!(args.iter().any(|arg| arg == "--node-name=$(NODE_NAME)"));
        args.iter()
            .map(|arg| arg.replace("$(NODE_NAME)", node))
            .collect()
    }

    /// The arguments as the daemon parses them.
    pub fn cli(&self, node: &str) -> Cli {
        Cli::try_parse_from(std::iter::once("nodepulse".to_owned()).chain(self.args(node)))
            .unwrap_or_else(|error| panic!("the DaemonSet's arguments are refused: {error}"))
    }

    pub fn mounts(&self) -> Vec<VolumeMount> {
        self.container.volume_mounts.clone().expect("volume mounts")
    }

    /// The mount `path` lies in (the deepest one) and its volume.
    pub fn volume_at(&self, path: &Path) -> Option<(VolumeMount, Volume)> {
        let mount = self
            .mounts()
            .into_iter()
            .filter(|mount| path.starts_with(&mount.mount_path))
            .max_by_key(|mount| mount.mount_path.len())?;
        let volume = self
            .spec
            .volumes
            .iter()
            .flatten()
            .find(|volume| volume.name == mount.name)
            .expect("the mount's volume")
            .clone();
        Some((mount, volume))
    }

    /// The text of the file at `path`, which lies in a ConfigMap volume of deploy/.
    pub fn config_map_file(&self, objects: &[(String, Value)], path: &Path) -> String {
        let (mount, volume) = self
            .volume_at(path)
            .unwrap_or_else(|| panic!("{} lies in no mounted volume", path.display()));
        let name = &volume
            .config_map
            .as_ref()
            .unwrap_or_else(|| panic!("{} comes from no ConfigMap", path.display()))
            .name;
        let config_map = of_kind::<ConfigMap>(objects, "ConfigMap")
            .into_iter()
            .find(|map| map.metadata.name.as_ref() == Some(name))
            .expect("the ConfigMap is in deploy/");
        let key = path
            .strip_prefix(&mount.mount_path)
            .expect("under the mount")
            .to_string_lossy()
            .into_owned();
        config_map
            .data
            .as_ref()
            .and_then(|data| data.get(&key))
            .unwrap_or_else(|| panic!("the ConfigMap {name} has no key {key}"))
            .clone()
    }
}
