//! The strategic-merge-patch metadata of the types the emulator serves: which lists merge, and by
//! which key (the Go struct tags `patchStrategy:"merge" patchMergeKey:"type"`).
//!
//! Only fields nodepulse and kubectl touch are listed; any other list is replaced, which is what
//! the Go structs say for every list without a `patchStrategy` tag (`spec.taints`,
//! `status.containerStatuses`, `status.images`, ...).

/// A position in an object's type tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    /// A top-level object with only `metadata` known (Lease, Event, Namespace).
    Object,
    Node,
    NodeSpec,
    NodeStatus,
    Pod,
    PodSpec,
    PodStatus,
    Container,
    ObjectMeta,
    /// A type without merge lists (or one the emulator does not model).
    Opaque,
}

/// How a list-valued field is patched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch's list replaces the live one.
    Replace,
    /// Items are merged: maps by `key`, primitives (key `None`) as a set.
    Merge { key: Option<&'static str> },
}

/// Merge metadata of one field: its own schema and, for lists, how they merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldMeta {
    pub schema: Schema,
    pub list: ListStrategy,
}

const fn opaque() -> FieldMeta {
    FieldMeta {
        schema: Schema::Opaque,
        list: ListStrategy::Replace,
    }
}

const fn child(schema: Schema) -> FieldMeta {
    FieldMeta {
        schema,
        list: ListStrategy::Replace,
    }
}

const fn merge_by(key: &'static str, schema: Schema) -> FieldMeta {
    FieldMeta {
        schema,
        list: ListStrategy::Merge { key: Some(key) },
    }
}

const fn merge_set() -> FieldMeta {
    FieldMeta {
        schema: Schema::Opaque,
        list: ListStrategy::Merge { key: None },
    }
}

impl Schema {
    /// The merge metadata of `field` inside a value of this schema.
    pub fn field(self, field: &str) -> FieldMeta {
        use Schema::*;
        match (self, field) {
            (Object | Node | Pod, "metadata") => child(ObjectMeta),
            (Node, "spec") => child(NodeSpec),
            (Node, "status") => child(NodeStatus),
            (Pod, "spec") => child(PodSpec),
            (Pod, "status") => child(PodStatus),
            (ObjectMeta, "finalizers") => merge_set(),
            (ObjectMeta, "ownerReferences") => merge_by("uid", Opaque),
            (NodeSpec, "podCIDRs") => merge_set(),
            (NodeStatus, "conditions" | "addresses") => merge_by("type", Opaque),
            (PodSpec, "containers" | "initContainers" | "ephemeralContainers") => {
                merge_by("name", Container)
            }
            (PodSpec, "volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates") => {
                merge_by("name", Opaque)
            }
            (PodSpec, "hostAliases") => merge_by("ip", Opaque),
            (PodSpec, "topologySpreadConstraints") => merge_by("topologyKey", Opaque),
            (Container, "ports") => merge_by("containerPort", Opaque),
            (Container, "env") => merge_by("name", Opaque),
            (Container, "volumeMounts") => merge_by("mountPath", Opaque),
            (Container, "volumeDevices") => merge_by("devicePath", Opaque),
            (PodStatus, "conditions") => merge_by("type", Opaque),
            (PodStatus, "podIPs" | "hostIPs") => merge_by("ip", Opaque),
            (PodStatus, "resourceClaimStatuses") => merge_by("name", Opaque),
            _ => opaque(),
        }
    }

    /// The root schema of a stored kind.
    pub fn root(stored: crate::api::StoredKind) -> Schema {
        match stored {
            crate::api::StoredKind::Node => Schema::Node,
            crate::api::StoredKind::Pod => Schema::Pod,
            _ => Schema::Object,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_conditions_merge_by_type_and_taints_are_replaced() {
        let status = Schema::Node.field("status").schema;
        assert_eq!(
            status.field("conditions").list,
            ListStrategy::Merge { key: Some("type") }
        );
        let spec = Schema::Node.field("spec").schema;
        assert_eq!(spec.field("taints").list, ListStrategy::Replace);
    }

    #[test]
    fn pod_container_statuses_are_atomic_like_the_go_types() {
        let status = Schema::Pod.field("status").schema;
        assert_eq!(
            status.field("containerStatuses").list,
            ListStrategy::Replace
        );
        assert_eq!(
            status.field("conditions").list,
            ListStrategy::Merge { key: Some("type") }
        );
    }
}
