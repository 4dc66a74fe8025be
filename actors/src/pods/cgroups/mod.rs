//! The kubelet's cgroup rules, pure (`pkg/kubelet/cm`): where a pod's cgroup goes in the QoS
//! hierarchy ([`CgroupLayout`]), what it is given ([`pod_config`]), and the values of the QoS
//! cgroups and of `kubepods` at node allocatable ([`qos`]). The engine applies them through
//! the `PodCgroups` port; nothing here touches a cgroup.

pub mod pod_config;
pub mod qos;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::qos_class;
use crate::ports::{CgroupDriver, CgroupName, InvalidComponent, PodCgroups};

/// The kubelet's names: `kubepods` under the root, its QoS cgroups, `pod<uid>` a pod.
pub const NODE_ALLOCATABLE_CGROUP: &str = "kubepods";
pub const POD_CGROUP_PREFIX: &str = "pod";
pub const BURSTABLE: &str = "burstable";
pub const BEST_EFFORT: &str = "besteffort";

/// The node's cgroups as the CRI engine drives them: the port, where they are, and the
/// kubelet settings a pod cgroup depends on.
#[derive(Clone)]
pub struct PodCgroupsSetup {
    pub cgroups: Arc<dyn PodCgroups>,
    pub layout: CgroupLayout,
    pub settings: pod_config::PodCgroupSettings,
}

/// A pod's QoS class, as the cgroups place it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// The pod's class as the kubelet's `GetPodQOS` reads it (the persisted one first).
pub fn pod_qos(pod: &Pod) -> Qos {
    match qos_class(pod) {
        "Guaranteed" => Qos::Guaranteed,
        "BestEffort" => Qos::BestEffort,
        _ => Qos::Burstable,
    }
}

/// Where the node's cgroups are: `cgroupRoot`, the driver, and whether `cgroupsPerQOS` puts
/// pods in a hierarchy of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLayout {
    pub root: CgroupName,
    pub driver: CgroupDriver,
}

impl CgroupLayout {
    /// The layout for `cgroupRoot`, a cgroupfs path whatever the driver (the kubelet's
    /// container manager parses it so, "we do not want any name conversion to occur").
    pub fn new(cgroup_root: &str, driver: CgroupDriver) -> Self {
        Self {
            root: CgroupName::parse_cgroupfs(cgroup_root),
            driver,
        }
    }

    /// The node allocatable cgroup: `<root>/kubepods`.
    pub fn kubepods(&self) -> CgroupName {
        self.child(&self.root, NODE_ALLOCATABLE_CGROUP)
    }

    /// The QoS class's cgroup; Guaranteed pods sit in `kubepods` itself.
    pub fn qos(&self, qos: Qos) -> CgroupName {
        match qos {
            Qos::Guaranteed => self.kubepods(),
            Qos::Burstable => self.child(&self.kubepods(), BURSTABLE),
            Qos::BestEffort => self.child(&self.kubepods(), BEST_EFFORT),
        }
    }

    /// `pod<uid>` in its QoS cgroup; refused for a UID with a `/` or `_`.
    pub fn pod(&self, uid: &str, qos: Qos) -> Result<CgroupName, InvalidComponent> {
        self.qos(qos).child(&[&format!("{POD_CGROUP_PREFIX}{uid}")])
    }

    /// The literal path (`cgroup_parent` for CRI, the directory under each hierarchy).
    pub fn literal(&self, name: &CgroupName) -> String {
        name.literal(self.driver)
    }

    /// The pod UID of a child cgroup of a QoS cgroup (`pod<uid>`, or its systemd slice).
    pub fn pod_uid(&self, child_literal: &str) -> Option<String> {
        let name = CgroupName::parse(child_literal, self.driver);
        name.base()
            .strip_prefix(POD_CGROUP_PREFIX)
            .filter(|uid| !uid.is_empty())
            .map(str::to_owned)
    }

    fn child(&self, base: &CgroupName, component: &str) -> CgroupName {
        // The kubelet's constant names have neither `/` nor `_`.
        base.child(&[component]).unwrap_or_else(|_| base.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pods_go_under_their_qos_cgroup_and_guaranteed_ones_under_kubepods() {
        let layout = CgroupLayout::new("/", CgroupDriver::Cgroupfs);
        let literal = |qos| layout.literal(&layout.pod("1-2", qos).unwrap());
        assert_eq!(literal(Qos::Guaranteed), "/kubepods/pod1-2");
        assert_eq!(literal(Qos::Burstable), "/kubepods/burstable/pod1-2");
        assert_eq!(literal(Qos::BestEffort), "/kubepods/besteffort/pod1-2");
        let rooted = CgroupLayout::new("/np-test-a", CgroupDriver::Cgroupfs);
        assert_eq!(rooted.literal(&rooted.kubepods()), "/np-test-a/kubepods");
        assert_eq!(layout.pod_uid("pod1-2").as_deref(), Some("1-2"));
        assert_eq!(layout.pod_uid("burstable"), None);
        assert!(layout.pod("a_b", Qos::Burstable).is_err());
    }

    /// The kubelet's table in `cm/helpers_linux_test.go`'s systemd cases and the reference's
    /// hierarchy (§4.2).
    #[test]
    fn the_systemd_driver_nests_slices() {
        let layout = CgroupLayout::new("/", CgroupDriver::Systemd);
        assert_eq!(layout.literal(&layout.kubepods()), "/kubepods.slice");
        assert_eq!(
            layout.literal(&layout.pod("1-2", Qos::BestEffort).unwrap()),
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice"
        );
        assert_eq!(
            layout.literal(&layout.pod("1-2", Qos::Guaranteed).unwrap()),
            "/kubepods.slice/kubepods-pod1_2.slice"
        );
        assert_eq!(
            layout.pod_uid("kubepods-burstable-pod1_2.slice").as_deref(),
            Some("1-2")
        );
    }

    #[test]
    fn the_reported_class_wins_over_the_spec() {
        let pod: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "a"}]},
            "status": {"qosClass": "Burstable"}
        }))
        .unwrap();
        assert_eq!(pod_qos(&pod), Qos::Burstable);
        let level: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "a"}],
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                   "limits": {"cpu": "1", "memory": "1Gi"}}}
        }))
        .unwrap();
        assert_eq!(pod_qos(&level), Qos::Guaranteed);
        let partial: Pod = serde_json::from_value(json!({
            "spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                     "resources": {"requests": {"cpu": "1"}}}
        }))
        .unwrap();
        assert_eq!(pod_qos(&partial), Qos::Burstable);
    }
}
