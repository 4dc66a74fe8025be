//! From the host's figures to signal observations: the kubelet's definitions of each signal's
//! "available" and "capacity", and the rule that the image filesystem is the node's when the
//! runtime has no dedicated one. Pure.

use crate::ports::{FsStats, HostObservation};

use super::signals::{Observation, Observations, Signal};

/// The observations of one pass, and why any figure is missing.
pub fn observations(host: &HostObservation) -> (Observations, Vec<String>) {
    let mut observed = Observations::new();
    let mut errors = Vec::new();
    match &host.memory {
        Ok(memory) => {
            observed.insert(
                Signal::MemoryAvailable,
                Observation {
                    available: memory.available_bytes(),
                    capacity: memory.capacity_bytes,
                },
            );
        }
        Err(error) => errors.push(format!("memory: {error}")),
    }
    if let Some(pods) = &host.allocatable_memory {
        observed.insert(
            Signal::AllocatableMemoryAvailable,
            Observation {
                available: pods.available_bytes(),
                capacity: pods.capacity_bytes,
            },
        );
    }
    let nodefs = match &host.nodefs {
        Ok(nodefs) => {
            insert_fs(
                &mut observed,
                nodefs,
                Signal::NodefsAvailable,
                Signal::NodefsInodesFree,
            );
            Some(nodefs)
        }
        Err(error) => {
            errors.push(format!("nodefs: {error}"));
            None
        }
    };
    let imagefs = match &host.imagefs {
        Some(Ok(imagefs)) => Some(imagefs),
        Some(Err(error)) => {
            errors.push(format!("imagefs: {error}"));
            None
        }
        None => None,
    };
    // Without a dedicated image filesystem (or without an answer from the runtime), the images
    // live on the node's filesystem, so imagefs is nodefs.
    if let Some(fs) = imagefs.or(nodefs) {
        insert_fs(
            &mut observed,
            fs,
            Signal::ImagefsAvailable,
            Signal::ImagefsInodesFree,
        );
    }
    match &host.pids {
        Ok(pids) => {
            observed.insert(
                Signal::PidAvailable,
                Observation {
                    available: pids.max_tasks.saturating_sub(pids.running_tasks),
                    capacity: pids.max_tasks,
                },
            );
        }
        Err(error) => errors.push(format!("pids: {error}")),
    }
    (observed, errors)
}

/// Whether the runtime's image filesystem is a device of its own.
pub fn dedicated_image_fs(host: &HostObservation) -> bool {
    match (&host.nodefs, &host.imagefs) {
        (Ok(nodefs), Some(Ok(imagefs))) => nodefs.device != imagefs.device,
        _ => false,
    }
}

fn insert_fs(observed: &mut Observations, fs: &FsStats, bytes: Signal, inodes: Signal) {
    observed.insert(
        bytes,
        Observation {
            available: fs.available_bytes,
            capacity: fs.capacity_bytes,
        },
    );
    if fs.inodes > 0 {
        observed.insert(
            inodes,
            Observation {
                available: fs.inodes_free,
                capacity: fs.inodes,
            },
        );
    }
}
