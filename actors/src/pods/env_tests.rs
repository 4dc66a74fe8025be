//! Table tests of the container environment: every source kind, the kubelet's error texts and
//! `$(VAR)` expansion of values, command and args.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Container, Pod},
    apimachinery::pkg::api::resource::Quantity,
};
use serde_json::{Value, json};

use super::env::{
    CREATE_CONTAINER_CONFIG_ERROR, EnvContext, EnvError, EnvSources, SourceError, container_env,
    expand_command_and_args,
};
use super::env_file::EnvFileError;
use super::resource_field::resource_field_value;

/// ConfigMaps and Secrets of namespace `ns`; `broken` answers every call with an error.
struct Objects {
    broken: bool,
}

impl EnvSources for Objects {
    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, SourceError> {
        if self.broken {
            return Err(SourceError(
                "failed to sync configmap cache: timed out waiting for the condition".to_owned(),
            ));
        }
        let data = match (namespace, name) {
            ("ns", "settings") => {
                [("LEVEL", "debug"), ("MODE", "fast"), ("bad.key", "kept")].as_slice()
            }
            ("ns", "more") => [("MODE", "slow")].as_slice(),
            _ => return Ok(None),
        };
        Ok(Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ))
    }

    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, SourceError> {
        match (namespace, name) {
            ("ns", "creds") => Ok(Some(BTreeMap::from([(
                "PASSWORD".to_owned(),
                b"s3cret".to_vec(),
            )]))),
            _ => Ok(None),
        }
    }
}

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "uid-1",
            "labels": {"app": "web", "tier": "front"}, "annotations": {"note": "say \"hi\""}},
        "spec": {"nodeName": "worker-1", "serviceAccountName": "robot", "containers": [
            {"name": "app", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}},
            {"name": "side", "image": "x", "resources": {"limits": {"cpu": "1500m"}}}]}
    }))
    .expect("a Pod")
}

