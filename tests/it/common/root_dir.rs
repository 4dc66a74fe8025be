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
        if let Err(error) = nodepulse::volume::mount::detach_all_below(self.path()) {
            eprintln!(
                "cannot detach the mounts under {}: {error}",
                self.path().display()
            );
        }
    }
}
