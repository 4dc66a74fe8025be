use super::*;

fn default_account() -> Option<Arc<Value>> {
    Some(Arc::new(json!({"metadata": {"name": "default"}})))
}

fn admitted(mut pod: Value, account: Option<Arc<Value>>) -> Result<Value, String> {
    admit(&mut pod, "ns", |_| account, || "abcde".to_string())?;
    Ok(pod)
}

fn mounts(pod: &Value, list: &str, index: usize) -> Value {
    pod["spec"][list][index]["volumeMounts"].clone()
}

#[test]
fn a_pod_runs_as_default_and_gets_the_token_volume_in_every_container() {
    let pod = admitted(
        json!({"spec": {
            "initContainers": [{"name": "i"}],
            "containers": [{"name": "a", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}, {"name": "b"}],
            "volumes": [{"name": "data", "emptyDir": {}}]}}),
        default_account(),
    )
    .expect("admitted");
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    assert_eq!(pod["spec"]["serviceAccount"], "default");
    let mount = json!({"name": "kube-api-access-abcde", "readOnly": true,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    assert_eq!(mounts(&pod, "initContainers", 0), json!([mount]));
    assert_eq!(
        mounts(&pod, "containers", 0),
        json!([{"name": "data", "mountPath": "/data"}, mount])
    );
    assert_eq!(mounts(&pod, "containers", 1), json!([mount]));
    assert_eq!(
        pod["spec"]["volumes"],
        json!([{"name": "data", "emptyDir": {}}, {"name": "kube-api-access-abcde", "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}])
    );
}

#[test]
fn automount_is_the_pods_choice_then_the_accounts() {
    let off_account = Some(Arc::new(
        json!({"metadata": {"name": "default"}, "automountServiceAccountToken": false}),
    ));
    for (pod_choice, account, mounted) in [
        (Some(false), default_account(), false),
        (None, off_account.clone(), false),
        (Some(true), off_account, true),
        (None, default_account(), true),
    ] {
        let mut pod = json!({"spec": {"containers": [{"name": "c"}]}});
        if let Some(choice) = pod_choice {
            pod["spec"]["automountServiceAccountToken"] = json!(choice);
        }
        let pod = admitted(pod, account).expect("admitted");
        assert_eq!(pod["spec"].get("volumes").is_some(), mounted, "{pod}");
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
    }
}

#[test]
fn a_container_with_its_own_mount_there_and_an_existing_volume_are_kept() {
    let own = json!({"name": "mine", "mountPath": TOKEN_MOUNT_PATH});
    let pod = admitted(
        json!({"spec": {"containers": [{"name": "c", "volumeMounts": [own]}],
            "volumes": [{"name": "mine", "emptyDir": {}}]}}),
        default_account(),
    )
    .expect("admitted");
    assert_eq!(mounts(&pod, "containers", 0), json!([own]));
    assert_eq!(
        pod["spec"]["volumes"],
        json!([{"name": "mine", "emptyDir": {}}])
    );

    let pod = admitted(
        json!({"spec": {"containers": [{"name": "c"}],
            "volumes": [{"name": "kube-api-access-given", "emptyDir": {}}]}}),
        default_account(),
    )
    .expect("admitted");
    assert_eq!(
        mounts(&pod, "containers", 0)[0]["name"],
        "kube-api-access-given"
    );
    assert_eq!(pod["spec"]["volumes"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_missing_account_is_refused_and_a_mirror_pod_is_left_alone() {
    let refused = admitted(
        json!({"spec": {"serviceAccountName": "robot", "containers": [{"name": "c"}]}}),
        None,
    );
    assert_eq!(
        refused,
        Err("error looking up service account ns/robot: serviceaccount \"robot\" not found".into())
    );
    let mirror = json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}},
        "spec": {"containers": [{"name": "c"}]}});
    assert_eq!(admitted(mirror.clone(), None), Ok(mirror));
}

#[test]
fn a_mirror_pod_may_use_no_account_secret_or_token() {
    let refusal = |spec: Value| {
        let pod = json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}},
            "spec": spec});
        admitted(pod, default_account()).err()
    };
    let accounts = "a mirror pod may not reference service accounts";
    let secrets = "a mirror pod may not reference secrets";
    let tokens = "a mirror pod may not use ServiceAccountToken volume projections";
    for (spec, expected) in [
        (json!({"serviceAccountName": "default"}), Some(accounts)),
        (
            json!({"imagePullSecrets": [{"name": "pull"}]}),
            Some(secrets),
        ),
        (
            json!({"ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "s"}}]}]}),
            Some(secrets),
        ),
        (
            json!({"containers": [{"name": "c", "env": [{"name": "E",
                "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
            Some(secrets),
        ),
        (
            json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}]}),
            Some(secrets),
        ),
        (
            json!({"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "s"}}]}}]}),
            Some(secrets),
        ),
        (
            json!({"volumes": [{"name": "v", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}}]}}]}),
            Some(tokens),
        ),
        (
            json!({"imagePullSecrets": [{"name": ""}], "volumes": [{"name": "v", "configMap": {"name": "c"}}]}),
            None,
        ),
    ] {
        assert_eq!(refusal(spec.clone()).as_deref(), expected, "{spec}");
    }
}

#[test]
fn the_accounts_pull_secrets_are_given_to_a_pod_without_any() {
    let account = Some(Arc::new(
        json!({"metadata": {"name": "default"}, "imagePullSecrets": [{"name": "registry"}]}),
    ));
    let pod = admitted(json!({"spec": {"containers": []}}), account.clone()).expect("admitted");
    assert_eq!(
        pod["spec"]["imagePullSecrets"],
        json!([{"name": "registry"}])
    );
    let own = json!({"spec": {"containers": [], "imagePullSecrets": [{"name": "own"}]}});
    let pod = admitted(own, account).expect("admitted");
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "own"}]));
}
