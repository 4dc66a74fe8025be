//! The kubelet's AtomicWriter (`pkg/volume/util/atomic_writer.go`, §1.10): projects a set of
//! files into a volume directory so a reader sees the old set or the new one, never a mix. The
//! files live in a hidden `..<timestamp>` directory, `..data` links to it and is swapped with one
//! rename, and every user-visible name is a symlink into `..data`. It never touches other paths:
//! a `..data` that leads anywhere but to a data directory of its own is refused, and every file
//! is created new (`O_EXCL | O_NOFOLLOW`) in a directory the writer just made.

use std::{
    collections::BTreeSet,
    fs, io,
    os::unix::fs::{OpenOptionsExt, PermissionsExt, fchown, symlink},
    path::{Path, PathBuf},
};

use super::{
    FsError,
    ownership::set_volume_ownership,
    payload_paths::{InvalidPath, clean_payload},
};

/// The link to the current timestamped directory, and its replacement while swapping.
pub const DATA_DIR_NAME: &str = "..data";
const NEW_DATA_DIR_NAME: &str = "..data_tmp";

// The payload is built by the volume manager's pure core; the writer only puts it on disk.
pub use nodepulse_actors::volume_manager::content::{FileProjection, Payload};

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Every file already held these bytes and nothing had to go: no new data directory.
    Unchanged,
    /// A new data directory (its name, e.g. `..2026_12_01_04_35_18.3954087152`) is now `..data`.
    Written { data_dir: String },
}

