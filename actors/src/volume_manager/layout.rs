//! Where the kubelet keeps a pod's volumes under `rootDir` (§1.9), and the unique volume names
//! it reports in `volumesInUse` (§1.1). Pure path and name arithmetic; the adapters in the
//! daemon crate create and remove what these paths name.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use super::plugin::Plugin;

/// The kubelet's directory tree for pods under one `rootDir` (default `/var/lib/kubelet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDirs {
    root: PathBuf,
}

impl PodDirs {
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        Self {
            root: root_dir.into(),
        }
    }

    pub fn root_dir(&self) -> &Path {
        &self.root
    }

    /// `<root>/pods`: one directory per pod UID.
    pub fn pods_dir(&self) -> PathBuf {
        self.root.join("pods")
    }

    /// `<root>/pods/<uid>` (mode 0750 when created).
    pub fn pod_dir(&self, pod_uid: &str) -> PathBuf {
        self.pods_dir().join(pod_uid)
    }

    /// `<root>/pods/<uid>/volumes`: one directory per escaped plugin name.
    pub fn pod_volumes_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join("volumes")
    }

    /// `<root>/pods/<uid>/volumes/<escaped plugin>/<volume>`: what the containers see.
    pub fn volume_dir(&self, pod_uid: &str, plugin: Plugin, volume: &str) -> PathBuf {
        self.pod_volumes_dir(pod_uid)
            .join(plugin.escaped_name())
            .join(volume)
    }

    /// `<root>/pods/<uid>/volume-subpaths`: the bind mounts of the containers' `subPath`s.
    pub fn pod_sub_paths_dir(&self, pod_uid: &str) -> PathBuf {
        self.pod_dir(pod_uid).join("volume-subpaths")
    }

    /// `<root>/pods/<uid>/volume-subpaths/<volume>/<container>/<mount index>`: where the
    /// `subPath` of the container's `volumeMounts[index]` is bound, and what the runtime
    /// mounts (a container name is a DNS label, so safe as a directory name).
    pub fn sub_path_target(
        &self,
        pod_uid: &str,
        volume: &str,
        container: &str,
        mount_index: usize,
    ) -> PathBuf {
        self.pod_sub_paths_dir(pod_uid)
            .join(volume)
            .join(container)
            .join(mount_index.to_string())
    }

    /// `<root>/pods/<uid>/plugins/<escaped plugin>/<volume>`: the plugin's own metadata for the
    /// volume, e.g. emptyDir's `ready` file.
    pub fn volume_plugin_dir(&self, pod_uid: &str, plugin: Plugin, volume: &str) -> PathBuf {
        self.pod_dir(pod_uid)
            .join("plugins")
            .join(plugin.escaped_name())
            .join(volume)
    }
}

/// A volume's name in the kubelet's desired and actual state and in `node.status.volumesInUse`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UniqueVolumeName(String);

impl UniqueVolumeName {
    /// A pod-scoped volume (neither attachable nor device-mountable):
    /// `<plugin>/<pod uid>-<outer volume name>`, e.g. `kubernetes.io/configmap/1234-cfg`.
    pub fn pod_scoped(plugin: Plugin, pod_uid: &str, volume: &str) -> Self {
        Self(format!("{}/{pod_uid}-{volume}", plugin.name()))
    }

    /// An attachable volume shared by every pod that uses it: `<plugin>/<plugin volume name>`;
    /// for CSI the volume name is `<driver>^<volumeHandle>`.
    pub fn attachable(plugin: Plugin, plugin_volume_name: &str) -> Self {
        Self(format!("{}/{plugin_volume_name}", plugin.name()))
    }

    /// A name as the Node reports it in `volumesInUse` or `volumesAttached`.
    pub fn from_reported(name: &str) -> Self {
        Self(name.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UniqueVolumeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_dirs_follow_the_kubelets_layout() {
        let dirs = PodDirs::new("/var/lib/kubelet");
        let table = [
            (
                Plugin::EmptyDir,
                "cache",
                "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/cache",
            ),
            (
                Plugin::ConfigMap,
                "cfg",
                "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~configmap/cfg",
            ),
            (
                Plugin::Projected,
                "kube-api-access-x",
                "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~projected/kube-api-access-x",
            ),
        ];
        for (plugin, volume, path) in table {
            assert_eq!(dirs.volume_dir("u1", plugin, volume), Path::new(path));
        }
        assert_eq!(
            dirs.sub_path_target("u1", "cache", "app", 2),
            Path::new("/var/lib/kubelet/pods/u1/volume-subpaths/cache/app/2")
        );
        assert_eq!(
            dirs.volume_plugin_dir("u1", Plugin::EmptyDir, "cache"),
            Path::new("/var/lib/kubelet/pods/u1/plugins/kubernetes.io~empty-dir/cache")
        );
    }

    #[test]
    fn unique_names_are_per_pod_unless_attachable() {
        assert_eq!(
            UniqueVolumeName::pod_scoped(Plugin::Secret, "u1", "creds").as_str(),
            "kubernetes.io/secret/u1-creds"
        );
        assert_eq!(
            UniqueVolumeName::attachable(Plugin::Csi, "ebs.csi.aws.com^vol-1").as_str(),
            "kubernetes.io/csi/ebs.csi.aws.com^vol-1"
        );
    }
}
