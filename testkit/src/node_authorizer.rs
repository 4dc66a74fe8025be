//! What kube-apiserver 1.36 lets a node identity (`system:node:<name>`) do under
//! `--authorization-mode=Node,RBAC` with no RBAC binding for it: the Node authorizer's rules
//! (`plugin/pkg/auth/authorizer/node/node_authorizer.go`), its graph (a Secret, ConfigMap, claim,
//! volume or ServiceAccount is reachable only through a pod bound to the node, `graph.go`), and
//! the `NodeRules()` of `bootstrappolicy` for everything else; NodeRestriction's checks where a
//! request's path says enough. A model to check a request log against, not an authorizer.

use k8s_openapi::api::{
    core::v1::{PersistentVolume, Pod},
    storage::v1::VolumeAttachment,
};
use nodepulse_emulator::RequestRecord;

use crate::node_references::{pod_config_map_names, pod_secret_names, volume_secret_names};

/// One request as the authorizer sees it (kube-apiserver's `RequestInfo`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeRequest {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub field_selector: String,
}

impl NodeRequest {
    /// The request a log record holds. A list or watch whose field selector asks for exactly
    /// one `metadata.name` is named by it, as `RequestInfoFactory` names it.
    pub fn of(record: &RequestRecord) -> Self {
        let verb = record.verb.as_str().to_owned();
        let mut name = record.name.clone();
        if name.is_empty() && matches!(verb.as_str(), "list" | "watch") {
            name = exact_match(&record.field_selector, "metadata.name").unwrap_or_default();
        }
        Self {
            verb,
            group: record.group.clone(),
            resource: record.resource.clone(),
            subresource: record.subresource.clone(),
            namespace: record.namespace.clone(),
            name,
            field_selector: record.field_selector.clone(),
        }
    }
}

/// `fields.Selector.RequiresExactMatch`: the value `field` must equal (`field=v` or
/// `field==v`).
fn exact_match(selector: &str, field: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (key, value) = term
            .split_once("==")
            .or_else(|| term.split_once('=').filter(|(key, _)| !key.ends_with('!')))?;
        (key.trim() == field).then(|| value.trim().to_owned())
    })
}

/// The Node authorizer for one node, with the objects its graph holds: every pod a test bound
/// to a node (its own or another), the PersistentVolumes and VolumeAttachments there were.
pub struct NodeAuthorizer {
    node: String,
    pods: Vec<Pod>,
    volumes: Vec<PersistentVolume>,
    attachments: Vec<VolumeAttachment>,
}

impl NodeAuthorizer {
    pub fn new(node: &str) -> Self {
        Self {
            node: node.to_owned(),
            pods: Vec::new(),
            volumes: Vec::new(),
            attachments: Vec::new(),
        }
    }

    /// Adds a pod as the API server stored it (admission's volumes included).
    pub fn pod(mut self, pod: &Pod) -> Self {
        self.pods.push(pod.clone());
        self
    }

    pub fn volume(mut self, volume: &PersistentVolume) -> Self {
        self.volumes.push(volume.clone());
        self
    }

    pub fn attachment(mut self, attachment: &VolumeAttachment) -> Self {
        self.attachments.push(attachment.clone());
        self
    }

    /// Allowed, or why not (the authorizer's reason where it gives one).
    pub fn decide(&self, request: &NodeRequest) -> Result<(), String> {
        let r = request;
        let sub = r.subresource.as_str();
        match (r.group.as_str(), r.resource.as_str()) {
            ("", "secrets") => self.read_namespaced(r, pod_secret_names, true),
            ("", "configmaps") => self.read_namespaced(r, pod_config_map_names, false),
            ("", "persistentvolumeclaims") if sub == "status" => {
                one_of(&r.verb, &["update", "patch"])?;
                self.reachable(r.resource.as_str(), r)
            }
            ("", "persistentvolumeclaims") | ("", "persistentvolumes") => {
                get_only(r)?;
                self.reachable(r.resource.as_str(), r)
            }
            ("storage.k8s.io", "volumeattachments") => {
                get_only(r)?;
                self.reachable("volumeattachments", r)
            }
            ("", "serviceaccounts") if r.verb == "get" && sub.is_empty() => {
                // KubeletServiceAccountTokenForCredentialProviders, beta and on in 1.36.
                self.reachable("serviceaccounts", r)
            }
            ("", "serviceaccounts") => {
                if r.verb != "create" || r.name.is_empty() {
                    return Err("can only create tokens for individual service accounts".into());
                }
                if sub != "token" {
                    return Err("can only create token subresource of serviceaccount".into());
                }
                self.reachable("serviceaccounts", r)
            }
            ("coordination.k8s.io", "leases") => {
                one_of(&r.verb, &["get", "create", "update", "patch", "delete"])?;
                if r.namespace != "kube-node-lease" {
                    return Err(
                        "can only access leases in the \"kube-node-lease\" system namespace".into(),
                    );
                }
                self.own_name(r, "node lease")
            }
            ("storage.k8s.io", "csinodes") => {
                one_of(&r.verb, &["get", "create", "update", "patch", "delete"])?;
                if !sub.is_empty() {
                    return Err("cannot authorize CSINode subresources".into());
                }
                self.own_name(r, "CSINode")
            }
            ("", "nodes") => self.node_object(r),
            ("", "pods") => self.pod_request(r),
            // DRA and pod certificates: not modelled, so refused (nodepulse asks for none).
            ("resource.k8s.io", _) | ("certificates.k8s.io", "podcertificaterequests") => {
                Err(format!("{} is not modelled", r.resource))
            }
            _ => node_rules(r),
        }
    }

