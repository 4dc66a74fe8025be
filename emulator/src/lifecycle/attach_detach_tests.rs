//! The attach/detach plan, from stored objects to writes.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;

const DRIVER: &str = "csi.example.com";

struct Objects {
    pods: Vec<Value>,
    claims: Vec<Value>,
    volumes: Vec<Value>,
    csi_drivers: Vec<Value>,
    csi_nodes: Vec<Value>,
    nodes: Vec<Value>,
    attachments: Vec<Value>,
    created: BTreeSet<String>,
}

impl Objects {
    /// A managed node `n1`, a pod on it using claim `data` bound to CSI PV `pv-1`.
    fn new() -> Self {
        Objects {
            pods: vec![json!({"metadata": {"name": "p", "namespace": "apps"},
                "spec": {"nodeName": "n1", "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]},
                "status": {"phase": "Pending"}})],
            claims: vec![json!({"metadata": {"name": "data", "namespace": "apps"},
                "spec": {"volumeName": "pv-1"}, "status": {"phase": "Bound"}})],
            volumes: vec![json!({"metadata": {"name": "pv-1"},
                "spec": {"csi": {"driver": DRIVER, "volumeHandle": "h1"}}})],
            csi_drivers: vec![
                json!({"metadata": {"name": DRIVER}, "spec": {"attachRequired": true}}),
            ],
            csi_nodes: vec![
                json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": DRIVER, "nodeID": "id-1"}]}}),
            ],
            nodes: vec![
                json!({"metadata": {"name": "n1", "annotations": {CONTROLLER_MANAGED_ANNOTATION: "true"}}, "status": {}}),
            ],
            attachments: Vec::new(),
            created: BTreeSet::new(),
        }
    }

    fn plan(&self, attacher: bool) -> Vec<Action> {
        plan(&World {
            pods: &self.pods,
            claims: &self.claims,
            volumes: &self.volumes,
            csi_drivers: &self.csi_drivers,
            csi_nodes: &self.csi_nodes,
            nodes: &self.nodes,
            attachments: &self.attachments,
            created: &self.created,
            attacher,
        })
    }

    fn attachment(&mut self, attached: bool) -> String {
        let name = attachment_name("h1", DRIVER, "n1");
        self.attachments.push(json!({"metadata": {"name": name},
            "spec": {"attacher": DRIVER, "nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": attached}}));
        self.created.insert(name.clone());
        name
    }
}

fn unique() -> String {
    unique_name(DRIVER, "h1")
}

#[test]
fn a_pod_on_a_managed_node_gets_its_volume_attachment() {
    let objects = Objects::new();
    assert_eq!(
        objects.plan(false),
        [Action::CreateAttachment {
            name: attachment_name("h1", DRIVER, "n1"),
            driver: DRIVER.to_owned(),
            node: "n1".to_owned(),
            pv: "pv-1".to_owned(),
        }]
    );
    assert!(attachment_name("h1", DRIVER, "n1").starts_with("csi-"));
    assert_eq!(attachment_name("h1", DRIVER, "n1").len(), 68);
}

#[test]
fn nothing_is_attached_for_unmanaged_nodes_unbound_claims_or_drivers_without_attach() {
    let mut unmanaged = Objects::new();
    unmanaged.nodes[0]["metadata"]["annotations"] = json!({});
    assert_eq!(unmanaged.plan(false), []);
    let mut unbound = Objects::new();
    unbound.claims[0]["status"]["phase"] = json!("Pending");
    assert_eq!(unbound.plan(false), []);
    let mut no_attach = Objects::new();
    no_attach.csi_drivers[0]["spec"]["attachRequired"] = json!(false);
    assert_eq!(no_attach.plan(false), []);
    let mut finished = Objects::new();
    finished.pods[0]["status"]["phase"] = json!("Succeeded");
    assert_eq!(finished.plan(false), []);
}

#[test]
fn a_missing_csidriver_object_means_attach() {
    let mut objects = Objects::new();
    objects.csi_drivers.clear();
    assert!(matches!(
        objects.plan(false)[..],
        [Action::CreateAttachment { .. }]
    ));
}

#[test]
fn an_attached_volume_is_listed_in_the_nodes_volumes_attached() {
    let mut objects = Objects::new();
    objects.attachment(true);
    assert_eq!(
        objects.plan(false),
        [Action::SetVolumesAttached {
            node: "n1".to_owned(),
            volumes: vec![json!({"name": unique(), "devicePath": ""})],
        }]
    );
    objects.nodes[0]["status"]["volumesAttached"] = json!([{"name": unique(), "devicePath": ""}]);
    assert_eq!(objects.plan(false), [], "listed already: no write");
}

#[test]
fn a_volume_still_in_use_is_not_detached_after_its_pod_went() {
    let mut objects = Objects::new();
    let name = objects.attachment(true);
    objects.nodes[0]["status"]["volumesAttached"] = json!([{"name": unique(), "devicePath": ""}]);
    objects.nodes[0]["status"]["volumesInUse"] = json!([unique()]);
    objects.pods.clear();
    assert_eq!(objects.plan(false), [], "in use: stays attached and listed");

    objects.nodes[0]["status"]["volumesInUse"] = json!([]);
    assert_eq!(
        objects.plan(false),
        [
            Action::SetVolumesAttached {
                node: "n1".to_owned(),
                volumes: Vec::new()
            },
            Action::DeleteAttachment { name },
        ],
        "the node stops listing it before the attachment goes"
    );
}

#[test]
fn attachments_the_controller_never_made_are_left_alone() {
    let mut objects = Objects::new();
    objects.pods.clear();
    objects.attachment(true);
    objects.created.clear();
    assert_eq!(objects.plan(false), []);
}

#[test]
fn the_emulated_attacher_attaches_once_csinode_has_the_drivers_node_id() {
    let mut objects = Objects::new();
    let name = objects.attachment(false);
    assert_eq!(
        objects.plan(true),
        [Action::MarkAttached { name: name.clone() }]
    );
    objects.csi_nodes.clear();
    assert_eq!(
        objects.plan(true),
        [Action::SetAttachError {
            name,
            message: "CSINode n1 does not contain driver csi.example.com".to_owned(),
        }]
    );
    objects.csi_drivers.clear();
    assert!(
        !objects.plan(true).iter().any(|action| matches!(
            action,
            Action::MarkAttached { .. } | Action::SetAttachError { .. }
        )),
        "no CSIDriver object: no attacher deployed"
    );
}
