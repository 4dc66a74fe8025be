//! One container's log rotated as the kubelet's container log manager does it
//! (`pkg/kubelet/logs/container_log_manager.go`): a missing log is reopened; a log at or over
//! the size has its leftovers and excess rotated files removed, oldest first, and is renamed to
//! `<log>.<YYYYMMDD-HHMMSS>` (local time), then the runtime reopens it; a failed reopen renames
//! it back, so the next pass tries again. Which files go is the pure [`plan`]'s choice. Before
//! the rename every rotated file left uncompressed (the one the previous rotation made) is
//! gzip'd as the kubelet's `compressLog` does: written to `<file>.tmp` with the file's mode,
//! renamed to `<file>.gz`, the original removed, the `.tmp` removed if anything failed. So
//! every rotated file but the newest is a `.gz`, and compressed files count toward
//! `containerLogMaxFiles` like the others.

use std::{
    fs::File,
    io,
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::Arc,
};

use jiff::{Timestamp, tz::TimeZone};

use crate::ports::{ContainerRuntime, ContainerRuntimeError};

/// The kubelet's suffixes: a compressed rotated log, and a compression's temporary file.
const COMPRESS_SUFFIX: &str = ".gz";
const TMP_SUFFIX: &str = ".tmp";

/// Why one container's log was not rotated. Every failure is retried by the next pass.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    #[error("failed to stat container log {path:?}: {source}")]
    Stat {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to list the rotated logs of {path:?}: {source}")]
    List {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to remove old log {path:?}: {source}")]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to compress log {path:?}: {source}")]
    Compress {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to rotate log {from:?} to {to:?}: {source}")]
    Rename {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to reopen container log {id:?}: {source}")]
    Reopen {
        id: String,
        #[source]
        source: ContainerRuntimeError,
    },
    #[error("the blocking pool refused the log's file work: {0}")]
    Pool(String),
}

/// What happened to one container's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Under the size: left alone.
    Small,
    /// It was missing: the runtime opened it anew.
    Reopened,
    /// Renamed to `to` and reopened; `removed` were the old files removed first, `compressed`
    /// the rotated files gzip'd (each now `<file>.gz`).
    Rotated {
        to: PathBuf,
        removed: Vec<PathBuf>,
        compressed: Vec<PathBuf>,
    },
}

/// The files to remove before `log` is rotated, among `rotated` (the names in its directory
/// that start with `<log's name>.`): leftovers of a failed compression (`.tmp`, and an
/// uncompressed file whose `.gz` exists), then the oldest until at most `max_files - 2` are
/// left (the current log and the one about to be rotated make `max_files`).
pub fn plan(rotated: &[String], max_files: usize) -> Vec<String> {
    let (mut in_use, mut remove): (Vec<String>, Vec<String>) = rotated
        .iter()
        .cloned()
        .partition(|name| is_in_use(name, rotated));
    in_use.sort();
    let excess = in_use.len().saturating_sub(max_files.saturating_sub(2));
    remove.extend(in_use.drain(..excess));
    remove
}

/// The kubelet's `isInUse`.
fn is_in_use(name: &str, all: &[String]) -> bool {
    if name.ends_with(TMP_SUFFIX) {
        return false;
    }
    if name.ends_with(COMPRESS_SUFFIX) {
        return true;
    }
    let compressed = format!("{name}{COMPRESS_SUFFIX}");
    !all.contains(&compressed)
}

/// `<log>.<YYYYMMDD-HHMMSS>`, the time in `zone` (the kubelet formats its local time).
pub fn rotated_path(log: &Path, now: Timestamp, zone: &TimeZone) -> PathBuf {
    let stamp = now.to_zoned(zone.clone()).strftime("%Y%m%d-%H%M%S");
    let mut name = log.as_os_str().to_owned();
    name.push(format!(".{stamp}"));
    PathBuf::from(name)
}

/// What one rotation needs: the policy and where time comes from.
#[derive(Debug, Clone)]
pub struct Policy {
    pub max_size: u64,
    pub max_files: usize,
    pub zone: TimeZone,
}

/// The logs of `containers` (id, log) that [`rotate`] has work for: those at or over
/// `max_size`, and those whose size cannot be read (missing: reopened; else: the error). Every
/// size is read in one blocking call, so a pass over 100 containers wakes one blocking thread,
/// not 100. If the blocking pool fails, every log is kept and [`rotate`] reports it.
pub async fn due(containers: Vec<(String, PathBuf)>, max_size: u64) -> Vec<(String, PathBuf)> {
    let logs: Vec<PathBuf> = containers.iter().map(|(_, log)| log.clone()).collect();
    let sizes = blocking(move || {
        logs.iter()
            .map(|log| std::fs::metadata(log).map(|metadata| metadata.len()))
            .collect::<Vec<_>>()
    })
    .await;
    let Ok(sizes) = sizes else {
        return containers;
    };
    containers
        .into_iter()
        .zip(sizes)
        .filter(|(_, size)| size.as_ref().map_or(true, |size| *size >= max_size))
        .map(|(container, _)| container)
        .collect()
}

