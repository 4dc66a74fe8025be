//! Every field k8s-openapi gives the pod's types has exactly one rule in `pod_fields`: the
//! types' own field lists are read through a serde `Deserializer` that records what
//! `deserialize_struct` is handed, so a field an upgrade adds fails here until it is decided.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Container, EphemeralContainer, Pod, PodSecurityContext, PodSpec, SecurityContext, Volume,
};
use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::json;

use super::pod_fields::{
    CONTAINER, EPHEMERAL_ONLY, FieldRule, POD_SECURITY_CONTEXT, POD_SPEC, SECURITY_CONTEXT,
    UNSUPPORTED_REASON, VOLUME, admit, refused_fields,
};

/// The fields a type's `Deserialize` names, carried out in the error that stops it.
#[derive(Debug)]
struct Fields(Vec<&'static str>);

impl std::fmt::Display for Fields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Fields {}

impl de::Error for Fields {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Fields(Vec::new())
    }
}

/// A deserializer that only records the field list `deserialize_struct` is given.
struct FieldLister;

impl<'de> Deserializer<'de> for FieldLister {
    type Error = Fields;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(fields.to_vec()))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Fields> {
        Err(Fields(Vec::new()))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

fn fields_of<'de, T: Deserialize<'de>>() -> BTreeSet<&'static str> {
    match T::deserialize(FieldLister) {
        Err(Fields(fields)) => {
            assert!(!fields.is_empty(), "the type names no fields");
            fields.into_iter().collect()
        }
        Ok(_) => panic!("the lister decodes nothing"),
    }
}

fn ruled(rules: &[&[(&'static str, FieldRule)]]) -> BTreeSet<&'static str> {
    rules
        .iter()
        .flat_map(|r| r.iter().map(|(name, _)| *name))
        .collect()
}

#[test]
fn every_field_of_the_pods_types_has_exactly_one_rule() {
    let cases: [(&str, BTreeSet<&str>, BTreeSet<&str>); 6] = [
        ("PodSpec", fields_of::<PodSpec>(), ruled(&[POD_SPEC])),
        ("Container", fields_of::<Container>(), ruled(&[CONTAINER])),
        (
            "EphemeralContainer",
            fields_of::<EphemeralContainer>(),
            ruled(&[CONTAINER, EPHEMERAL_ONLY]),
        ),
        (
            "SecurityContext",
            fields_of::<SecurityContext>(),
            ruled(&[SECURITY_CONTEXT]),
        ),
        (
            "PodSecurityContext",
            fields_of::<PodSecurityContext>(),
            ruled(&[POD_SECURITY_CONTEXT]),
        ),
        ("Volume", fields_of::<Volume>(), ruled(&[VOLUME])),
    ];
    for (name, fields, rules) in cases {
        let undecided: Vec<_> = fields.difference(&rules).collect();
        let stale: Vec<_> = rules.difference(&fields).collect();
        assert!(
            undecided.is_empty() && stale.is_empty(),
            "{name}: fields with no rule in pods::pod_fields {undecided:?}; rules for no field {stale:?}"
        );
    }
    for rules in [
        POD_SPEC,
        CONTAINER,
        SECURITY_CONTEXT,
        POD_SECURITY_CONTEXT,
        VOLUME,
    ] {
        let names: Vec<_> = rules.iter().map(|(name, _)| *name).collect();
        let unique: BTreeSet<_> = names.iter().collect();
        assert_eq!(names.len(), unique.len(), "a field ruled twice: {names:?}");
    }
}

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a pod")
}

#[test]
fn a_pod_setting_refused_fields_is_refused_with_each_named() {
    let asks = pod(json!({
        "containers": [{"name": "app", "volumeDevices": [{"name": "disk", "devicePath": "/dev/xvda"}]}],
        "volumes": [{"name": "share", "nfs": {"server": "nas", "path": "/export"}}],
    }));
    let rejection = admit(&asks).expect_err("refused");
    assert_eq!(rejection.reason, UNSUPPORTED_REASON);
    assert_eq!(
        rejection.message,
        "Pod requires features nodepulse does not provide: \
         spec.containers[0].volumeDevices (raw block volumes), \
         spec.volumes[0].nfs (this in-tree volume plugin)"
    );
}

#[test]
fn a_restart_all_containers_rule_is_refused_and_a_restart_rule_is_not() {
    let rule = |action: &str| {
        pod(
            json!({"containers": [{"name": "app", "restartPolicy": "Never", "restartPolicyRules": [
            {"action": action, "exitCodes": {"operator": "In", "values": [42]}}]}]}),
        )
    };
    assert_eq!(admit(&rule("Restart")), Ok(()));
    let rejection = admit(&rule("RestartAllContainers")).expect_err("refused");
    assert_eq!(
        rejection.message,
        "Pod requires features nodepulse does not provide: \
         spec.containers[0].restartPolicyRules[0].action=\"RestartAllContainers\" \
         (restarting all of a pod's containers in place)"
    );
}

#[test]
fn a_not_required_resize_policy_passes_and_a_restart_container_one_is_refused() {
    let policy = |restart: &str| {
        pod(json!({"containers": [{"name": "app", "resizePolicy": [
            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
            {"resourceName": "memory", "restartPolicy": restart}]}]}))
    };
    assert_eq!(admit(&policy("NotRequired")), Ok(()));
    let rejection = admit(&policy("RestartContainer")).expect_err("refused");
    assert_eq!(
        rejection.message,
        "Pod requires features nodepulse does not provide: \
         spec.containers[0].resizePolicy[1].restartPolicy=\"RestartContainer\" \
         (restarting a container to resize it)"
    );
}

#[test]
fn defaults_and_handled_fields_pass() {
    let plain = pod(json!({
        "hostUsers": false,
        "containers": [{"name": "app", "stdin": false, "volumeDevices": [],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }));
    assert_eq!(refused_fields(&plain), Vec::<String>::new());
    assert_eq!(admit(&plain), Ok(()));
}
