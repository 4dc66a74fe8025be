//! [`CsiNodeApi`] over kube-rs, as the kubelet's `nodeinfomanager` writes: the Node's
//! `csi.volume.kubernetes.io/nodeid` annotation and topology labels in a merge patch carrying
//! the read `resourceVersion` (a concurrent writer gets a 409 and the caller's backoff reads
//! again), and the driver's entry in CSINode by read-modify-replace (a CSINode owned by an
//! earlier Node of the same name is deleted and made afresh). All through the main,
//! rate-limited client.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::{
    api::{
        core::v1::Node,
        storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodepulse_actors::ports::{
    ApiError, ApiResult, CsiDriverRegistration, CsiNodeApi, NODE_ID_ANNOTATION,
};
use serde_json::json;

use super::{KubeApi, timed};

/// The annotation's JSON map with `driver` set to `node_id`; an unreadable value is replaced,
/// as the kubelet does.
pub fn with_driver_node_id(annotation: Option<&str>, driver: &str, node_id: &str) -> String {
    let mut map = parse_map(annotation);
    map.insert(driver.to_owned(), node_id.to_owned());
    serde_json::to_string(&map).unwrap_or_default()
}

/// The annotation's JSON map without `driver`; `None` when nothing is left.
pub fn without_driver(annotation: Option<&str>, driver: &str) -> Option<String> {
    let mut map = parse_map(annotation);
    map.remove(driver);
    (!map.is_empty()).then(|| serde_json::to_string(&map).unwrap_or_default())
}

fn parse_map(annotation: Option<&str>) -> BTreeMap<String, String> {
    annotation
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// A driver's topology label that the Node already has with another value (the driver or the
/// label must change).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "detected topology value collision: driver reported {key:?}:{value:?} but existing label is {key:?}:{existing:?}"
)]
pub struct TopologyCollision {
    pub key: String,
    pub value: String,
    pub existing: String,
}

/// The topology labels to add, or the kubelet's collision error when the Node already has
/// one of the keys with another value.
pub fn topology_labels(
    node: &Node,
    topology: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, TopologyCollision> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, value) in topology {
        if let Some(existing) = labels.get(key)
            && existing != value
        {
            return Err(TopologyCollision {
                key: key.clone(),
                value: value.clone(),
                existing: existing.clone(),
            });
        }
    }
    Ok(topology.clone())
}

fn node_id_annotation(node: &Node) -> Option<&str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(NODE_ID_ANNOTATION))
        .map(String::as_str)
}

/// Reads Node `name`, asks `metadata` what to change in its metadata (`None`: nothing), and
/// merge-patches that with the read's `resourceVersion`, so a concurrent writer's change is
/// never overwritten (a conflict is the caller's to retry).
async fn patch_node_metadata(
    api: &Api<Node>,
    name: &str,
    timeout: std::time::Duration,
    metadata: impl FnOnce(&Node) -> ApiResult<Option<serde_json::Value>>,
) -> ApiResult<()> {
    let current = timed(timeout, api.get(name)).await?;
    let Some(mut metadata) = metadata(&current)? else {
        return Ok(());
    };
    metadata["resourceVersion"] = json!(current.metadata.resource_version);
    let patch = json!({ "metadata": metadata });
    timed(
        timeout,
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map(|_| ())
}

/// The CSINode entry for a registration.
pub fn driver_entry(registration: &CsiDriverRegistration) -> CSINodeDriver {
    CSINodeDriver {
        name: registration.driver.clone(),
        node_id: registration.node_id.clone(),
        topology_keys: (!registration.topology.is_empty())
            .then(|| registration.topology.keys().cloned().collect()),
        allocatable: registration
            .max_volumes
            .map(|count| VolumeNodeResources { count: Some(count) }),
    }
}

/// Whether `csi_node` belongs to the Node whose UID is `node_uid` (an object without a Node
/// owner is taken as this node's, as one made by hand would be).
fn owned_by(csi_node: &CSINode, node_uid: &str) -> bool {
    csi_node
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|owner| owner.kind == "Node")
        .all(|owner| owner.uid == node_uid)
}

