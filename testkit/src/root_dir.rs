//! A node's `rootDir` in a temporary directory, whose mounts (the tmpfs of secret, downwardAPI
//! and projected volumes, a CSI publish, a test's own bind mount) are detached when it is
//! dropped, passing or failing, before the directory is removed: nodepulse, like the kubelet,
//! leaves its pods' mounts in place when it stops, and a removed directory cannot take them.

use std::path::Path;

pub struct RootDir(tempfile::TempDir);

impl RootDir {
    pub fn new() -> Self {
        Self(tempfile::tempdir().expect("a rootDir"))
    }

    /// One whose name starts with `prefix` (the leftover check knows the tests' prefixes).
    pub fn with_prefix(prefix: &str) -> Self {
        Self(
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .expect("a rootDir"),
        )
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for RootDir {
    fn drop(&mut self) {
        use nodepulse::volume_plugins::mount::{detach_all_below, mount_points_below};
        use std::io::Write;
        let detached = detach_all_below(self.path());
        // The cgroup root of the node that ran here (`test_cgroups::cgroup_root_for`).
        crate::test_cgroups::remove_root(&crate::test_cgroups::cgroup_root_for(self.path()));
        let left = mount_points_below(self.path()).map(|points| points.len());
        if detached.is_err() || !matches!(left, Ok(0)) {
            // Past the harness's capture, with the test's name (its thread's), so the leftover
            // check's `LEFT` lines can be traced to a test.
            let line = format!(
                "ROOTDIR {} of {}: detached {detached:?}, still mounted {left:?}\n",
                self.path().display(),
                std::thread::current().name().unwrap_or("?"),
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}
