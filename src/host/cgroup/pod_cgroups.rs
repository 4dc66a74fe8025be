//! The `PodCgroups` port on the host's cgroup files, as the kubelet's cgroupfs manager
//! (libcontainer's `fs`/`fs2`) makes them: on v1 the cgroup in every mounted hierarchy (a new
//! cpuset cgroup given its parent's `cpus` and `mems` first, or no task could join it), on v2
//! one directory whose parents delegate the controllers in `cgroup.subtree_control`. Removal
//! kills what is left (up to five passes) and removes the cgroup with its children.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

use nodepulse_actors::ports::{
    CgroupDriver, CgroupName, PodCgroups, PodCgroupsError, ResourceConfig,
};

use super::{
    dir,
    settings::{Setting, v1_settings, v2_settings},
    unified,
};

/// The v1 controllers whose cgroup must exist for the cgroup to count as existing (the
/// kubelet's `Validate` allowlist; `hugetlb` when mounted).
const V1_REQUIRED: &[&str] = &[
    "cpu", "cpuacct", "cpuset", "memory", "systemd", "pids", "hugetlb",
];
/// The v2 controllers the kubelet delegates, where the root has them.
const V2_WANTED: &[&str] = &["cpu", "cpuset", "memory", "hugetlb", "pids"];
/// `Destroy`'s passes of SIGKILL over the processes left.
const KILL_PASSES: usize = 5;

/// One v1 hierarchy: its directory and the controllers mounted there.
#[derive(Debug, Clone)]
struct Hierarchy {
    dir: PathBuf,
    controllers: Vec<String>,
}

#[derive(Debug, Clone)]
enum Layout {
    V1(Vec<Hierarchy>),
    V2 { controllers: Vec<String> },
}

/// The node's cgroups under `<hostRoot>/sys/fs/cgroup`.
#[derive(Debug, Clone)]
pub struct HostCgroups {
    cgroups: PathBuf,
    layout: Layout,
    driver: CgroupDriver,
}

fn create_error(path: &Path, error: &io::Error) -> PodCgroupsError {
    PodCgroupsError::Create {
        path: path.to_owned(),
        message: error.to_string(),
    }
}

fn write_error(path: &Path, error: &io::Error) -> PodCgroupsError {
    PodCgroupsError::Write {
        path: path.to_owned(),
        message: error.to_string(),
    }
}

