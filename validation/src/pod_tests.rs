use serde_json::{Value, json};

use super::*;

fn pod() -> Value {
    json!({
        "metadata": {"name": "web-node-1", "namespace": "kube-system", "uid": "0a1b"},
        "spec": {
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "hostname": "web",
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "host", "hostPath": {"path": "/var/lib/web", "type": "DirectoryOrCreate"}},
            ],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "ports": [{"containerPort": 8080, "hostPort": 80, "protocol": "TCP"}],
                "env": [{"name": "my.var-1", "value": "x"}],
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data", "subPath": "a/b"},
                    {"name": "host", "mountPath": "/host"},
                ],
            }],
        },
    })
}

fn rendered(pod: &Value) -> Vec<String> {
    validate_pod_create(pod)
        .iter()
        .map(FieldError::render)
        .collect()
}

/// `pod()` with the JSON at `pointer` replaced by `value`.
fn with(pointer: &str, value: Value) -> Value {
    let mut pod = pod();
    *pod.pointer_mut(pointer).expect("a field of the valid pod") = value;
    pod
}

#[test]
fn a_valid_pod_has_no_errors() {
    assert_eq!(rendered(&pod()), Vec::<String>::new());
}

#[test]
fn names_that_become_paths_must_be_dns_names() {
    let cases = [
        (
            "/metadata/name",
            json!("../etc"),
            "metadata.name: Invalid value: \"../etc\": a lowercase RFC 1123 subdomain",
        ),
        (
            "/metadata/namespace",
            json!("a/b"),
            "metadata.namespace: Invalid value: \"a/b\": a lowercase RFC 1123 label",
        ),
        (
            "/metadata/uid",
            json!(".."),
            "metadata.uid: Invalid value: \"..\": must be usable as a single path segment",
        ),
        (
            "/metadata/uid",
            json!("a/b"),
            "metadata.uid: Invalid value: \"a/b\"",
        ),
        (
            "/spec/containers/0/name",
            json!("App"),
            "spec.containers[0].name: Invalid value: \"App\": a lowercase RFC 1123 label",
        ),
        (
            "/spec/containers/0/name",
            json!("init"),
            "spec.containers[0].name: Duplicate value: \"init\"",
        ),
        (
            "/spec/volumes/0/name",
            json!("../x"),
            "spec.volumes[0].name: Invalid value: \"../x\"",
        ),
        (
            "/spec/volumes/1/name",
            json!("data"),
            "spec.volumes[1].name: Duplicate value: \"data\"",
        ),
        (
            "/spec/hostname",
            json!("a.b"),
            "spec.hostname: Invalid value: \"a.b\"",
        ),
    ];
    for (pointer, value, expected) in cases {
        let errors = rendered(&with(pointer, value));
        assert!(
            errors.iter().any(|error| error.starts_with(expected)),
            "{pointer}: {errors:?}"
        );
    }
    let long = "a".repeat(64);
    let errors = rendered(&with("/metadata/namespace", json!(long)));
    assert!(
        errors[0].ends_with("must be no more than 63 characters"),
        "{errors:?}"
    );
}