fn container(spec: Value) -> Container {
    let mut container = json!({"name": "app", "image": "x",
        "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}});
    if let (Value::Object(base), Value::Object(extra)) = (&mut container, spec) {
        base.extend(extra);
    }
    serde_json::from_value(container).expect("a Container")
}

fn env_of(spec: Value, objects: &Objects) -> Result<Vec<(String, String)>, EnvError> {
    let pod = pod();
    let allocatable = BTreeMap::from([
        ("cpu".to_owned(), Quantity("4".to_owned())),
        ("memory".to_owned(), Quantity("8Gi".to_owned())),
    ]);
    let context = EnvContext {
        pod: &pod,
        pod_ips: &["10.1.0.5".to_owned(), "fd00::5".to_owned()],
        host_ips: &["192.168.1.10".to_owned()],
        node_allocatable: &allocatable,
        service_env: &BTreeMap::new(),
        volume_paths: &BTreeMap::new(),
    };
    container_env(&context, &container(spec), objects)
}

fn vars(pairs: &[(&str, &str)]) -> Result<Vec<(String, String)>, EnvError> {
    Ok(pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect())
}

fn field(path: &str) -> Value {
    json!({"env": [{"name": "V", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}]})
}

fn resource(resource: &str, divisor: Option<&str>, container: Option<&str>) -> Value {
    json!({"env": [{"name": "V", "valueFrom": {"resourceFieldRef":
        {"resource": resource, "divisor": divisor, "containerName": container}}}]})
}

/// (case, container fields, expected environment)
type EnvCase = (&'static str, Value, Result<Vec<(String, String)>, EnvError>);

#[test]
fn every_source_resolves_as_the_kubelet() {
    let ok = Objects { broken: false };
    let cases: Vec<EnvCase> = vec![
        (
            "envFrom with prefix keeps every key, later sources win",
            json!({"envFrom": [
            {"configMapRef": {"name": "settings"}, "prefix": "APP_"}, {"configMapRef": {"name": "more"}, "prefix": "APP_"}]}),
            vars(&[
                ("APP_LEVEL", "debug"),
                ("APP_MODE", "slow"),
                ("APP_bad.key", "kept"),
            ]),
        ),
        (
            "optional missing envFrom is skipped",
            json!({"envFrom": [{"configMapRef": {"name": "gone", "optional": true}},
            {"secretRef": {"name": "creds"}}]}),
            vars(&[("PASSWORD", "s3cret")]),
        ),
        (
            "env overrides envFrom and expands earlier values",
            json!({"envFrom": [{"configMapRef": {"name": "settings"}}],
            "env": [{"name": "MODE", "value": "$(LEVEL)-$(MODE)-$(LATER)-$$(LEVEL)"}, {"name": "LATER", "value": "x"},
                    {"name": "bad.key", "value": ""}]}),
            vars(&[
                ("LATER", "x"),
                ("LEVEL", "debug"),
                ("MODE", "debug-fast-$(LATER)-$(LEVEL)"),
                ("bad.key", ""),
            ]),
        ),
        (
            "configMapKeyRef and secretKeyRef",
            json!({"env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LEVEL"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}},
            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope", "optional": true}}},
            {"name": "D", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k", "optional": true}}}]}),
            vars(&[("A", "debug"), ("B", "s3cret")]),
        ),
        (
            "missing configmap",
            json!({"envFrom": [{"configMapRef": {"name": "gone"}}]}),
            Err(EnvError::ConfigMapNotFound {
                name: "gone".to_owned(),
            }),
        ),
        (
            "missing secret",
            json!({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}]}),
            Err(EnvError::SecretNotFound {
                name: "gone".to_owned(),
            }),
        ),
        (
            "missing configmap key",
            json!({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "k"}}}]}),
            Err(EnvError::ConfigMapKeyNotFound {
                key: "k".to_owned(),
                namespace: "ns".to_owned(),
                name: "settings".to_owned(),
            }),
        ),
        (
            "missing secret key",
            json!({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "k"}}}]}),
            Err(EnvError::SecretKeyNotFound {
                key: "k".to_owned(),
                namespace: "ns".to_owned(),
                name: "creds".to_owned(),
            }),
        ),
        (
            "metadata.name",
            field("metadata.name"),
            vars(&[("V", "web")]),
        ),
        (
            "metadata.namespace",
            field("metadata.namespace"),
            vars(&[("V", "ns")]),
        ),
        (
            "metadata.uid",
            field("metadata.uid"),
            vars(&[("V", "uid-1")]),
        ),
        (
            "a label",
            field("metadata.labels['app']"),
            vars(&[("V", "web")]),
        ),
        (
            "a missing annotation is empty",
            field("metadata.annotations['nope']"),
            vars(&[("V", "")]),
        ),
        (
            "all labels",
            field("metadata.labels"),
            vars(&[("V", "app=\"web\"\ntier=\"front\"")]),
        ),
        (
            "all annotations, quoted as Go",
            field("metadata.annotations"),
            vars(&[("V", "note=\"say \\\"hi\\\"\"")]),
        ),
        (
            "spec.nodeName",
            field("spec.nodeName"),
            vars(&[("V", "worker-1")]),
        ),
        (
            "spec.serviceAccountName",
            field("spec.serviceAccountName"),
            vars(&[("V", "robot")]),
        ),
        (
            "status.podIP",
            field("status.podIP"),
            vars(&[("V", "10.1.0.5")]),
        ),
        (
            "status.podIPs",
            field("status.podIPs"),
            vars(&[("V", "10.1.0.5,fd00::5")]),
        ),
        (
            "status.hostIP",
            field("status.hostIP"),
            vars(&[("V", "192.168.1.10")]),
        ),
        (
            "status.hostIPs",
            field("status.hostIPs"),
            vars(&[("V", "192.168.1.10")]),
        ),
        (
            "unknown field",
            field("spec.nope"),
            Err(EnvError::FieldPath(
                "field label not supported: spec.nope".to_owned(),
            )),
        ),
        (
            "no extractor",
            field("status.phase"),
            Err(EnvError::FieldPath(
                "unsupported fieldPath: status.phase".to_owned(),
            )),
        ),
        (
            "subscript elsewhere",
            field("spec.nodeName['x']"),
            Err(EnvError::FieldPath(
                "field label does not support subscript: spec.nodeName['x']".to_owned(),
            )),
        ),
        (
            "requests.cpu in millicores",
            resource("requests.cpu", Some("1m"), None),
            vars(&[("V", "250")]),
        ),
        (
            "requests.cpu rounds up to cores",
            resource("requests.cpu", None, None),
            vars(&[("V", "1")]),
        ),
        (
            "limits.memory with divisor",
            resource("limits.memory", Some("1Mi"), None),
            vars(&[("V", "128")]),
        ),
        (
            "unset cpu limit is the node's allocatable",
            resource("limits.cpu", None, None),
            vars(&[("V", "4")]),
        ),
        (
            "another container's limit",
            resource("limits.cpu", Some("1m"), Some("side")),
            vars(&[("V", "1500")]),
        ),
        (
            "unset request is zero",
            resource("requests.ephemeral-storage", None, None),
            vars(&[("V", "0")]),
        ),
        (
            "unknown container",
            resource("limits.cpu", None, Some("nope")),
            Err(EnvError::ContainerNotFound("nope".to_owned())),
        ),
        (
            "unsupported resource",
            resource("limits.gpu", None, None),
            Err(EnvError::UnsupportedResource("limits.gpu".to_owned())),
        ),
    ];
    for (name, spec, expected) in cases {
        assert_eq!(env_of(spec, &ok), expected, "{name}");
    }
}

