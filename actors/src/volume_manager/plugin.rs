//! The kubelet's volume plugins nodepulse knows, by the names the kubelet gives them, and the
//! escaping (`/` → `~`) that turns a plugin name into a directory name under a pod's `volumes/`.
//! Pure: names and rules only, nothing here touches the disk.

use std::fmt;

/// A volume plugin, named as the kubelet's built-in plugin of the same kind (§1.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plugin {
    EmptyDir,
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
    HostPath,
    Csi,
    /// `image`: nothing on disk; the runtime mounts the image (the kubelet's stub plugin).
    Image,
}

impl Plugin {
    /// Every plugin, for lookups by name.
    pub const ALL: [Plugin; 8] = [
        Plugin::EmptyDir,
        Plugin::ConfigMap,
        Plugin::Secret,
        Plugin::DownwardApi,
        Plugin::Projected,
        Plugin::HostPath,
        Plugin::Csi,
        Plugin::Image,
    ];

    /// The kubelet's plugin name, e.g. `kubernetes.io/empty-dir`.
    pub fn name(self) -> &'static str {
        match self {
            Plugin::EmptyDir => "kubernetes.io/empty-dir",
            Plugin::ConfigMap => "kubernetes.io/configmap",
            Plugin::Secret => "kubernetes.io/secret",
            Plugin::DownwardApi => "kubernetes.io/downward-api",
            Plugin::Projected => "kubernetes.io/projected",
            Plugin::HostPath => "kubernetes.io/host-path",
            Plugin::Csi => "kubernetes.io/csi",
            Plugin::Image => "kubernetes.io/image",
        }
    }

    /// The plugin's directory name under `pods/<uid>/volumes/`, e.g. `kubernetes.io~empty-dir`.
    pub fn escaped_name(self) -> String {
        escape_plugin_name(self.name())
    }

    /// The plugin whose escaped directory name is `dir_name`, if nodepulse knows it.
    pub fn from_escaped_name(dir_name: &str) -> Option<Plugin> {
        let name = unescape_plugin_name(dir_name);
        Plugin::ALL.into_iter().find(|plugin| plugin.name() == name)
    }

    /// Whether the kubelet re-runs SetUp on every pod sync to refresh the content (§1.2, §1.11):
    /// the four plugins that write API objects through the atomic writer.
    pub fn requires_remount(self) -> bool {
        matches!(
            self,
            Plugin::ConfigMap | Plugin::Secret | Plugin::DownwardApi | Plugin::Projected
        )
    }

    /// Whether SetUp first fetches what it writes (ConfigMaps, Secrets, tokens) as its own
    /// future: the plugins `requires_remount` names (a downwardAPI volume's fetch asks nothing).
    pub fn fetches_sources(self) -> bool {
        self.requires_remount()
    }

    /// Whether SetUp leaves a directory under `pods/<uid>/volumes/` (hostPath mounts nothing:
    /// the host's own path is handed to the containers, §1.13; an image volume is the
    /// runtime's to mount, from its image).
    pub fn has_volume_dir(self) -> bool {
        !matches!(self, Plugin::HostPath | Plugin::Image)
    }

    /// Whether the containers mount the volume from a host path (an image volume has none).
    pub fn has_host_path(self) -> bool {
        self != Plugin::Image
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kubelet's `EscapeQualifiedName`: every `/` becomes `~`.
pub fn escape_plugin_name(name: &str) -> String {
    name.replace('/', "~")
}

/// The reverse of [`escape_plugin_name`]: every `~` becomes `/`.
pub fn unescape_plugin_name(dir_name: &str) -> String {
    dir_name.replace('~', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_directories_are_the_kubelets_escaped_names() {
        let table = [
            (Plugin::EmptyDir, "kubernetes.io~empty-dir"),
            (Plugin::ConfigMap, "kubernetes.io~configmap"),
            (Plugin::Secret, "kubernetes.io~secret"),
            (Plugin::DownwardApi, "kubernetes.io~downward-api"),
            (Plugin::Projected, "kubernetes.io~projected"),
            (Plugin::HostPath, "kubernetes.io~host-path"),
            (Plugin::Csi, "kubernetes.io~csi"),
            (Plugin::Image, "kubernetes.io~image"),
        ];
        for (plugin, dir) in table {
            assert_eq!(plugin.escaped_name(), dir);
            assert_eq!(Plugin::from_escaped_name(dir), Some(plugin), "{dir}");
        }
    }

    #[test]
    fn unknown_plugin_directories_are_not_guessed() {
        assert_eq!(Plugin::from_escaped_name("kubernetes.io~nfs"), None);
        assert_eq!(Plugin::from_escaped_name("empty-dir"), None);
    }

    #[test]
    fn only_atomic_writer_plugins_require_remount() {
        let remounted: Vec<Plugin> = Plugin::ALL
            .into_iter()
            .filter(|plugin| plugin.requires_remount())
            .collect();
        assert_eq!(
            remounted,
            [
                Plugin::ConfigMap,
                Plugin::Secret,
                Plugin::DownwardApi,
                Plugin::Projected
            ]
        );
    }
}