/// Why a write failed. Invalid paths carry the kubelet's texts; retrying them never helps.
/// I/O failures leave the previous content in place and are worth retrying.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    #[error(transparent)]
    InvalidPath(#[from] InvalidPath),
    #[error(transparent)]
    Io(#[from] FsError),
    /// `..data` links to something other than a data directory beside it (a name written by
    /// someone else): its target is never read, walked or removed. Retrying does not help.
    #[error("{} links to {target:?}, not to a data directory of this volume: left alone", .link.display())]
    ForeignDataLink { link: PathBuf, target: PathBuf },
}

impl AtomicWriteError {
    /// Whether the same write may succeed later (an I/O error, not a bad path).
    pub fn is_retryable(&self) -> bool {
        matches!(self, AtomicWriteError::Io(_))
    }
}

fn io_error(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> AtomicWriteError {
    let at = FsError::at(step, path);
    move |source| at(source).into()
}

/// Writes payloads into one existing target directory. Callers serialise writes to it.
#[derive(Debug, Clone)]
pub struct AtomicWriter {
    target_dir: PathBuf,
    /// The pod's `fsGroup`: each new data set is given to it (read-only bits) before it shows.
    fs_group: Option<u32>,
}

impl AtomicWriter {
    /// A writer for `target_dir`, which must exist.
    pub fn new(target_dir: impl Into<PathBuf>) -> Result<Self, AtomicWriteError> {
        let target_dir = target_dir.into();
        fs::metadata(&target_dir).map_err(io_error("stat target directory", &target_dir))?;
        Ok(Self {
            target_dir,
            fs_group: None,
        })
    }

    /// Gives the volume to `fs_group`, as the kubelet's plugins do in the writer's
    /// permission hook (after the files are written, before `..data` flips to them).
    #[must_use]
    pub fn with_fs_group(mut self, fs_group: Option<u32>) -> Self {
        self.fs_group = fs_group;
        self
    }

    /// Projects `payload` into the target directory, in the kubelet's order of steps.
    pub fn write(&self, payload: &Payload) -> Result<WriteOutcome, AtomicWriteError> {
        // (1) Validate and clean every path before touching anything.
        let payload = clean_payload(payload)?;
        // (2) The data directory currently linked, if any.
        let data_link = self.target_dir.join(DATA_DIR_NAME);
        let old_dir = match fs::read_link(&data_link) {
            Ok(target) => Some(self.own_data_dir(&data_link, target)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error("read link", &data_link)(e)),
        };
        let mut to_remove = BTreeSet::new();
        let mut outcome = None;
        if let Some(old) = &old_dir {
            let old_path = self.target_dir.join(old);
            // (3) Visible names of the old set that the new one drops.
            to_remove = paths_to_remove(&payload, &old_path)?;
            // (4) Nothing changed: keep the data, but still restore missing visible links
            // (kubernetes#121472).
            if to_remove.is_empty() && !payload_differs(&payload, &old_path)? {
                outcome = Some(WriteOutcome::Unchanged);
            }
        }
        let outcome = match outcome {
            Some(unchanged) => unchanged,
            None => self.write_new_data_dir(&payload, &data_link)?,
        };
        // (10) Links for new top-level names; existing links are never rewritten.
        self.create_user_visible_links(&payload)?;
        // (11) Drop visible names that vanished, (12) then the old data directory.
        self.remove_user_visible_paths(&to_remove)?;
        if let (WriteOutcome::Written { .. }, Some(old)) = (&outcome, &old_dir) {
            let old_path = self.target_dir.join(old);
            fs::remove_dir_all(&old_path).map_err(io_error("remove old data dir", &old_path))?;
        }
        self.remove_stray_data_dirs(&data_link)?;
        Ok(outcome)
    }

    /// `target` if it is one name beside `..data`, of the writer's own form (`..` first), that
    /// is a directory or nothing: `Path::join` would take an absolute or `../` target out of the
    /// volume, and an update removes the old data directory with all it holds.
    fn own_data_dir(&self, data_link: &Path, target: PathBuf) -> Result<PathBuf, AtomicWriteError> {
        let mut parts = target.components();
        let own_name = match (parts.next(), parts.next()) {
            (Some(std::path::Component::Normal(name)), None) => {
                name.to_string_lossy().starts_with("..")
                    && name != DATA_DIR_NAME
                    && name != NEW_DATA_DIR_NAME
            }
            _ => false,
        };
        let is_dir_or_missing = || match fs::symlink_metadata(self.target_dir.join(&target)) {
            Ok(meta) => meta.is_dir(),
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        if own_name && is_dir_or_missing() {
            Ok(target)
        } else {
            Err(AtomicWriteError::ForeignDataLink {
                link: data_link.to_owned(),
                target,
            })
        }
    }

    /// A process killed between making a timestamped directory and linking it leaves that
    /// directory behind, never linked and never removed by the steps above: removed here.
    /// Names starting with `..` are the writer's own (a payload path may not start so).
    fn remove_stray_data_dirs(&self, data_link: &Path) -> Result<(), AtomicWriteError> {
        let linked = fs::read_link(data_link).map_err(io_error("read link", data_link))?;
        let entries = fs::read_dir(&self.target_dir).map_err(io_error("list", &self.target_dir))?;
        for entry in entries {
            let entry = entry.map_err(io_error("list", &self.target_dir))?;
            let name = entry.file_name();
            let stray = name.to_string_lossy().starts_with("..")
                && name != DATA_DIR_NAME
                && name != NEW_DATA_DIR_NAME
                && Path::new(&name) != linked
                && entry.file_type().is_ok_and(|kind| kind.is_dir());
            if stray {
                let path = entry.path();
                fs::remove_dir_all(&path).map_err(io_error("remove stray data dir", &path))?;
            }
        }
        Ok(())
    }

    /// Steps (5)–(9): a new timestamped directory with the payload, linked as `..data`.
    fn write_new_data_dir(
        &self,
        payload: &Payload,
        data_link: &Path,
    ) -> Result<WriteOutcome, AtomicWriteError> {
        let new_dir = self.new_timestamped_dir()?;
        let name = new_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let swapped = write_payload(payload, &new_dir).and_then(|()| {
            if let Some(group) = self.fs_group {
                set_volume_ownership(&self.target_dir, group, true)?;
            }
            let tmp_link = self.target_dir.join(NEW_DATA_DIR_NAME);
            // A crash between symlink and rename leaves the tmp link behind; the kubelet would
            // fail on it forever, so clear it first.
            let _ = fs::remove_file(&tmp_link);
            symlink(&name, &tmp_link).map_err(io_error("create link", &tmp_link))?;
            fs::rename(&tmp_link, data_link).map_err(|e| {
                let _ = fs::remove_file(&tmp_link);
                io_error("rename link", data_link)(e)
            })
        });
        if let Err(e) = swapped {
            let _ = fs::remove_dir_all(&new_dir);
            return Err(e);
        }
        Ok(WriteOutcome::Written { data_dir: name })
    }

    /// `..<UTC time as 2006_01_02_15_04_05>.<random decimal>`, mode 0755 whatever the umask.
    fn new_timestamped_dir(&self) -> Result<PathBuf, AtomicWriteError> {
        let stamp = jiff::Timestamp::now().strftime("%Y_%m_%d_%H_%M_%S");
        let mut attempts = 0;
        loop {
            let dir = self
                .target_dir
                .join(format!("..{stamp}.{}", rand::random::<u32>()));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    set_mode(&dir, 0o755)?;
                    return Ok(dir);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 100 => {
                    attempts += 1;
                }
                Err(e) => return Err(io_error("create data dir", &dir)(e)),
            }
        }
    }

    fn create_user_visible_links(&self, payload: &Payload) -> Result<(), AtomicWriteError> {
        let top_level: BTreeSet<&str> = payload
            .keys()
            .map(|path| path.split('/').next().unwrap_or(path))
            .collect();
        for name in top_level {
            let visible = self.target_dir.join(name);
            if fs::symlink_metadata(&visible).is_err() {
                let target = Path::new(DATA_DIR_NAME).join(name);
                symlink(&target, &visible).map_err(io_error("create link", &visible))?;
            }
        }
        Ok(())
    }

    /// Only top-level names are links; deeper paths vanish with the old data directory.
    fn remove_user_visible_paths(&self, paths: &BTreeSet<String>) -> Result<(), AtomicWriteError> {
        let mut last_error = Ok(());
        for path in paths.iter().filter(|p| !p.contains('/')) {
            let visible = self.target_dir.join(path);
            if let Err(e) = fs::remove_file(&visible) {
                last_error = Err(io_error("remove old link", &visible)(e));
            }
        }
        last_error
    }
}

/// Every path under the old data directory that is neither a payload file nor one of its
/// parent directories.
fn paths_to_remove(
    payload: &Payload,
    old_dir: &Path,
) -> Result<BTreeSet<String>, AtomicWriteError> {
    let mut old_paths = BTreeSet::new();
    walk(old_dir, "", &mut old_paths)?;
    let mut new_paths = BTreeSet::new();
    for path in payload.keys() {
        let mut sub = path.as_str();
        loop {
            new_paths.insert(sub.to_owned());
            match sub.rsplit_once('/') {
                Some((parent, _)) => sub = parent,
                None => break,
            }
        }
    }
    Ok(old_paths.difference(&new_paths).cloned().collect())
}

fn walk(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) -> Result<(), AtomicWriteError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error("read dir", dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_error("read dir", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&entry.path(), &relative, out)?;
        }
        out.insert(relative);
    }
    Ok(())
}