    fn read_namespaced(
        &self,
        r: &NodeRequest,
        names: impl Fn(&Pod) -> Vec<String>,
        through_volumes: bool,
    ) -> Result<(), String> {
        one_of(&r.verb, &["get", "list", "watch"])
            .map_err(|_| "can only read resources of this type".to_owned())?;
        if !r.subresource.is_empty() {
            return Err("cannot read subresource".into());
        }
        if r.namespace.is_empty() {
            return Err("can only read namespaced object of this type".into());
        }
        named(r)?;
        let by_pod = self
            .bound_pods()
            .filter(|pod| pod.metadata.namespace.as_deref() == Some(r.namespace.as_str()))
            .any(|pod| names(pod).contains(&r.name));
        let by_volume = through_volumes
            && self
                .volumes
                .iter()
                .filter(|volume| self.volume_reachable(volume))
                .any(|volume| {
                    volume_secret_names(volume).contains(&(r.namespace.clone(), r.name.clone()))
                });
        (by_pod || by_volume)
            .then_some(())
            .ok_or_else(|| self.no_relationship())
    }

    /// `hasPathFrom` for the object types reached from a pod or from the node itself.
    fn reachable(&self, kind: &str, r: &NodeRequest) -> Result<(), String> {
        named(r)?;
        let in_namespace = |pod: &&Pod| pod.metadata.namespace.as_deref() == Some(&r.namespace);
        let found = match kind {
            "persistentvolumeclaims" => self
                .bound_pods()
                .filter(in_namespace)
                .any(|pod| claim_names(pod).contains(&r.name)),
            "persistentvolumes" => self.volumes.iter().any(|volume| {
                volume.metadata.name.as_deref() == Some(&r.name) && self.volume_reachable(volume)
            }),
            "volumeattachments" => self.attachments.iter().any(|attachment| {
                attachment.metadata.name.as_deref() == Some(&r.name)
                    && attachment.spec.node_name == self.node
            }),
            "serviceaccounts" => self.bound_pods().filter(in_namespace).any(|pod| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.as_deref())
                    == Some(r.name.as_str())
            }),
            "pods" => self
                .bound_pods()
                .filter(in_namespace)
                .any(|pod| pod.metadata.name.as_deref() == Some(&r.name)),
            _ => false,
        };
        found.then_some(()).ok_or_else(|| self.no_relationship())
    }

    fn volume_reachable(&self, volume: &PersistentVolume) -> bool {
        let Some(claim) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
            return false;
        };
        self.bound_pods()
            .filter(|pod| pod.metadata.namespace == claim.namespace)
            .any(|pod| {
                claim_names(pod)
                    .iter()
                    .any(|c| Some(c) == claim.name.as_ref())
            })
    }

    fn own_name(&self, r: &NodeRequest, what: &str) -> Result<(), String> {
        if r.verb != "create" && r.name != self.node {
            return Err(format!(
                "can only access {what} with the same name as the requesting node"
            ));
        }
        Ok(())
    }

    /// `authorizeNode` (AuthorizeNodeWithSelectors, GA), and NodeRestriction's "only its own
    /// Node" where the path names one.
    fn node_object(&self, r: &NodeRequest) -> Result<(), String> {
        let node = &self.node;
        match (r.subresource.as_str(), r.verb.as_str()) {
            ("" | "status", "create" | "update" | "patch")
                if !r.name.is_empty() && r.name != *node =>
            {
                Err(format!(
                    "node {node:?} is not allowed to modify node {:?}",
                    r.name
                ))
            }
            ("", "create" | "update" | "patch") | ("status", "update" | "patch") => Ok(()),
            ("", "get" | "list" | "watch") if r.name == *node => Ok(()),
            ("", "get" | "list" | "watch") if r.name.is_empty() => Err(format!(
                "node '{node}' cannot read all nodes, only its own Node object"
            )),
            ("", "get" | "list" | "watch") => Err(format!(
                "node '{node}' cannot read '{}', only its own Node object",
                r.name
            )),
            _ => Err(format!("nodes may not {} nodes/{}", r.verb, r.subresource)),
        }
    }

    /// `authorizePod`, and NodeRestriction's "pods bound to itself" for deletes and status.
    fn pod_request(&self, r: &NodeRequest) -> Result<(), String> {
        match (r.subresource.as_str(), r.verb.as_str()) {
            ("", "get") => self.reachable("pods", r),
            ("", "list" | "watch") => {
                if exact_match(&r.field_selector, "spec.nodeName").as_deref() == Some(&self.node) {
                    return Ok(());
                }
                if !r.name.is_empty() {
                    return self.reachable("pods", r);
                }
                Err("can only list/watch pods with spec.nodeName field selector".into())
            }
            // Mirror pods only (NodeRestriction reads the body, which the log does not hold).
            ("", "create") => Ok(()),
            ("", "delete") | ("status", "update" | "patch") => self.reachable("pods", r),
            ("eviction", "create") => self.reachable("pods", r),
            _ => Err(format!("nodes may not {} pods/{}", r.verb, r.subresource)),
        }
    }

    fn bound_pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.iter().filter(|pod| {
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(self.node.as_str())
        })
    }

    fn no_relationship(&self) -> String {
        format!(
            "no relationship found between node '{}' and this object",
            self.node
        )
    }
}