impl HostCgroups {
    /// The hierarchies under `host_root`: v2 when it is unified, else every v1 hierarchy
    /// mounted there (links such as `cpu` → `cpu,cpuacct` counted once; the hybrid
    /// `unified` hierarchy left to the runtime, as libcontainer's `fs` manager leaves it).
    pub fn discover(host_root: &Path, driver: CgroupDriver) -> Result<Self, PodCgroupsError> {
        let cgroups = host_root.join("sys/fs/cgroup");
        let read_error = |error: io::Error| PodCgroupsError::Read {
            path: cgroups.clone(),
            message: error.to_string(),
        };
        let layout = if unified(host_root) {
            let text =
                std::fs::read_to_string(cgroups.join("cgroup.controllers")).map_err(read_error)?;
            let available: BTreeSet<&str> = text.split_whitespace().collect();
            Layout::V2 {
                controllers: V2_WANTED
                    .iter()
                    .filter(|c| available.contains(*c))
                    .map(|c| (*c).to_owned())
                    .collect(),
            }
        } else {
            let mut seen = BTreeSet::new();
            let mut hierarchies = Vec::new();
            let mut entries: Vec<_> = std::fs::read_dir(&cgroups)
                .map_err(read_error)?
                .filter_map(Result::ok)
                .collect();
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                if name == "unified" || !path.join("cgroup.procs").exists() {
                    continue;
                }
                let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                if !seen.insert(real.clone()) {
                    continue;
                }
                let mount = real
                    .file_name()
                    .map_or(name.clone(), |n| n.to_string_lossy().into_owned());
                hierarchies.push(Hierarchy {
                    dir: real,
                    controllers: mount.split(',').map(str::to_owned).collect(),
                });
            }
            Layout::V1(hierarchies)
        };
        Ok(Self {
            cgroups,
            layout,
            driver,
        })
    }

    /// Whether the host's cgroups are v2.
    pub fn is_v2(&self) -> bool {
        matches!(self.layout, Layout::V2 { .. })
    }

    fn literal(&self, name: &CgroupName) -> String {
        name.literal(self.driver)
    }

    /// The cgroup's directory in each hierarchy.
    fn dirs(&self, name: &CgroupName) -> Vec<PathBuf> {
        let literal = self.literal(name);
        match &self.layout {
            Layout::V1(hierarchies) => hierarchies.iter().map(|h| dir(&h.dir, &literal)).collect(),
            Layout::V2 { .. } => vec![dir(&self.cgroups, &literal)],
        }
    }

    /// The directories the kubelet's `Validate` requires, missing ones listed.
    pub fn missing_paths(&self, name: &CgroupName) -> Vec<PathBuf> {
        let literal = self.literal(name);
        match &self.layout {
            Layout::V1(hierarchies) => hierarchies
                .iter()
                .filter(|h| {
                    h.controllers
                        .iter()
                        .any(|c| V1_REQUIRED.contains(&c.as_str()))
                })
                .map(|h| dir(&h.dir, &literal))
                .filter(|d| !d.is_dir())
                .collect(),
            Layout::V2 { .. } => {
                let d = dir(&self.cgroups, &literal);
                if d.is_dir() { Vec::new() } else { vec![d] }
            }
        }
    }

    /// Makes `path` and its missing parents in a v1 hierarchy; cpuset levels get their
    /// parent's `cpus` and `mems`.
    fn create_v1(hierarchy: &Hierarchy, path: &Path) -> Result<(), PodCgroupsError> {
        let cpuset = hierarchy.controllers.iter().any(|c| c == "cpuset");
        let mut missing = Vec::new();
        let mut at = path;
        while !at.is_dir() && at != hierarchy.dir {
            missing.push(at.to_owned());
            let Some(parent) = at.parent() else { break };
            at = parent;
        }
        for level in missing.iter().rev() {
            match std::fs::create_dir(level) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(create_error(level, &e)),
            }
            if cpuset && let Some(parent) = level.parent() {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let own = std::fs::read_to_string(level.join(file)).unwrap_or_default();
                    if own.trim().is_empty() {
                        let inherited =
                            std::fs::read_to_string(parent.join(file)).unwrap_or_default();
                        std::fs::write(level.join(file), inherited.trim())
                            .map_err(|e| write_error(&level.join(file), &e))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Makes `path` on v2, each parent delegating the controllers it has to its children.
    fn create_v2(&self, path: &Path, controllers: &[String]) -> Result<(), PodCgroupsError> {
        let relative = path.strip_prefix(&self.cgroups).unwrap_or(path);
        let mut at = self.cgroups.clone();
        for component in relative.components() {
            let available =
                std::fs::read_to_string(at.join("cgroup.controllers")).unwrap_or_default();
            let enable: Vec<String> = controllers
                .iter()
                .filter(|c| available.split_whitespace().any(|a| a == c.as_str()))
                .map(|c| format!("+{c}"))
                .collect();
            if !enable.is_empty() {
                let control = at.join("cgroup.subtree_control");
                let current = std::fs::read_to_string(&control).unwrap_or_default();
                let needed = enable
                    .iter()
                    .any(|c| !current.split_whitespace().any(|have| have == &c[1..]));
                if needed {
                    std::fs::write(&control, enable.join(" "))
                        .map_err(|e| write_error(&control, &e))?;
                }
            }
            at.push(component);
            match std::fs::create_dir(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(create_error(&at, &e)),
            }
        }
        Ok(())
    }

    /// Writes `settings` into `dir`; the v1 CFS quota retried before its period when the
    /// kernel refuses the period alone (a new period smaller than the old quota allows).
    fn write_settings(dir: &Path, settings: &[Setting]) -> Result<(), PodCgroupsError> {
        let mut pending_period: Option<&Setting> = None;
        for setting in settings {
            let path = dir.join(&setting.file);
            match std::fs::write(&path, &setting.value) {
                Ok(()) => {}
                Err(e) if setting.file == "cpu.cfs_period_us" => {
                    tracing::debug!(error = %e, path = %path.display(), "CFS period refused before the quota; retried after it");
                    pending_period = Some(setting);
                }
                Err(e) => return Err(write_error(&path, &e)),
            }
        }
        if let Some(period) = pending_period {
            let path = dir.join(&period.file);
            std::fs::write(&path, &period.value).map_err(|e| write_error(&path, &e))?;
        }
        Ok(())
    }

    fn apply(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError> {
        let literal = self.literal(name);
        match &self.layout {
            Layout::V1(hierarchies) => {
                let settings = v1_settings(config);
                for hierarchy in hierarchies {
                    let mine: Vec<Setting> = settings
                        .iter()
                        .filter(|s| hierarchy.controllers.iter().any(|c| c == s.controller))
                        .cloned()
                        .collect();
                    if !mine.is_empty() {
                        Self::write_settings(&dir(&hierarchy.dir, &literal), &mine)?;
                    }
                }
            }
            Layout::V2 { controllers } => {
                let mine: Vec<Setting> = v2_settings(config)
                    .into_iter()
                    .filter(|s| controllers.iter().any(|c| c == s.controller))
                    .collect();
                Self::write_settings(&dir(&self.cgroups, &literal), &mine)?;
            }
        }
        Ok(())
    }

    /// The processes in the cgroup and its children, in every hierarchy.
    fn pids(&self, name: &CgroupName) -> BTreeSet<i32> {
        let mut pids = BTreeSet::new();
        for top in self.dirs(name) {
            let mut stack = vec![top];
            while let Some(at) = stack.pop() {
                let procs = std::fs::read_to_string(at.join("cgroup.procs")).unwrap_or_default();
                pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
                if let Ok(entries) = std::fs::read_dir(&at) {
                    stack.extend(
                        entries
                            .filter_map(Result::ok)
                            .map(|e| e.path())
                            .filter(|p| p.is_dir()),
                    );
                }
            }
        }
        pids
    }
}

/// Removes `path` and the cgroups below it, deepest first. A cgroup directory goes with
/// `rmdir` (its files are the kernel's); a plain directory (a test's tree) needs its files
/// gone first, which the kernel refuses for a cgroup's own, harmlessly.
fn remove_tree(path: &Path) -> io::Result<()> {
    if !path.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(path)?.filter_map(Result::ok) {
        let child = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&child)?;
        }
    }
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
            for entry in std::fs::read_dir(path)?.filter_map(Result::ok) {
                let _ = std::fs::remove_file(entry.path());
            }
            std::fs::remove_dir(path)
        }
        Err(e) => Err(e),
    }
}