/// Whether some payload file is missing from the old data directory, holds other bytes or is
/// not the regular file the writer made (a link or a FIFO in its place is never read through).
fn payload_differs(payload: &Payload, old_dir: &Path) -> Result<bool, AtomicWriteError> {
    for (path, file) in payload {
        let old = old_dir.join(path);
        match read_own_file(&old) {
            Ok(Some(bytes)) if bytes == file.data => {}
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(io_error("read old file", &old)(e)),
        }
    }
    Ok(false)
}

/// The bytes of `path` if it is a regular file; `None` for a link (`O_NOFOLLOW`), a FIFO or
/// a device (`O_NONBLOCK` so opening one never waits).
fn read_own_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let mut opened = match opened {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => return Err(e),
    };
    if !opened.metadata()?.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut opened, &mut bytes)?;
    Ok(Some(bytes))
}

/// Step (6): each file with its parent directories, its exact mode and owner, in `dir` the
/// writer just made.
fn write_payload(payload: &Payload, dir: &Path) -> Result<(), AtomicWriteError> {
    for (path, file) in payload {
        let full = dir.join(path);
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(io_error("create dir", parent))?;
        }
        write_new_file(&full, file)?;
    }
    Ok(())
}

/// Creates `path` as a new file: an existing file or a link there is an error, never written
/// through. Mode and owner are set on the open file, so they too reach nothing else.
fn write_new_file(path: &Path, file: &FileProjection) -> Result<(), AtomicWriteError> {
    let mut created = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_error("create file", path))?;
    io::Write::write_all(&mut created, &file.data).map_err(io_error("write file", path))?;
    created
        .set_permissions(fs::Permissions::from_mode(file.mode))
        .map_err(io_error("chmod", path))?;
    if let Some(uid) = file.fs_user {
        fchown(&created, Some(uid), None).map_err(io_error("chown file", path))?;
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), AtomicWriteError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_error("chmod", path))
}

#[cfg(test)]
#[path = "atomic_writer_tests.rs"]
mod tests;