fn one_of(verb: &str, verbs: &[&str]) -> Result<(), String> {
    verbs
        .contains(&verb)
        .then_some(())
        .ok_or_else(|| format!("may not {verb} this type"))
}

fn get_only(r: &NodeRequest) -> Result<(), String> {
    if r.verb != "get" {
        return Err("can only get individual resources of this type".into());
    }
    if !r.subresource.is_empty() {
        return Err("cannot get subresource".into());
    }
    Ok(())
}

fn named(r: &NodeRequest) -> Result<(), String> {
    if r.name.is_empty() {
        return Err("No Object name found".into());
    }
    Ok(())
}

/// The claims a pod's volumes name (`<pod>-<volume>` for generic ephemeral volumes).
fn claim_names(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|volume| {
            if let Some(claim) = &volume.persistent_volume_claim {
                return Some(claim.claim_name.clone());
            }
            volume
                .ephemeral
                .as_ref()
                .map(|_| format!("{pod_name}-{}", volume.name))
        })
        .collect()
}

/// `NodeRules()` as 1.36 builds it with its default feature gates (DRA on, ClusterTrustBundle
/// and PodCertificateRequest off): (API groups, resources, verbs).
const NODE_RULES: &[(&[&str], &[&str], &[&str])] = &[
    (&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
    (
        &["authorization.k8s.io"],
        &["subjectaccessreviews", "localsubjectaccessreviews"],
        &["create"],
    ),
    (&[""], &["services"], &["get", "list", "watch"]),
    (&[""], &["nodes"], &["create", "get", "list", "watch"]),
    (&[""], &["nodes/status"], &["update", "patch"]),
    (&[""], &["nodes"], &["update", "patch"]),
    (
        &["", "events.k8s.io"],
        &["events"],
        &["create", "update", "patch"],
    ),
    (&[""], &["pods"], &["get", "list", "watch"]),
    (&[""], &["pods"], &["create", "delete"]),
    (&[""], &["pods/status"], &["update", "patch"]),
    (&[""], &["pods/eviction"], &["create"]),
    (&[""], &["secrets", "configmaps"], &["get", "list", "watch"]),
    (
        &[""],
        &["persistentvolumeclaims", "persistentvolumes"],
        &["get"],
    ),
    (&[""], &["endpoints"], &["get"]),
    (
        &["certificates.k8s.io"],
        &["certificatesigningrequests"],
        &["create", "get", "list", "watch"],
    ),
    (
        &["coordination.k8s.io"],
        &["leases"],
        &["get", "create", "update", "patch", "delete"],
    ),
    (&["storage.k8s.io"], &["volumeattachments"], &["get"]),
    (&[""], &["serviceaccounts/token"], &["create"]),
    (
        &[""],
        &["persistentvolumeclaims/status"],
        &["get", "update", "patch"],
    ),
    (
        &["storage.k8s.io"],
        &["csidrivers"],
        &["get", "watch", "list"],
    ),
    (
        &["storage.k8s.io"],
        &["csinodes"],
        &["get", "create", "update", "patch", "delete"],
    ),
    (
        &["node.k8s.io"],
        &["runtimeclasses"],
        &["get", "list", "watch"],
    ),
    (&["resource.k8s.io"], &["resourceclaims"], &["get"]),
    (
        &["resource.k8s.io"],
        &["resourceslices"],
        &["deletecollection"],
    ),
    (&[""], &["serviceaccounts"], &["get"]),
];

fn node_rules(r: &NodeRequest) -> Result<(), String> {
    let resource = match r.subresource.as_str() {
        "" => r.resource.clone(),
        sub => format!("{}/{sub}", r.resource),
    };
    let allowed = NODE_RULES.iter().any(|(groups, resources, verbs)| {
        groups.contains(&r.group.as_str())
            && resources.contains(&resource.as_str())
            && verbs.contains(&r.verb.as_str())
    });
    allowed.then_some(()).ok_or_else(|| {
        format!(
            "no rule of the node's lets it {} {resource} in API group {:?}",
            r.verb, r.group
        )
    })
}