impl PodCgroups for HostCgroups {
    fn driver(&self) -> CgroupDriver {
        self.driver
    }

    fn exists(&self, name: &CgroupName) -> bool {
        self.missing_paths(name).is_empty()
    }

    fn ensure(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError> {
        let literal = self.literal(name);
        match &self.layout {
            Layout::V1(hierarchies) => {
                for hierarchy in hierarchies {
                    Self::create_v1(hierarchy, &dir(&hierarchy.dir, &literal))?;
                }
            }
            Layout::V2 { controllers } => {
                self.create_v2(&dir(&self.cgroups, &literal), controllers)?;
            }
        }
        self.apply(name, config)
    }

    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), PodCgroupsError> {
        if let Some(missing) = self.missing_paths(name).first() {
            return Err(PodCgroupsError::Missing(missing.display().to_string()));
        }
        self.apply(name, config)
    }

    fn destroy(&self, name: &CgroupName) -> Result<(), PodCgroupsError> {
        for _ in 0..KILL_PASSES {
            let pids = self.pids(name);
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for path in self.dirs(name) {
            remove_tree(&path).map_err(|e| PodCgroupsError::Remove {
                path: path.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(())
    }

    fn children(&self, name: &CgroupName) -> Result<Vec<String>, PodCgroupsError> {
        // The cpu hierarchy on v1 (every pod cgroup has one), the one directory on v2.
        let literal = self.literal(name);
        let parent = match &self.layout {
            Layout::V1(hierarchies) => hierarchies
                .iter()
                .find(|h| h.controllers.iter().any(|c| c == "cpu"))
                .or(hierarchies.first())
                .map(|h| dir(&h.dir, &literal)),
            Layout::V2 { .. } => Some(dir(&self.cgroups, &literal)),
        };
        let Some(parent) = parent.filter(|p| p.is_dir()) else {
            return Ok(Vec::new());
        };
        let entries = std::fs::read_dir(&parent).map_err(|e| PodCgroupsError::Read {
            path: parent.clone(),
            message: e.to_string(),
        })?;
        Ok(entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect())
    }
}

#[cfg(test)]
#[path = "pod_cgroups_tests.rs"]
mod tests;