#[test]
fn what_reaches_the_runtime_is_checked() {
    let cases = [
        (
            "/spec/containers/0/image",
            json!(" busybox"),
            "spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
        ),
        (
            "/spec/initContainers/0/image",
            json!(""),
            "spec.initContainers[0].image: Required value",
        ),
        (
            "/spec/containers/0/ports/0/containerPort",
            json!(0),
            "spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
        (
            "/spec/containers/0/ports/0/hostPort",
            json!(70000),
            "spec.containers[0].ports[0].hostPort: Invalid value: 70000",
        ),
        (
            "/spec/containers/0/ports/0/protocol",
            json!("ICMP"),
            "spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ),
        (
            "/spec/containers/0/env/0/name",
            json!("A=B"),
            "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name",
        ),
        (
            "/spec/restartPolicy",
            json!("Sometimes"),
            "spec.restartPolicy: Unsupported value: \"Sometimes\"",
        ),
        (
            "/spec/dnsPolicy",
            json!("Google"),
            "spec.dnsPolicy: Unsupported value: \"Google\"",
        ),
        (
            "/spec/volumes/1/hostPath/path",
            json!(""),
            "spec.volumes[1].hostPath.path: Required value",
        ),
        (
            "/spec/volumes/0",
            json!({"name": "data", "emptyDir": {}, "hostPath": {"path": "/x"}}),
            "spec.volumes[0].emptyDir: Forbidden: may not specify more than 1 volume type",
        ),
    ];
    for (pointer, value, expected) in cases {
        let errors = rendered(&with(pointer, value));
        assert!(
            errors.iter().any(|error| error.starts_with(expected)),
            "{pointer}: {errors:?}"
        );
    }
}

#[test]
fn mounts_name_a_volume_a_unique_path_and_a_sub_path_below_it() {
    let mounts = "/spec/containers/0/volumeMounts";
    let cases = [
        (
            json!([{"name": "gone", "mountPath": "/g"}]),
            "spec.containers[0].volumeMounts[0].name: Not found: \"gone\"",
        ),
        (
            json!([{"name": "data", "mountPath": ""}]),
            "spec.containers[0].volumeMounts[0].mountPath: Required value",
        ),
        (
            json!([{"name": "data", "mountPath": "/d"}, {"name": "host", "mountPath": "/d"}]),
            "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "subPath": "/etc"}]),
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"/etc\": must be a relative path",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "subPath": "a/../../etc"}]),
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"a/../../etc\": must not contain '..'",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "subPathExpr": "$(POD)/.."}]),
            "spec.containers[0].volumeMounts.subPathExpr: Invalid value",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "subPath": "/abs/../x"}]),
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"/abs/../x\": must not contain '..'",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "subPath": "a", "subPathExpr": "$(X)"}]),
            "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"$(X)\": subPathExpr and subPath are mutually exclusive",
        ),
    ];
    for (value, expected) in cases {
        let errors = rendered(&with(mounts, value));
        assert!(
            errors.iter().any(|error| error.starts_with(expected)),
            "{expected}: {errors:?}"
        );
    }
    // `..` inside a name is no climb.
    assert!(
        rendered(&with(
            mounts,
            json!([{"name": "data", "mountPath": "/d", "subPath": "a..b/c"}])
        ))
        .is_empty()
    );
}

#[test]
fn a_volume_without_a_source_is_left_to_defaulting() {
    // The API server (and the kubelet's decoding) makes it an emptyDir before validating.
    assert!(rendered(&with("/spec/volumes/0", json!({"name": "data"}))).is_empty());
}

#[test]
fn a_file_key_ref_names_an_empty_dir_of_the_pod_a_key_and_a_path_that_stays_below() {
    let reference = |volume: &str, path: &str, key: &str| {
        json!([{"name": "V", "valueFrom": {"fileKeyRef":
            {"volumeName": volume, "path": path, "key": key}}}])
    };
    let with_env = |env: Value| {
        let mut pod = pod();
        pod["spec"]["initContainers"][0]["env"] = env;
        pod["spec"]["volumes"]
            .as_array_mut()
            .expect("volumes")
            .push(json!({"name": "plain"}));
        pod
    };
    assert_eq!(
        rendered(&with_env(reference("data", "config.env", "CONFIG_1"))),
        Vec::<String>::new()
    );
    assert_eq!(
        rendered(&with_env(reference("plain", "a/config.env", "A.B-c"))),
        Vec::<String>::new(),
        "a volume of no source is an emptyDir"
    );
    let at = "spec.initContainers[0].env[0].valueFrom.fileKeyRef";
    let cases = [
        (
            reference("nonexistent-volume", "config.env", "K"),
            vec![format!(
                "{at}.volumeName: Not found: \"nonexistent-volume\""
            )],
        ),
        (
            reference("host", "config.env", "K"),
            vec![format!(
                "{at}.volumeName: Invalid value: \"host\": referenced volume must be of type emptyDir"
            )],
        ),
        (
            reference("data", "../config.env", "K=1"),
            vec![
                format!(
                    "{at}.key: Invalid value: \"K=1\": a valid environment variable name must consist only of printable ASCII characters other than '='"
                ),
                format!("{at}.path: Invalid value: \"../config.env\": must not contain '..'"),
            ],
        ),
        (
            reference("", "", ""),
            vec![
                format!("{at}.key: Required value"),
                format!("{at}.volumeName: Required value"),
                format!("{at}.path: Required value"),
                format!("{at}.volumeName: Not found: \"\""),
            ],
        ),
    ];
    for (env, expected) in cases {
        assert_eq!(rendered(&with_env(env.clone())), expected, "{env}");
    }
    let mut ephemeral = pod();
    ephemeral["spec"]["ephemeralContainers"] = json!([{"name": "debugger", "image": "busybox",
        "env": reference("host", "config.env", "K")}]);
    assert_eq!(
        rendered(&ephemeral),
        [
            "spec.ephemeralContainers[0].env[0].valueFrom.fileKeyRef.volumeName: Invalid value: \"host\": referenced volume must be of type emptyDir"
        ]
    );
}