/// Rotates container `id`'s log at `log` if `policy` says so, at wall time `now`.
pub async fn rotate(
    runtime: Arc<dyn ContainerRuntime>,
    policy: Policy,
    id: String,
    log: PathBuf,
    now: Timestamp,
) -> Result<Outcome, RotationError> {
    let size = {
        let log = log.clone();
        blocking(move || std::fs::metadata(&log).map(|metadata| metadata.len())).await?
    };
    match size {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            reopen(&*runtime, &id).await?;
            return Ok(Outcome::Reopened);
        }
        Err(source) => return Err(RotationError::Stat { path: log, source }),
        Ok(size) if size < policy.max_size => return Ok(Outcome::Small),
        Ok(_) => {}
    }
    let to = rotated_path(&log, now, &policy.zone);
    let (removed, compressed) = {
        let (log, to) = (log.clone(), to.clone());
        blocking(move || make_room_and_rename(&log, &to, policy.max_files)).await??
    };
    if let Err(error) = reopen(&*runtime, &id).await {
        // Renamed back, so the next pass rotates it again; the runtime still writes to it.
        let (from, back) = (to.clone(), log.clone());
        if let Ok(Err(rename)) = blocking(move || std::fs::rename(&from, &back)).await {
            tracing::error!(%rename, rotated = %to.display(), log = %log.display(), "failed to rename a rotated log back: its lines stay in the rotated file");
        }
        return Err(error);
    }
    Ok(Outcome::Rotated {
        to,
        removed,
        compressed,
    })
}

async fn reopen(runtime: &dyn ContainerRuntime, id: &str) -> Result<(), RotationError> {
    runtime
        .reopen_container_log(id.to_owned())
        .await
        .map_err(|source| RotationError::Reopen {
            id: id.to_owned(),
            source,
        })
}

/// Removes what [`plan`] chose among `log`'s rotated files, compresses the uncompressed ones
/// left, then renames `log` to `to`; the files removed and compressed.
fn make_room_and_rename(
    log: &Path,
    to: &Path,
    max_files: usize,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), RotationError> {
    let dir = log.parent().unwrap_or(Path::new("."));
    let prefix = format!("{}.", log.file_name().unwrap_or_default().to_string_lossy());
    let list = |source| RotationError::List {
        path: log.to_owned(),
        source,
    };
    let mut rotated = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list)? {
        let name = entry
            .map_err(list)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.starts_with(&prefix) {
            rotated.push(name);
        }
    }
    let mut removed = Vec::new();
    let gone = plan(&rotated, max_files);
    for name in &gone {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(source) if source.kind() != io::ErrorKind::NotFound => {
                return Err(RotationError::Remove { path, source });
            }
            _ => removed.push(path),
        }
    }
    let mut compressed = Vec::new();
    for name in rotated.iter().filter(|name| !gone.contains(name)) {
        if name.ends_with(COMPRESS_SUFFIX) {
            continue;
        }
        let path = dir.join(name);
        compress(&path).map_err(|source| RotationError::Compress {
            path: path.clone(),
            source,
        })?;
        compressed.push(path);
    }
    std::fs::rename(log, to).map_err(|source| RotationError::Rename {
        from: log.to_owned(),
        to: to.to_owned(),
        source,
    })?;
    Ok((removed, compressed))
}

/// The kubelet's `compressLog`: `log` gzip'd into `<log>.tmp` (created with `log`'s mode),
/// renamed to `<log>.gz`, then `log` removed; the `.tmp` is removed whatever happened.
pub fn compress(log: &Path) -> io::Result<()> {
    let mut tmp = log.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let result = compress_into(log, &tmp);
    // Best effort, as the kubelet's deferred Remove: gone already after the rename.
    let _ = std::fs::remove_file(&tmp);
    result
}

fn compress_into(log: &Path, tmp: &Path) -> io::Result<()> {
    let mut source = File::open(log)?;
    let mode = source.metadata()?.permissions().mode();
    let target = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(tmp)?;
    let mut encoder = flate2::write::GzEncoder::new(target, flate2::Compression::default());
    io::copy(&mut source, &mut encoder)?;
    encoder.finish()?.sync_all()?;
    let mut compressed = log.as_os_str().to_owned();
    compressed.push(COMPRESS_SUFFIX);
    std::fs::rename(tmp, PathBuf::from(compressed))?;
    std::fs::remove_file(log)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RotationError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| RotationError::Pool(error.to_string()))
}