async fn create_csi_node(
    api: &Api<CSINode>,
    name: &str,
    owner_uid: &str,
    entry: CSINodeDriver,
    timeout: std::time::Duration,
) -> ApiResult<()> {
    let csi_node = CSINode {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Node".to_owned(),
                name: name.to_owned(),
                uid: owner_uid.to_owned(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: CSINodeSpec {
            drivers: vec![entry],
        },
    };
    timed(timeout, api.create(&PostParams::default(), &csi_node))
        .await
        .map(|_| ())
}

/// `spec.drivers` with `entry` in place of any entry of the same name.
fn replace_driver(drivers: &mut Vec<CSINodeDriver>, entry: CSINodeDriver) {
    drivers.retain(|driver| driver.name != entry.name);
    drivers.push(entry);
}

impl CsiNodeApi for KubeApi {
    fn add_driver_to_node(
        &self,
        node: &str,
        registration: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (name, registration) = (node.to_owned(), registration.clone());
        Box::pin(async move {
            let api = Api::<Node>::all(client.await);
            patch_node_metadata(&api, &name, timeout, |current| {
                let labels =
                    topology_labels(current, &registration.topology).map_err(|collision| {
                        ApiError::Refused {
                            code: 422,
                            reason: "TopologyCollision".to_owned(),
                            message: collision.to_string(),
                        }
                    })?;
                let annotation = node_id_annotation(current);
                let ids =
                    with_driver_node_id(annotation, &registration.driver, &registration.node_id);
                Ok(Some(json!({
                    "annotations": { NODE_ID_ANNOTATION: ids },
                    "labels": labels,
                })))
            })
            .await
        })
    }

    fn add_driver_to_csi_node(
        &self,
        node: &str,
        registration: &CsiDriverRegistration,
    ) -> BoxFuture<'static, ApiResult<()>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (name, entry) = (node.to_owned(), driver_entry(registration));
        Box::pin(async move {
            let client = client.await;
            let api = Api::<CSINode>::all(client.clone());
            let owner = timed(timeout, Api::<Node>::all(client).get(&name)).await?;
            let owner_uid = owner.metadata.uid.unwrap_or_default();
            match timed(timeout, api.get(&name)).await {
                Ok(mut csi_node) if owned_by(&csi_node, &owner_uid) => {
                    replace_driver(&mut csi_node.spec.drivers, entry);
                    timed(
                        timeout,
                        api.replace(&name, &PostParams::default(), &csi_node),
                    )
                    .await
                    .map(|_| ())
                }
                Ok(stale) => {
                    // Left by an earlier Node of the same name: its drivers are not this
                    // node's. The kubelet deletes it and starts afresh.
                    let delete = kube::api::DeleteParams {
                        preconditions: stale.metadata.uid.map(|uid| kube::api::Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }),
                        ..kube::api::DeleteParams::default()
                    };
                    timed(timeout, api.delete(&name, &delete)).await?;
                    create_csi_node(&api, &name, &owner_uid, entry, timeout).await
                }
                Err(ApiError::NotFound(_)) => {
                    create_csi_node(&api, &name, &owner_uid, entry, timeout).await
                }
                Err(error) => Err(error),
            }
        })
    }

    fn remove_driver_from_node(
        &self,
        node: &str,
        driver: &str,
    ) -> BoxFuture<'static, ApiResult<()>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (name, driver) = (node.to_owned(), driver.to_owned());
        Box::pin(async move {
            let api = Api::<Node>::all(client.await);
            patch_node_metadata(&api, &name, timeout, |current| {
                Ok(node_id_annotation(current).map(|annotation| {
                    let ids = without_driver(Some(annotation), &driver);
                    json!({ "annotations": { NODE_ID_ANNOTATION: ids } })
                }))
            })
            .await
        })
    }

    fn remove_driver_from_csi_node(
        &self,
        node: &str,
        driver: &str,
    ) -> BoxFuture<'static, ApiResult<()>> {
        let (client, timeout) = (self.main_client_handle(), self.heartbeat_timeout());
        let (name, driver) = (node.to_owned(), driver.to_owned());
        Box::pin(async move {
            let api = Api::<CSINode>::all(client.await);
            let mut csi_node = match timed(timeout, api.get(&name)).await {
                Ok(csi_node) => csi_node,
                Err(ApiError::NotFound(_)) => return Ok(()),
                Err(error) => return Err(error),
            };
            let before = csi_node.spec.drivers.len();
            csi_node.spec.drivers.retain(|entry| entry.name != driver);
            if csi_node.spec.drivers.len() == before {
                return Ok(());
            }
            timed(
                timeout,
                api.replace(&name, &PostParams::default(), &csi_node),
            )
            .await
            .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_id_map_gains_and_loses_drivers_and_empties_to_nothing() {
        let one = with_driver_node_id(None, "b.example.com", "n-b");
        assert_eq!(one, r#"{"b.example.com":"n-b"}"#);
        let two = with_driver_node_id(Some(&one), "a.example.com", "n-a");
        assert_eq!(two, r#"{"a.example.com":"n-a","b.example.com":"n-b"}"#);
        assert_eq!(
            without_driver(Some(&two), "a.example.com").as_deref(),
            Some(one.as_str())
        );
        assert_eq!(without_driver(Some(&one), "b.example.com"), None);
        assert_eq!(
            with_driver_node_id(Some("not json"), "a", "x"),
            r#"{"a":"x"}"#
        );
    }

    #[test]
    fn a_topology_label_with_another_value_is_a_collision() {
        let mut node = Node::default();
        node.metadata.labels = Some(BTreeMap::from([("zone".to_owned(), "a".to_owned())]));
        let same = BTreeMap::from([("zone".to_owned(), "a".to_owned())]);
        assert_eq!(topology_labels(&node, &same), Ok(same.clone()));
        let other = BTreeMap::from([("zone".to_owned(), "b".to_owned())]);
        assert_eq!(
            topology_labels(&node, &other).map_err(|collision| collision.to_string()),
            Err(r#"detected topology value collision: driver reported "zone":"b" but existing label is "zone":"a""#.to_owned())
        );
    }

    #[test]
    fn the_csinode_entry_has_sorted_topology_keys_and_the_limit() {
        let entry = driver_entry(&CsiDriverRegistration {
            driver: "d".to_owned(),
            node_id: "n".to_owned(),
            topology: BTreeMap::from([
                ("z".to_owned(), "1".to_owned()),
                ("a".to_owned(), "2".to_owned()),
            ]),
            max_volumes: Some(16),
        });
        assert_eq!(
            entry.topology_keys,
            Some(vec!["a".to_owned(), "z".to_owned()])
        );
        assert_eq!(entry.allocatable.and_then(|a| a.count), Some(16));
        let mut drivers = vec![CSINodeDriver {
            name: "d".to_owned(),
            node_id: "old".to_owned(),
            ..CSINodeDriver::default()
        }];
        replace_driver(
            &mut drivers,
            driver_entry(&CsiDriverRegistration {
                driver: "d".to_owned(),
                node_id: "new".to_owned(),
                ..CsiDriverRegistration::default()
            }),
        );
        assert_eq!(drivers.len(), 1);
        assert_eq!(drivers[0].node_id, "new");
    }
}
