//! A host root in a temporary directory: the files nodepulse reads under `hostRoot` (memory,
//! PIDs), rewritten while a daemon or a probe reads them. Each write goes aside and is renamed
//! into place, so a reader never sees half a file. A daemon given it as `hostRoot` with
//! `rootDir: /` keeps its pods (and their tmpfs volumes) here: the mounts go with the fixture.

use std::path::Path;

/// `MemTotal` of every fixture: 8 GiB.
pub const MEM_TOTAL_KIB: u64 = 8 * 1024 * 1024;

/// A fixture host: `proc/meminfo` with [`MEM_TOTAL_KIB`], PID limits and a load line that no
/// PID threshold meets.
pub struct HostFixture {
    dir: crate::root_dir::RootDir,
}

impl HostFixture {
    /// A host with `free_kib` of its memory free (and no inactive file pages, so that is all
    /// `memory.available` has).
    pub fn new(free_kib: u64) -> Self {
        let fixture = Self {
            dir: crate::root_dir::RootDir::new(),
        };
        fixture.write("proc/sys/kernel/pid_max", "32768\n");
        fixture.write("proc/sys/kernel/threads-max", "63000\n");
        fixture.write("proc/loadavg", "0.1 0.1 0.1 2/300 99\n");
        fixture.set_free_memory(free_kib);
        fixture
    }

    /// The root to give `hostRoot` or `HostProbe::new`.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Rewrites `proc/meminfo` with `free_kib` free.
    pub fn set_free_memory(&self, free_kib: u64) {
        self.write(
            "proc/meminfo",
            &format!("MemTotal: {MEM_TOTAL_KIB} kB\nMemFree: {free_kib} kB\n"),
        );
    }

    /// Writes `content` to `path` (relative to the root), creating its directories.
    pub fn write(&self, path: &str, content: &str) {
        let path = self.dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        let partial = path.with_extension("partial");
        std::fs::write(&partial, content).expect("write");
        std::fs::rename(&partial, &path).expect("rename");
    }
}
