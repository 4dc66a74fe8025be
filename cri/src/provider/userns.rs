//! The kubelet's user-namespace manager (`pkg/kubelet/userns`): each `hostUsers: false` pod
//! gets its own block of host IDs (65,536 by default, `userNamespaces.idsPerPod`), mapped
//! from ID 0 inside. The blocks come from one range (the kubelet's default: every ID from the
//! block size up); which block a pod holds is kept in `<rootDir>/pods/<uid>/userns`, read
//! back at start, so a restart gives every pod the block it had. The record is byte for byte
//! the kubelet's (the JSON of its `userNamespace` struct), written atomically: a temporary file
//! renamed over it, then the directory synced, so a crash never leaves half a file.

use std::{
    collections::HashMap,
    fs::{self, File},
    io::Write,
    path::{Path, PathBuf},
    sync::Mutex,
};

use nodepulse_actors::ports::{IdMapping, UserNamespace};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// `userNsUnitLength`: blocks are whole multiples of this.
pub const UNIT_LENGTH: u32 = 65_536;
/// `DefaultKubeletUserNamespacesIDsPerPod`.
pub const DEFAULT_IDS_PER_POD: u32 = 65_536;

/// Why the manager cannot be made, or a pod's block not found, recorded or written. The
/// construction errors come from the configuration or the disk and stay until they change.
#[derive(Debug, thiserror::Error)]
pub enum UsernsError {
    #[error("kubelet user namespace length {0} is not a multiple of {UNIT_LENGTH}")]
    LengthNotUnit(u32),
    #[error("kubelet user assigned ID {first} is not a multiple of {length}")]
    FirstNotMultiple { first: u32, length: u32 },
    #[error("kubelet user assigned ID {first} must be greater or equal to {length}")]
    FirstTooLow { first: u32, length: u32 },
    #[error("kubelet user assigned IDs length {range} is not a multiple of {length}")]
    RangeNotMultiple { range: u32, length: u32 },
    #[error("kubelet user assigned IDs are not enough to support {0} pods")]
    TooFewForMaxPods(u32),
    #[error("read pods from disk: {0}")]
    ListPods(#[source] std::io::Error),
    #[error("record pod mappings for existing pod {uid:?}: {source}")]
    Existing {
        uid: String,
        #[source]
        source: Box<UsernsError>,
    },
    #[error("could not find an empty slot to allocate a user namespace")]
    Full,
    #[error("wrong user namespace length {0}")]
    WrongLength(u32),
    #[error("wrong user namespace offset specified {0}")]
    WrongOffset(u32),
    #[error("different user namespace range already used by pod {0:?}")]
    DifferentRange(String),
    #[error("id {0} is out of range")]
    OutOfRange(u32),
    #[error("range picked for pod {0:?} already taken")]
    Taken(String),
    #[error("invalid user namespace mappings file: {0}")]
    InvalidFile(#[source] serde_json::Error),
    #[error("invalid user namespace configuration: {0}")]
    InvalidMappings(&'static str),
    #[error("user namespace store {path}: {source}")]
    Store {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The host IDs pods' blocks come from: `first` up to `first + length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub first: u32,
    pub length: u32,
}

impl IdRange {
    /// The kubelet's default (no `kubelet` user with subordinate IDs): every ID from one block
    /// up, so ID 0 on the host is never mapped.
    pub fn default_for(ids_per_pod: u32) -> Self {
        Self {
            first: ids_per_pod,
            length: u32::try_from((1_u64 << 32) - u64::from(ids_per_pod)).unwrap_or(u32::MAX),
        }
    }
}

/// Which blocks are taken and by which pod.
#[derive(Debug)]
pub struct UsernsManager {
    pods_dir: PathBuf,
    /// One flag per block of the range.
    used: Vec<bool>,
    used_by: HashMap<String, u32>,
    /// The first block's index counted from host ID 0.
    offset: u32,
    ids_per_pod: u32,
}

impl UsernsManager {
    /// The kubelet's `MakeUserNsManager`: checks the range against the block size and
    /// `max_pods`, then records every block the pods under `pods_dir` hold.
    pub fn new(
        pods_dir: &Path,
        ids_per_pod: u32,
        range: IdRange,
        max_pods: u32,
    ) -> Result<Self, UsernsError> {
        let length = ids_per_pod;
        if length == 0 || !length.is_multiple_of(UNIT_LENGTH) {
            return Err(UsernsError::LengthNotUnit(length));
        }
        if !range.first.is_multiple_of(length) {
            return Err(UsernsError::FirstNotMultiple {
                first: range.first,
                length,
            });
        }
        if range.first < length {
            return Err(UsernsError::FirstTooLow {
                first: range.first,
                length,
            });
        }
        if !range.length.is_multiple_of(length) {
            return Err(UsernsError::RangeNotMultiple {
                range: range.length,
                length,
            });
        }
        if range.length / length < max_pods {
            return Err(UsernsError::TooFewForMaxPods(max_pods));
        }
        let mut manager = Self {
            pods_dir: pods_dir.to_owned(),
            used: vec![false; (range.length / length) as usize],
            used_by: HashMap::new(),
            offset: range.first / length,
            ids_per_pod: length,
        };
        let listed = match std::fs::read_dir(pods_dir) {
            Ok(listed) => listed,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(manager),
            Err(error) => return Err(UsernsError::ListPods(error)),
        };
        for entry in listed {
            let entry = entry.map_err(UsernsError::ListPods)?;
            if !entry.file_type().map_err(UsernsError::ListPods)?.is_dir() {
                continue;
            }
            let uid = entry.file_name().to_string_lossy().into_owned();
            manager
                .record_from_disk(&uid)
                .map_err(|source| UsernsError::Existing {
                    uid: uid.clone(),
                    source: Box::new(source),
                })?;
        }
        Ok(manager)
    }

    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.pods_dir.join(uid)
    }

    /// Records the block the pod's file names, if it has one.
    fn record_from_disk(&mut self, uid: &str) -> Result<Option<PodMappings>, UsernsError> {
        let Some(content) = read_record(&self.pod_dir(uid))? else {
            return Ok(None);
        };
        self.parse_and_record(uid, &content).map(Some)
    }

    /// The kubelet's `parseUserNsFileAndRecord`: one mapping, the same for UIDs and GIDs,
    /// root mapped, and a block this manager could have handed out.
    pub fn parse_and_record(
        &mut self,
        uid: &str,
        content: &[u8],
    ) -> Result<PodMappings, UsernsError> {
        let mappings = PodMappings::parse(content)?;
        let mapping = mappings.uid_mappings[0];
        self.record(uid, mapping.host_id, mapping.length)?;
        Ok(mappings)
    }

    /// The block index of host ID `first`, when inside the range.
    fn index(&self, first: u32) -> Option<usize> {
        let block = (first / self.ids_per_pod).checked_sub(self.offset)? as usize;
        (block < self.used.len()).then_some(block)
    }

    /// Whether the block holding host ID `id` is taken (outside the range counts as taken).
    #[cfg(test)]
    pub fn is_set(&self, id: u32) -> bool {
        self.index(id).is_none_or(|block| self.used[block])
    }

    /// Whether `uid` holds a block.
    #[cfg(test)]
    pub fn allocated(&self, uid: &str) -> bool {
        self.used_by.contains_key(uid)
    }

    /// Takes a free block for `uid`, scanning from a random one as the kubelet's allocator
    /// does; the block's first host ID and its length.
    pub fn allocate_one(&mut self, uid: &str) -> Result<(u32, u32), UsernsError> {
        let blocks = self.used.len();
        let start = rand::rng().random_range(0..blocks.max(1));
        let free = (0..blocks)
            .map(|step| (start + step) % blocks)
            .find(|&block| !self.used[block])
            .ok_or(UsernsError::Full)?;
        self.used[free] = true;
        let first = (u32::try_from(free).unwrap_or(u32::MAX) + self.offset) * self.ids_per_pod;
        self.used_by.insert(uid.to_owned(), first);
        Ok((first, self.ids_per_pod))
    }

    /// Records that `uid` holds the block from host ID `first` (again, when it already does).
    pub fn record(&mut self, uid: &str, first: u32, length: u32) -> Result<(), UsernsError> {
        if length != self.ids_per_pod {
            return Err(UsernsError::WrongLength(length));
        }
        if !first.is_multiple_of(self.ids_per_pod) {
            return Err(UsernsError::WrongOffset(first));
        }
        let previous = self.used_by.get(uid).copied();
        if previous.is_some_and(|previous| previous != first) {
            return Err(UsernsError::DifferentRange(uid.to_owned()));
        }
        let block = self.index(first).ok_or(UsernsError::OutOfRange(first))?;
        if previous.is_some() {
            return Ok(());
        }
        if self.used[block] {
            return Err(UsernsError::Taken(uid.to_owned()));
        }
        self.used[block] = true;
        self.used_by.insert(uid.to_owned(), first);
        Ok(())
    }

    /// Frees `uid`'s block and removes its file (the pod is gone).
    pub fn release(&mut self, uid: &str) {
        let Some(first) = self.used_by.remove(uid) else {
            return;
        };
        // The kubelet ignores a failed removal too: the next start finds the pod dir gone.
        let _ = std::fs::remove_file(self.pod_dir(uid).join(MAPPINGS_FILE));
        if let Some(block) = self.index(first) {
            self.used[block] = false;
        }
    }

    /// The pod's user namespace (the kubelet's `GetOrCreateUserNamespaceMappings` once the
    /// runtime said it can): the block on disk, else a new one, written before it is used.
    pub fn get_or_create(&mut self, uid: &str) -> Result<UserNamespace, UsernsError> {
        let mappings = match self.record_from_disk(uid)? {
            Some(mappings) => mappings,
            None => {
                let (first, length) = self.allocate_one(uid)?;
                let mappings = PodMappings::single(first, length);
                if let Err(error) = write_record(&self.pod_dir(uid), &mappings) {
                    self.release(uid);
                    return Err(error);
                }
                mappings
            }
        };
        Ok(UserNamespace::Pod {
            uids: mappings.uid_mappings.clone(),
            gids: mappings.gid_mappings,
        })
    }

    /// The kubelet's `CleanupOrphanedPodUsernsAllocations`: frees every block whose pod is
    /// neither `known` nor has a directory on disk any more.
    pub fn cleanup_orphans(&mut self, known: &[&str]) -> Result<(), UsernsError> {
        let on_disk: Vec<String> = match std::fs::read_dir(&self.pods_dir) {
            Ok(listed) => listed
                .filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(UsernsError::ListPods(error)),
        };
        for uid in &on_disk {
            if !known.contains(&uid.as_str()) {
                self.release(uid);
            }
        }
        let gone: Vec<String> = (self.used_by.keys())
            .filter(|uid| !on_disk.contains(uid))
            .cloned()
            .collect();
        for uid in gone {
            self.release(&uid);
        }
        Ok(())
    }
}

/// The one mapping the kubelet writes: `length` IDs from 0 inside to `first` outside.
fn root_mapping(first: u32, length: u32) -> IdMapping {
    IdMapping {
        host_id: first,
        container_id: 0,
        length,
    }
}

/// What the engine's user namespaces are made from, and the manager once made.
#[derive(Debug)]
pub struct UserNamespaces {
    /// `userNamespaces.idsPerPod`.
    pub ids_per_pod: u32,
    /// `maxPods`: the range must hold a block for each.
    pub max_pods: u32,
    pub(crate) manager: Mutex<Option<UsernsManager>>,
}

impl UserNamespaces {
    pub fn new(ids_per_pod: u32, max_pods: u32) -> Self {
        Self {
            ids_per_pod,
            max_pods,
            manager: Mutex::new(None),
        }
    }
}

impl Default for UserNamespaces {
    fn default() -> Self {
        Self::new(DEFAULT_IDS_PER_POD, 110)
    }
}

/// The record's file name in the pod's directory (the kubelet's `mappingsFile`).
pub const MAPPINGS_FILE: &str = "userns";

/// The kubelet's `userNamespace`: its JSON field names and order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMappings {
    pub uid_mappings: Vec<IdMapping>,
    pub gid_mappings: Vec<IdMapping>,
}

impl PodMappings {
    /// The mappings the kubelet makes: the same one block for UIDs and GIDs, from root up.
    pub fn single(first: u32, length: u32) -> Self {
        Self {
            uid_mappings: vec![root_mapping(first, length)],
            gid_mappings: vec![root_mapping(first, length)],
        }
    }

    /// Parses a record and checks it is one the kubelet could have written, with its messages.
    pub fn parse(content: &[u8]) -> Result<Self, UsernsError> {
        let mappings: Self = serde_json::from_slice(content).map_err(UsernsError::InvalidFile)?;
        if mappings.uid_mappings.len() != 1 {
            return Err(UsernsError::InvalidMappings(
                "no more than one mapping allowed.",
            ));
        }
        if mappings.uid_mappings.len() != mappings.gid_mappings.len() {
            return Err(UsernsError::InvalidMappings(
                "GID and UID mappings should be identical.",
            ));
        }
        if mappings.uid_mappings[0] != mappings.gid_mappings[0] {
            return Err(UsernsError::InvalidMappings(
                "GID and UID mapping should be identical",
            ));
        }
        // Runtimes assume root is mapped, and nothing else is ever written.
        if mappings.uid_mappings[0].container_id != 0 {
            return Err(UsernsError::InvalidMappings("UID 0 must be mapped"));
        }
        if mappings.gid_mappings[0].container_id != 0 {
            return Err(UsernsError::InvalidMappings("GID 0 must be mapped"));
        }
        Ok(mappings)
    }
}

fn store_error(path: &Path, source: std::io::Error) -> UsernsError {
    UsernsError::Store {
        path: path.to_owned(),
        source,
    }
}

/// The record's bytes; `None` when the pod has none (an empty file counts as none).
fn read_record(pod_dir: &Path) -> Result<Option<Vec<u8>>, UsernsError> {
    let path = pod_dir.join(MAPPINGS_FILE);
    match fs::read(&path) {
        Ok(content) if content.is_empty() => Ok(None),
        Ok(content) => Ok(Some(content)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(store_error(&path, error)),
    }
}

/// Writes the record atomically and durably.
fn write_record(pod_dir: &Path, mappings: &PodMappings) -> Result<(), UsernsError> {
    let data = serde_json::to_vec(mappings).map_err(UsernsError::InvalidFile)?;
    fs::create_dir_all(pod_dir).map_err(|error| store_error(pod_dir, error))?;
    let path = pod_dir.join(MAPPINGS_FILE);
    let temporary = pod_dir.join(format!(".{MAPPINGS_FILE}.tmp"));
    let written = File::create(&temporary)
        .and_then(|mut file| {
            file.write_all(&data)?;
            file.sync_all()
        })
        .and_then(|()| fs::rename(&temporary, &path));
    if let Err(error) = written {
        let _ = fs::remove_file(&temporary);
        return Err(store_error(&path, error));
    }
    // The rename is atomic; syncing the directory makes it durable.
    File::open(pod_dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| store_error(pod_dir, error))
}
