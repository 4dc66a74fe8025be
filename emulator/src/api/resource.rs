//! The resources the emulator serves and how each is named on the wire.
//!
//! One [`ApiResource`] per (group, version, plural). Storage is keyed by [`StoredKind`]: core
//! `v1/events` and `events.k8s.io/v1/events` are two views of the same stored objects, as in
//! kube-apiserver. Nothing here touches objects; it is a static table plus name helpers.

/// What the store keeps objects under. Two API views can share one stored kind (events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoredKind {
    Namespace,
    Node,
    Pod,
    Lease,
    Event,
    PersistentVolume,
    PersistentVolumeClaim,
    CsiDriver,
    CsiNode,
    RuntimeClass,
    VolumeAttachment,
    ConfigMap,
    Secret,
    ServiceAccount,
    Service,
    CertificateSigningRequest,
}

/// One served resource: its names, scope, verbs and whether it has a `/status` subresource.
#[derive(Debug, PartialEq, Eq)]
pub struct ApiResource {
    pub stored: StoredKind,
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub has_status: bool,
    pub short_names: &'static [&'static str],
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub static NAMESPACES: ApiResource = ApiResource {
    stored: StoredKind::Namespace,
    group: "",
    version: "v1",
    plural: "namespaces",
    singular: "namespace",
    kind: "Namespace",
    namespaced: false,
    has_status: true,
    short_names: &["ns"],
};
pub static NODES: ApiResource = ApiResource {
    stored: StoredKind::Node,
    group: "",
    version: "v1",
    plural: "nodes",
    singular: "node",
    kind: "Node",
    namespaced: false,
    has_status: true,
    short_names: &["no"],
};
pub static PODS: ApiResource = ApiResource {
    stored: StoredKind::Pod,
    group: "",
    version: "v1",
    plural: "pods",
    singular: "pod",
    kind: "Pod",
    namespaced: true,
    has_status: true,
    short_names: &["po"],
};
pub static CORE_EVENTS: ApiResource = ApiResource {
    stored: StoredKind::Event,
    group: "",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    namespaced: true,
    has_status: false,
    short_names: &["ev"],
};
pub static LEASES: ApiResource = ApiResource {
    stored: StoredKind::Lease,
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    singular: "lease",
    kind: "Lease",
    namespaced: true,
    has_status: false,
    short_names: &[],
};
pub static EVENTS_V1: ApiResource = ApiResource {
    stored: StoredKind::Event,
    group: "events.k8s.io",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    namespaced: true,
    has_status: false,
    short_names: &["ev"],
};

pub static PERSISTENT_VOLUMES: ApiResource = ApiResource {
    stored: StoredKind::PersistentVolume,
    group: "",
    version: "v1",
    plural: "persistentvolumes",
    singular: "persistentvolume",
    kind: "PersistentVolume",
    namespaced: false,
    has_status: true,
    short_names: &["pv"],
};
pub static PERSISTENT_VOLUME_CLAIMS: ApiResource = ApiResource {
    stored: StoredKind::PersistentVolumeClaim,
    group: "",
    version: "v1",
    plural: "persistentvolumeclaims",
    singular: "persistentvolumeclaim",
    kind: "PersistentVolumeClaim",
    namespaced: true,
    has_status: true,
    short_names: &["pvc"],
};
pub static CSI_DRIVERS: ApiResource = ApiResource {
    stored: StoredKind::CsiDriver,
    group: "storage.k8s.io",
    version: "v1",
    plural: "csidrivers",
    singular: "csidriver",
    kind: "CSIDriver",
    namespaced: false,
    has_status: false,
    short_names: &[],
};
pub static RUNTIME_CLASSES: ApiResource = ApiResource {
    stored: StoredKind::RuntimeClass,
    group: "node.k8s.io",
    version: "v1",
    plural: "runtimeclasses",
    singular: "runtimeclass",
    kind: "RuntimeClass",
    namespaced: false,
    has_status: false,
    short_names: &[],
};
pub static CSI_NODES: ApiResource = ApiResource {
    stored: StoredKind::CsiNode,
    group: "storage.k8s.io",
    version: "v1",
    plural: "csinodes",
    singular: "csinode",
    kind: "CSINode",
    namespaced: false,
    has_status: false,
    short_names: &[],
};
pub static VOLUME_ATTACHMENTS: ApiResource = ApiResource {
    stored: StoredKind::VolumeAttachment,
    group: "storage.k8s.io",
    version: "v1",
    plural: "volumeattachments",
    singular: "volumeattachment",
    kind: "VolumeAttachment",
    namespaced: false,
    has_status: true,
    short_names: &[],
};

