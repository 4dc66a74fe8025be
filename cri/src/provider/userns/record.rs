//! A pod's user-namespace record on disk, byte for byte the kubelet's: the JSON of its
//! `userNamespace` struct in `<rootDir>/pods/<uid>/userns`, written atomically (a temporary
//! file renamed over it, then the directory synced), so a kubelet and nodepulse read each
//! other's records and a crash never leaves half a file.

use std::{
    fs::{self, File},
    io::Write,
    path::Path,
};

use nodepulse_actors::ports::IdMapping;
use serde::{Deserialize, Serialize};

use super::{UsernsError, root_mapping};

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
pub fn read(pod_dir: &Path) -> Result<Option<Vec<u8>>, UsernsError> {
    let path = pod_dir.join(MAPPINGS_FILE);
    match fs::read(&path) {
        Ok(content) if content.is_empty() => Ok(None),
        Ok(content) => Ok(Some(content)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(store_error(&path, error)),
    }
}

/// Writes the record atomically and durably.
pub fn write(pod_dir: &Path, mappings: &PodMappings) -> Result<(), UsernsError> {
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
