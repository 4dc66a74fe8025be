use serde_json::json;

use super::*;
use crate::volume_manager::content::{ContentError, NodeAllocatable};

fn pod(volumes: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
        "spec": {"serviceAccountName": "robot", "containers": [{"name": "app", "image": "i"}],
                 "volumes": volumes},
    }))
    .unwrap()
}

fn cm(name: &str) -> SourceObject {
    SourceObject::ConfigMap {
        namespace: "ns".into(),
        name: name.into(),
    }
}

fn object(pairs: &[(&str, &str)]) -> Fetched {
    Fetched::Object(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect(),
    )
}

fn build(
    volume: serde_json::Value,
    fetched: &[(SourceObject, Fetched)],
) -> Result<Payload, ContentError> {
    let pod = pod(json!([volume]));
    let volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    let fetched: BTreeMap<_, _> = fetched.iter().cloned().collect();
    payload_of(&pod, volume, &fetched, &NodeAllocatable::new())
}

#[test]
fn a_config_map_projects_every_key_or_its_items_with_their_modes() {
    let fetched = [(cm("app"), object(&[("a", "1"), ("b", "2")]))];
    let all = build(
        json!({"name": "cfg", "configMap": {"name": "app"}}),
        &fetched,
    )
    .unwrap();
    assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(all["a"].mode, 0o644);
    let items = build(
        json!({"name": "cfg", "configMap": {"name": "app", "defaultMode": 0o400,
            "items": [{"key": "b", "path": "dir/b.txt"}, {"key": "a", "path": "a", "mode": 0o600}]}}),
        &fetched,
    )
    .unwrap();
    assert_eq!(items["dir/b.txt"].data, b"2");
    assert_eq!((items["dir/b.txt"].mode, items["a"].mode), (0o400, 0o600));
}

#[test]
fn missing_objects_and_keys_fail_unless_optional() {
    let missing = [(cm("missing"), Fetched::NotFound)];
    let error = build(
        json!({"name": "cfg", "configMap": {"name": "missing"}}),
        &missing,
    )
    .unwrap_err();
    assert_eq!(error.to_string(), "configmap \"missing\" not found");
    let optional = build(
        json!({"name": "cfg", "configMap": {"name": "missing", "optional": true}}),
        &missing,
    )
    .unwrap();
    assert!(optional.is_empty());
    let secret = [(
        SourceObject::Secret {
            namespace: "ns".into(),
            name: "s".into(),
        },
        object(&[("a", "1")]),
    )];
    let error = build(
        json!({"name": "s", "secret": {"secretName": "s", "items": [{"key": "x", "path": "x"}]}}),
        &secret,
    )
    .unwrap_err();
    assert_eq!(error.to_string(), "references non-existent secret key: x");
}

#[test]
fn a_projected_volume_collects_its_sources_and_aggregates_errors() {
    let volume = json!({"name": "p", "projected": {"sources": [
        {"configMap": {"name": "app"}},
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}});
    let pod = pod(json!([volume.clone()]));
    let spec_volume = &pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
    let sources = sources_of(&pod, spec_volume);
    let SourceObject::Token(token) = &sources[1] else {
        panic!("{sources:?}");
    };
    assert_eq!(
        (
            token.service_account.as_str(),
            token.expiration_seconds,
            token.pod_uid.as_str()
        ),
        ("robot", 3607, "u1")
    );
    let fetched = [
        (cm("app"), object(&[("k", "v")])),
        (sources[1].clone(), Fetched::Token("jwt".into())),
    ];
    let payload = build(volume.clone(), &fetched).unwrap();
    assert_eq!(payload.keys().collect::<Vec<_>>(), ["k", "ns", "token"]);
    assert_eq!(payload["token"].data, b"jwt");
    let error = build(volume, &[(cm("app"), Fetched::NotFound)]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "[configmap \"app\" not found, failed to fetch token: no token was requested]"
    );
}