pub static CONFIG_MAPS: ApiResource = ApiResource {
    stored: StoredKind::ConfigMap,
    group: "",
    version: "v1",
    plural: "configmaps",
    singular: "configmap",
    kind: "ConfigMap",
    namespaced: true,
    has_status: false,
    short_names: &["cm"],
};
pub static SECRETS: ApiResource = ApiResource {
    stored: StoredKind::Secret,
    group: "",
    version: "v1",
    plural: "secrets",
    singular: "secret",
    kind: "Secret",
    namespaced: true,
    has_status: false,
    short_names: &[],
};
pub static SERVICE_ACCOUNTS: ApiResource = ApiResource {
    stored: StoredKind::ServiceAccount,
    group: "",
    version: "v1",
    plural: "serviceaccounts",
    singular: "serviceaccount",
    kind: "ServiceAccount",
    namespaced: true,
    has_status: false,
    short_names: &["sa"],
};

pub static SERVICES: ApiResource = ApiResource {
    stored: StoredKind::Service,
    group: "",
    version: "v1",
    plural: "services",
    singular: "service",
    kind: "Service",
    namespaced: true,
    has_status: true,
    short_names: &["svc"],
};

pub static CERTIFICATE_SIGNING_REQUESTS: ApiResource = ApiResource {
    stored: StoredKind::CertificateSigningRequest,
    group: "certificates.k8s.io",
    version: "v1",
    plural: "certificatesigningrequests",
    singular: "certificatesigningrequest",
    kind: "CertificateSigningRequest",
    namespaced: false,
    has_status: true,
    short_names: &["csr"],
};

/// Every served resource, in discovery order.
pub static ALL: [&ApiResource; 17] = [
    &NAMESPACES,
    &NODES,
    &PODS,
    &PERSISTENT_VOLUMES,
    &PERSISTENT_VOLUME_CLAIMS,
    &CORE_EVENTS,
    &CONFIG_MAPS,
    &SECRETS,
    &SERVICE_ACCOUNTS,
    &SERVICES,
    &LEASES,
    &EVENTS_V1,
    &CSI_DRIVERS,
    &CSI_NODES,
    &RUNTIME_CLASSES,
    &VOLUME_ATTACHMENTS,
    &CERTIFICATE_SIGNING_REQUESTS,
];

/// The API groups besides the core group, with their single served version.
pub static GROUPS: [(&str, &str); 5] = [
    ("certificates.k8s.io", "v1"),
    ("coordination.k8s.io", "v1"),
    ("events.k8s.io", "v1"),
    ("node.k8s.io", "v1"),
    ("storage.k8s.io", "v1"),
];

impl ApiResource {
    /// Finds the resource served at `group/version/plural`.
    pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ApiResource> {
        ALL.iter()
            .copied()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// The canonical API view of a stored kind (the one watch events and the controller use).
    pub fn canonical(stored: StoredKind) -> &'static ApiResource {
        match stored {
            StoredKind::Namespace => &NAMESPACES,
            StoredKind::Node => &NODES,
            StoredKind::Pod => &PODS,
            StoredKind::Lease => &LEASES,
            StoredKind::Event => &CORE_EVENTS,
            StoredKind::PersistentVolume => &PERSISTENT_VOLUMES,
            StoredKind::PersistentVolumeClaim => &PERSISTENT_VOLUME_CLAIMS,
            StoredKind::CsiDriver => &CSI_DRIVERS,
            StoredKind::CsiNode => &CSI_NODES,
            StoredKind::RuntimeClass => &RUNTIME_CLASSES,
            StoredKind::VolumeAttachment => &VOLUME_ATTACHMENTS,
            StoredKind::ConfigMap => &CONFIG_MAPS,
            StoredKind::Secret => &SECRETS,
            StoredKind::ServiceAccount => &SERVICE_ACCOUNTS,
            StoredKind::Service => &SERVICES,
            StoredKind::CertificateSigningRequest => &CERTIFICATE_SIGNING_REQUESTS,
        }
    }

    /// `v1` or `group/v1`, as written in an object's `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified resource as errors name it: `nodes`, `leases.coordination.k8s.io`.
    pub fn qualified_resource(&self) -> String {
        qualify(self.plural, self.group)
    }

    /// The group-qualified kind as validation errors name it: `Node`, `Lease.coordination.k8s.io`.
    pub fn qualified_kind(&self) -> String {
        qualify(self.kind, self.group)
    }

    /// The verbs advertised in discovery.
    pub fn verbs(&self) -> &'static [&'static str] {
        VERBS
    }
}

/// `name` or `name.group` when the group is not the core group.
pub fn qualify(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_string()
    } else {
        format!("{name}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_qualified_like_kube_apiserver() {
        assert_eq!(NODES.qualified_resource(), "nodes");
        assert_eq!(LEASES.qualified_resource(), "leases.coordination.k8s.io");
        assert_eq!(LEASES.qualified_kind(), "Lease.coordination.k8s.io");
        assert_eq!(LEASES.api_version(), "coordination.k8s.io/v1");
    }

    #[test]
    fn both_event_apis_share_one_stored_kind() {
        let core = ApiResource::lookup("", "v1", "events").map(|r| r.stored);
        let v1 = ApiResource::lookup("events.k8s.io", "v1", "events").map(|r| r.stored);
        assert_eq!(core, Some(StoredKind::Event));
        assert_eq!(core, v1);
        assert!(ApiResource::lookup("", "v1", "endpoints").is_none());
    }
}
