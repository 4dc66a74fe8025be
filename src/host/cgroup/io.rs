//! A cgroup's block I/O by device: cgroup v1's `blkio.throttle.io_service_bytes` and
//! `io_serviced` (`MAJ:MIN Read N` lines), v2's `io.stat` (`MAJ:MIN rbytes=N wbytes=N …`);
//! and the device names cAdvisor labels them with (`/dev/<name>` from sysfs).

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    sync::Mutex,
};

/// One device's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceIo {
    pub major: u32,
    pub minor: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
}

fn device(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// v1: the bytes and the operations files; a device in neither is left out (the kernel
/// writes only `Total 0` when it counted nothing).
pub fn from_blkio(bytes: &str, operations: &str) -> Vec<DeviceIo> {
    let mut devices: BTreeMap<(u32, u32), DeviceIo> = BTreeMap::new();
    for (text, is_bytes) in [(bytes, true), (operations, false)] {
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(id), Some(kind), Some(value)) = (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let (Some((major, minor)), Ok(value)) = (device(id), value.parse::<u64>()) else {
                continue;
            };
            let entry = devices.entry((major, minor)).or_insert(DeviceIo {
                major,
                minor,
                ..DeviceIo::default()
            });
            match (kind, is_bytes) {
                ("Read", true) => entry.read_bytes = value,
                ("Write", true) => entry.write_bytes = value,
                ("Read", false) => entry.reads = value,
                ("Write", false) => entry.writes = value,
                _ => {}
            }
        }
    }
    devices.into_values().collect()
}

/// v2: one line a device.
pub fn from_io_stat(text: &str) -> Vec<DeviceIo> {
    let mut devices = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some((major, minor)) = fields.next().and_then(device) else {
            continue;
        };
        let mut counters = DeviceIo {
            major,
            minor,
            ..DeviceIo::default()
        };
        for field in fields {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            let value = value.parse().unwrap_or(0);
            match key {
                "rbytes" => counters.read_bytes = value,
                "wbytes" => counters.write_bytes = value,
                "rios" => counters.reads = value,
                "wios" => counters.writes = value,
                _ => {}
            }
        }
        devices.push(counters);
    }
    devices
}

/// Device names by number, read from sysfs once each (`DEVNAME` of
/// `/sys/dev/block/MAJ:MIN/uevent`, as `/dev/<name>`); a device sysfs does not know is named
/// by its numbers, so its series still stand apart.
#[derive(Debug)]
pub struct DeviceNames {
    root: PathBuf,
    known: Mutex<HashMap<(u32, u32), String>>,
}

impl DeviceNames {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            known: Mutex::default(),
        }
    }

    pub fn name(&self, major: u32, minor: u32) -> String {
        let mut known = self
            .known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known
            .entry((major, minor))
            .or_insert_with(|| {
                let uevent = self
                    .root
                    .join(format!("sys/dev/block/{major}:{minor}/uevent"));
                std::fs::read_to_string(uevent)
                    .ok()
                    .and_then(|text| {
                        text.lines()
                            .find_map(|line| line.strip_prefix("DEVNAME="))
                            .map(|name| format!("/dev/{name}"))
                    })
                    .unwrap_or_else(|| format!("{major}:{minor}"))
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blkio_lines_are_gathered_by_device_and_the_total_line_is_skipped() {
        let devices = from_blkio(
            "8:0 Read 10\n8:0 Write 20\n8:0 Total 30\n8:16 Read 1\nTotal 31\n",
            "8:0 Read 2\n8:0 Write 3\nTotal 5\n",
        );
        assert_eq!(devices.len(), 2);
        assert_eq!(
            (
                devices[0].read_bytes,
                devices[0].write_bytes,
                devices[0].reads,
                devices[0].writes
            ),
            (10, 20, 2, 3)
        );
        assert_eq!(
            (devices[1].major, devices[1].minor, devices[1].read_bytes),
            (8, 16, 1)
        );
        assert!(
            from_blkio("Total 0\n", "Total 0\n").is_empty(),
            "nothing counted"
        );
    }

    #[test]
    fn device_names_come_from_sysfs_or_fall_back_to_the_numbers() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("sys/dev/block/254:0");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("uevent"), "MAJOR=254\nMINOR=0\nDEVNAME=vda\n").expect("write");
        let names = DeviceNames::new(root.path());
        assert_eq!(names.name(254, 0), "/dev/vda");
        assert_eq!(names.name(8, 0), "8:0");
    }
}