#[test]
fn errors_read_as_the_kubelets_create_container_config_error() {
    let cases = [
        (
            EnvError::ConfigMapNotFound {
                name: "x".to_owned(),
            },
            "configmap \"x\" not found",
        ),
        (
            EnvError::SecretNotFound {
                name: "x".to_owned(),
            },
            "secret \"x\" not found",
        ),
        (
            EnvError::ConfigMapKeyNotFound {
                key: "k".to_owned(),
                namespace: "ns".to_owned(),
                name: "x".to_owned(),
            },
            "couldn't find key k in ConfigMap ns/x",
        ),
        (
            EnvError::SecretKeyNotFound {
                key: "k".to_owned(),
                namespace: "ns".to_owned(),
                name: "x".to_owned(),
            },
            "couldn't find key k in Secret ns/x",
        ),
        (
            EnvError::UnsupportedResource("limits.gpu".to_owned()),
            "unsupported container resource : limits.gpu",
        ),
        (
            EnvError::ContainerNotFound("c".to_owned()),
            "container c not found",
        ),
        (
            EnvError::FileKeyRefVolumeNotFound("config".to_owned()),
            "cannot find the volume \"config\" referenced by FileKeyRef",
        ),
        (
            EnvError::EnvFile(EnvFileError::Unclosed { line: 3 }),
            "couldn't parse env file",
        ),
        (
            EnvError::EnvFileKeyNotFound {
                key: "K".to_owned(),
                path: "/v/config.env".to_owned(),
            },
            "environment variable key \"K\" not found in file \"/v/config.env\"",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
        let event = error.event();
        assert!(event.warning);
        assert_eq!(
            (event.reason.as_str(), event.message),
            ("Failed", format!("Error: {text}"))
        );
    }
    assert_eq!(CREATE_CONTAINER_CONFIG_ERROR, "CreateContainerConfigError");
    let broken = env_of(
        json!({"envFrom": [{"configMapRef": {"name": "settings", "optional": true}}]}),
        &Objects { broken: true },
    );
    assert_eq!(
        broken.map_err(|error| error.to_string()),
        Err("failed to sync configmap cache: timed out waiting for the condition".to_owned()),
        "an unreachable cache fails even an optional reference"
    );
}

#[test]
fn command_and_args_expand_against_the_final_environment() {
    let container = container(
        json!({"command": ["sh", "-c", "echo $(GREETING) $(MISSING) $$(GREETING)"],
        "args": ["$(NAME)"]}),
    );
    let env = vec![
        ("GREETING".to_owned(), "hello".to_owned()),
        ("NAME".to_owned(), "web".to_owned()),
    ];
    let (command, args) = expand_command_and_args(&container, &env);
    assert_eq!(command, ["sh", "-c", "echo hello $(MISSING) $(GREETING)"]);
    assert_eq!(args, ["web"]);
}

#[test]
fn service_variables_expand_after_the_containers_own_and_fill_only_unset_names() {
    let pod = pod();
    let services = BTreeMap::from([
        ("KUBERNETES_SERVICE_HOST".to_owned(), "10.0.0.1".to_owned()),
        ("DB_SERVICE_HOST".to_owned(), "10.0.0.7".to_owned()),
    ]);
    let context = EnvContext {
        pod: &pod,
        pod_ips: &[],
        host_ips: &[],
        node_allocatable: &BTreeMap::new(),
        service_env: &services,
        volume_paths: &BTreeMap::new(),
    };
    let spec = json!({"env": [
        {"name": "URL", "value": "http://$(DB_SERVICE_HOST):80"},
        {"name": "DB_SERVICE_HOST", "value": "mine"},
    ]});
    let env = container_env(&context, &container(spec), &Objects { broken: false });
    assert_eq!(
        env,
        vars(&[
            ("DB_SERVICE_HOST", "mine"),
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("URL", "http://10.0.0.7:80"),
        ])
    );
}

fn file_key(name: &str, volume: &str, key: &str, optional: Option<bool>) -> Value {
    json!({"name": name, "valueFrom": {"fileKeyRef":
        {"volumeName": volume, "path": "config.env", "key": key, "optional": optional}}})
}

#[test]
fn file_keys_read_the_volumes_file_when_the_environment_is_built() {
    let volume = tempfile::tempdir().expect("dir");
    let pod = pod();
    let volume_paths = BTreeMap::from([("config".to_owned(), volume.path().to_owned())]);
    let context = EnvContext {
        pod: &pod,
        pod_ips: &[],
        host_ips: &[],
        node_allocatable: &BTreeMap::new(),
        service_env: &BTreeMap::new(),
        volume_paths: &volume_paths,
    };
    let env_of = |variables: Value| {
        let spec = json!({"env": variables});
        container_env(&context, &container(spec), &Objects { broken: false })
    };
    let wanted = json!([file_key("CONFIG_1", "config", "CONFIG_1", None)]);
    assert_eq!(
        env_of(wanted.clone()),
        Err(EnvError::EnvFile(EnvFileError::Open {
            path: volume.path().join("config.env").display().to_string(),
            reason: "No such file or directory (os error 2)".to_owned(),
        })),
        "no file yet: not even an optional key is skipped"
    );
    std::fs::write(
        volume.path().join("config.env"),
        "CONFIG_1='value1'\nEMPTY=''\nCONFIG_2='value2'\n",
    )
    .expect("write");
    assert_eq!(
        env_of(json!([
            file_key("CONFIG_1", "config", "CONFIG_1", None),
            file_key("RENAMED", "config", "CONFIG_2", Some(false)),
            file_key("MISSING", "config", "MISSING", Some(true)),
            file_key("EMPTY", "config", "EMPTY", Some(true)),
            {"name": "URL", "value": "x-$(CONFIG_1)"},
        ])),
        vars(&[
            ("CONFIG_1", "value1"),
            ("RENAMED", "value2"),
            ("URL", "x-value1")
        ]),
        "an optional key that is missing or empty leaves its variable unset"
    );
    assert_eq!(
        env_of(json!([file_key("MISSING", "config", "MISSING", None)])),
        Err(EnvError::EnvFileKeyNotFound {
            key: "MISSING".to_owned(),
            path: volume.path().join("config.env").display().to_string(),
        })
    );
    assert_eq!(
        env_of(json!([file_key("X", "other", "CONFIG_1", Some(true))])),
        Err(EnvError::FileKeyRefVolumeNotFound("other".to_owned()))
    );
    std::fs::write(volume.path().join("config.env"), "CONFIG_1=value1\n").expect("write");
    assert_eq!(
        env_of(wanted),
        Err(EnvError::EnvFile(EnvFileError::Format {
            line: 1,
            problem: "value must be enclosed in single quotes"
        }))
    );
}

#[test]
fn an_unset_limit_reads_as_the_pod_level_limit_then_as_the_nodes_allocatable() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {
            "resources": {"requests": {"cpu": "250m", "memory": "32Mi"},
                "limits": {"cpu": "1250m", "memory": "0"}},
            "initContainers": [{"name": "init", "image": "x"}],
            "containers": [{"name": "app", "image": "x"},
                {"name": "zero", "image": "x", "resources": {"limits": {"cpu": "0"}}}]}
    }))
    .expect("a Pod");
    let allocatable = BTreeMap::from([
        ("cpu".to_owned(), Quantity("4".to_owned())),
        ("memory".to_owned(), Quantity("8Gi".to_owned())),
        ("ephemeral-storage".to_owned(), Quantity("100Gi".to_owned())),
    ]);
    let context = EnvContext {
        pod: &pod,
        pod_ips: &[],
        host_ips: &[],
        node_allocatable: &allocatable,
        service_env: &BTreeMap::new(),
        volume_paths: &BTreeMap::new(),
    };
    let app = &pod.spec.as_ref().expect("a spec").containers[0];
    let value = |resource: &str, divisor: Option<&str>, container: Option<&str>| {
        let spec = serde_json::from_value(json!({"resource": resource, "divisor": divisor,
            "containerName": container}))
        .expect("a selector");
        resource_field_value(&context, app, &spec)
    };
    let cases = [
        ("limits.cpu", None, None, "2", "the pod's 1250m, rounded up"),
        ("limits.cpu", Some("1m"), None, "1250", "in millicores"),
        (
            "limits.memory",
            None,
            None,
            "8589934592",
            "a zero pod limit is unset",
        ),
        (
            "limits.ephemeral-storage",
            Some("1Gi"),
            None,
            "100",
            "not a pod-level resource",
        ),
        (
            "requests.cpu",
            Some("1m"),
            None,
            "0",
            "requests are never defaulted",
        ),
        (
            "limits.cpu",
            Some("1m"),
            Some("zero"),
            "1250",
            "a zero limit is unset",
        ),
        (
            "limits.cpu",
            None,
            Some("init"),
            "0",
            "a named init container is not defaulted",
        ),
    ];
    for (resource, divisor, container, expected, why) in cases {
        assert_eq!(
            value(resource, divisor, container),
            Ok(expected.to_owned()),
            "{resource} of {container:?}: {why}"
        );
    }
    let init = &pod
        .spec
        .as_ref()
        .expect("a spec")
        .init_containers
        .as_ref()
        .expect("init")[0];
    let spec = serde_json::from_value(json!({"resource": "limits.cpu"})).expect("a selector");
    assert_eq!(
        resource_field_value(&context, init, &spec),
        Ok("2".to_owned()),
        "the init container's own variable is defaulted"
    );
}
