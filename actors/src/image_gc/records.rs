//! The image manager's pure core (the kubelet's `image_gc_manager.go`): what it remembers of
//! each image (first detected, last used, size, pinned), which images may go and in what order,
//! how many bytes must be freed, and the kubelet's texts. No I/O; time is an argument.

use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use tokio::time::Instant;

use crate::ports::ImageInfo;

/// What the image manager remembers of one image, keyed by the runtime's image ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecord {
    /// The first time this process saw the image (`imageMinimumGCAge` counts from here).
    pub first_detected: Instant,
    /// The last time a container used it; `None`: not seen in use since this process started.
    pub last_used: Option<Instant>,
    pub size_bytes: u64,
    pub pinned: bool,
    pub in_use: bool,
    /// A tag or digest, for logs and the debug view.
    pub name: String,
}

/// Every image the runtime holds, as last detected.
#[derive(Debug, Clone, Default)]
pub struct ImageRecords {
    records: BTreeMap<String, ImageRecord>,
}

/// The references the runtime's containers (running or exited) were created from: an image
/// ID, tag or digest each, matched against every name an image has.
pub fn image_in_use(image: &ImageInfo, in_use: &HashSet<String>) -> bool {
    in_use.contains(&image.id)
        || image
            .repo_tags
            .iter()
            .chain(&image.repo_digests)
            .any(|name| in_use.contains(name))
}

impl ImageRecords {
    /// `detectImages`: records the runtime's images at `now`, marks those in use as used now,
    /// and forgets images the runtime no longer has.
    pub fn detect(&mut self, images: &[ImageInfo], in_use: &HashSet<String>, now: Instant) {
        let present: HashSet<&str> = images.iter().map(|image| image.id.as_str()).collect();
        self.records.retain(|id, _| present.contains(id.as_str()));
        for image in images {
            let used = image_in_use(image, in_use);
            let record = self
                .records
                .entry(image.id.clone())
                .or_insert_with(|| ImageRecord {
                    first_detected: now,
                    last_used: None,
                    size_bytes: image.size_bytes,
                    pinned: image.pinned,
                    in_use: used,
                    name: display_name(image),
                });
            record.size_bytes = image.size_bytes;
            record.pinned = image.pinned;
            record.in_use = used;
            if used {
                record.last_used = Some(now);
            }
        }
    }

    /// Forgets one image, removed by the collector.
    pub fn forget(&mut self, id: &str) {
        self.records.remove(id);
    }

    pub fn get(&self, id: &str) -> Option<&ImageRecord> {
        self.records.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &ImageRecord)> {
        self.records.iter()
    }

    /// The images that may be collected (neither in use nor pinned), least recently used
    /// first, ties broken by first detection.
    pub fn candidates(&self) -> Vec<Candidate> {
        let mut candidates: Vec<Candidate> = self
            .records
            .iter()
            .filter(|(_, record)| !record.in_use && !record.pinned)
            .map(|(id, record)| Candidate {
                id: id.clone(),
                name: record.name.clone(),
                size_bytes: record.size_bytes,
                first_detected: record.first_detected,
                last_used: record.last_used,
            })
            .collect();
        candidates.sort_by(|a, b| {
            a.last_used
                .cmp(&b.last_used)
                .then(a.first_detected.cmp(&b.first_detected))
                .then(a.id.cmp(&b.id))
        });
        candidates
    }
}

fn display_name(image: &ImageInfo) -> String {
    image
        .repo_tags
        .first()
        .or(image.repo_digests.first())
        .cloned()
        .unwrap_or_else(|| image.id.clone())
}

/// An image the collector may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: String,
    pub name: String,
    pub size_bytes: u64,
    pub first_detected: Instant,
    pub last_used: Option<Instant>,
}

/// `freeSpace`'s filter: candidates not used at or after `free_time` and detected at least
/// `min_age` before it, in the order they are removed.
pub fn removable_for_space(
    candidates: &[Candidate],
    free_time: Instant,
    min_age: Duration,
) -> Vec<Candidate> {
    candidates
        .iter()
        .filter(|candidate| candidate.last_used.is_none_or(|used| used < free_time))
        .filter(|candidate| {
            free_time.saturating_duration_since(candidate.first_detected) >= min_age
        })
        .cloned()
        .collect()
}

/// The max-age pass: candidates unused for longer than `max_age` (zero: off), once the
/// process has been up longer than `max_age`. An image never seen in use counts from its
/// first detection, which this process's start bounds.
pub fn expired(
    candidates: &[Candidate],
    now: Instant,
    started: Instant,
    max_age: Duration,
) -> Vec<Candidate> {
    if max_age.is_zero() || now.saturating_duration_since(started) <= max_age {
        return Vec::new();
    }
    candidates
        .iter()
        .filter(|candidate| {
            let since = candidate.last_used.unwrap_or(candidate.first_detected);
            now.saturating_duration_since(since) > max_age
        })
        .cloned()
        .collect()
}

/// The image filesystem as the collector reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageFs {
    pub capacity_bytes: u64,
    pub available_bytes: u64,
}

/// Why a collection could not even be attempted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    /// The kubelet's `InvalidDiskCapacity` text.
    #[error("invalid capacity 0 on image filesystem")]
    ZeroCapacity,
}

/// How far above the high threshold the image filesystem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceNeed {
    /// `100 − available×100/capacity`, as the kubelet's integer division gives it.
    pub usage_percent: u64,
    /// Bytes to free to get down to the low threshold; zero: below the high threshold.
    pub bytes_to_free: u64,
}

/// Steps 3–4 of `GarbageCollect`: the usage and how much to free to reach `low` once it is at
/// or above `high`.
pub fn space_need(fs: ImageFs, high: u8, low: u8) -> Result<SpaceNeed, UsageError> {
    if fs.capacity_bytes == 0 {
        return Err(UsageError::ZeroCapacity);
    }
    let capacity = u128::from(fs.capacity_bytes);
    let available = u128::from(fs.available_bytes.min(fs.capacity_bytes));
    let usage_percent = 100 - available * 100 / capacity;
    let bytes_to_free = if usage_percent >= u128::from(high) {
        (capacity * u128::from(100 - low) / 100).saturating_sub(available)
    } else {
        0
    };
    Ok(SpaceNeed {
        usage_percent: u64::try_from(usage_percent).unwrap_or(100),
        bytes_to_free: u64::try_from(bytes_to_free).unwrap_or(u64::MAX),
    })
}

/// The `FreeDiskSpaceFailed` event's text (and the collection's error), as the kubelet writes it.
pub fn free_disk_space_failed(usage_percent: u64, capacity_bytes: u64, freed: u64) -> String {
    format!(
        "Insufficient free disk space on the node's image filesystem ({usage_percent}% of {} used). Failed to free sufficient space by deleting unused images (freed {freed} bytes). Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
        format_bytes(capacity_bytes)
    )
}

/// The kubelet's byte size: `%d B` below 1 KiB, else `%.1f` of the largest 1024-based unit.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    #[allow(clippy::cast_precision_loss)] // a display figure with one decimal
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
