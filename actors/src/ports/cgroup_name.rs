//! The kubelet's internal cgroup names (`cm/cgroup_manager_linux.go` `CgroupName`): a list of
//! components, written as a cgroupfs path or, for the `systemd` driver, as nested slices
//! (`kubepods-burstable-pod<uid_>.slice` expanded). Pure: paths only, no cgroup is touched.

use serde::{Deserialize, Serialize};

/// How names become paths: cgroupfs paths as they are, or systemd slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    #[default]
    Cgroupfs,
    Systemd,
}

const SYSTEMD_SUFFIX: &str = ".slice";

/// A component the kubelet refuses (`NewCgroupName` panics on it): a `/`, or a `_`, which the
/// systemd form could not map back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid character in component [{0:?}] of CgroupName")]
pub struct InvalidComponent(pub String);

/// A cgroup's name, root first; empty: the root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CgroupName(Vec<String>);

impl CgroupName {
    /// `base` with `components` appended, each checked as the kubelet checks them.
    pub fn child(&self, components: &[&str]) -> Result<Self, InvalidComponent> {
        let mut parts = self.0.clone();
        for component in components {
            if component.contains(['/', '_']) {
                return Err(InvalidComponent((*component).to_owned()));
            }
            parts.push((*component).to_owned());
        }
        Ok(Self(parts))
    }

    pub fn components(&self) -> &[String] {
        &self.0
    }

    /// The last component (`pod<uid>`), or empty for the root.
    pub fn base(&self) -> &str {
        self.0.last().map_or("", String::as_str)
    }

    /// `/a/b/c`; `/` for the root.
    pub fn to_cgroupfs(&self) -> String {
        format!("/{}", self.0.join("/"))
    }

    /// `/a.slice/a-b.slice/a-b-c.slice`, each component's `-` written `_`; `/` for the root.
    pub fn to_systemd(&self) -> String {
        if self.0.is_empty() || self.0 == [""] {
            return "/".to_owned();
        }
        let escaped: Vec<String> = self.0.iter().map(|part| part.replace('-', "_")).collect();
        expand_slice(&format!("{}{SYSTEMD_SUFFIX}", escaped.join("-")))
            .unwrap_or_else(|| "/".to_owned())
    }

    /// The path the driver writes for it: what CRI gets as `cgroup_parent`, and the directory
    /// under each hierarchy.
    pub fn literal(&self, driver: CgroupDriver) -> String {
        match driver {
            CgroupDriver::Cgroupfs => self.to_cgroupfs(),
            CgroupDriver::Systemd => self.to_systemd(),
        }
    }

    /// A cgroupfs path (`/kubelet/pods`) as a name; `/` and empty: the root.
    pub fn parse_cgroupfs(path: &str) -> Self {
        let trimmed = path.trim_start_matches('/');
        if trimmed.is_empty() {
            return Self::default();
        }
        Self(trimmed.split('/').map(str::to_owned).collect())
    }

    /// A systemd slice's last element (`kubepods-burstable-pod1_2.slice`) as a name
    /// (`kubepods`, `burstable`, `pod1-2`).
    pub fn parse_systemd(path: &str) -> Self {
        let base = path.rsplit('/').next().unwrap_or_default();
        let base = base.strip_suffix(SYSTEMD_SUFFIX).unwrap_or(base);
        Self(base.split('-').map(|part| part.replace('_', "-")).collect())
    }

    /// A literal path written by `driver` as a name.
    pub fn parse(path: &str, driver: CgroupDriver) -> Self {
        match driver {
            CgroupDriver::Cgroupfs => Self::parse_cgroupfs(path),
            CgroupDriver::Systemd => Self::parse_systemd(path),
        }
    }
}

/// systemd's slice expansion (runc's `ExpandSlice`): `a-b-c.slice` becomes
/// `/a.slice/a-b.slice/a-b-c.slice`, `-.slice` the root; `None` for a name systemd refuses.
pub fn expand_slice(slice: &str) -> Option<String> {
    let name = slice.strip_suffix(SYSTEMD_SUFFIX)?;
    if name.contains('/') {
        return None;
    }
    if name == "-" {
        return Some("/".to_owned());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for component in name.split('-') {
        if component.is_empty() {
            return None;
        }
        path.push('/');
        path.push_str(&prefix);
        path.push_str(component);
        path.push_str(SYSTEMD_SUFFIX);
        prefix.push_str(component);
        prefix.push('-');
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(parts: &[&str]) -> CgroupName {
        CgroupName::default().child(parts).expect("valid")
    }

    /// The kubelet's `TestCgroupNameToSystemdBasename` and `ToCgroupfs` cases.
    #[test]
    fn names_become_cgroupfs_paths_and_expanded_systemd_slices() {
        assert_eq!(name(&[]).to_systemd(), "/");
        assert_eq!(name(&["system"]).to_systemd(), "/system.slice");
        assert_eq!(
            name(&["system", "Burstable"]).to_systemd(),
            "/system.slice/system-Burstable.slice"
        );
        assert_eq!(
            name(&["Burstable", "pod-123"]).to_systemd(),
            "/Burstable.slice/Burstable-pod_123.slice"
        );
        assert_eq!(
            name(&["kubepods", "burstable", "pod1234-abcd-5678-efgh"]).to_systemd(),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice"
        );
        assert_eq!(
            name(&["kubepods", "burstable", "pod1"]).to_cgroupfs(),
            "/kubepods/burstable/pod1"
        );
        assert_eq!(name(&[]).to_cgroupfs(), "/");
    }

    #[test]
    fn literal_paths_parse_back_into_names() {
        assert_eq!(CgroupName::parse_cgroupfs("/"), name(&[]));
        assert_eq!(
            CgroupName::parse_cgroupfs("/np/kubepods"),
            name(&["np", "kubepods"])
        );
        assert_eq!(
            CgroupName::parse_systemd(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice"
            ),
            name(&["kubepods", "besteffort", "pod1-2"])
        );
    }

    #[test]
    fn components_with_a_slash_or_underscore_are_refused() {
        assert_eq!(
            CgroupName::default().child(&["a_b"]),
            Err(InvalidComponent("a_b".to_owned()))
        );
        assert!(CgroupName::default().child(&["a/b"]).is_err());
    }

    /// runc's `TestExpandSlice` table.
    #[test]
    fn slices_expand_as_systemd_expands_them() {
        assert_eq!(expand_slice("-.slice").as_deref(), Some("/"));
        assert_eq!(
            expand_slice("a-b.slice").as_deref(),
            Some("/a.slice/a-b.slice")
        );
        assert_eq!(
            expand_slice("test-a-b.slice").as_deref(),
            Some("/test.slice/test-a.slice/test-a-b.slice")
        );
        assert_eq!(expand_slice("a--b.slice"), None);
        assert_eq!(expand_slice("a-.slice"), None);
        assert_eq!(expand_slice("a/b.slice"), None);
        assert_eq!(expand_slice("a"), None);
    }
}
