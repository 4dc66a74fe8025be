//! One image collection against the runtime (the kubelet's `GarbageCollect` and
//! `DeleteUnusedImages`): detect the images and those in use, read the image filesystem, and
//! remove what the pure core chose, one image at a time. Cheap to clone; the bookkeeping it
//! keeps is shared by every clone and outlives an actor's restart.

use std::{collections::HashSet, path::PathBuf, sync::Arc, time::Duration};

use nodepulse_supervisor::Kept;
use tokio::time::Instant;

use super::records::{
    Candidate, ImageFs, ImageRecords, SpaceNeed, UsageError, expired, free_disk_space_failed,
    removable_for_space, space_need,
};
use crate::ports::{
    ContainerFilter, ContainerRuntime, ContainerRuntimeError, HostError, HostSignals, PodsView,
    RuntimeError, RuntimeService,
};

/// What the image manager is configured with (the kubelet's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcSettings {
    /// `imageGCHighThresholdPercent` (85): collect at or above this image fs usage.
    pub high_threshold_percent: u8,
    /// `imageGCLowThresholdPercent` (80): collect down to this.
    pub low_threshold_percent: u8,
    /// `imageMinimumGCAge` (2m), from first detection.
    pub minimum_age: Duration,
    /// `imageMaximumGCAge` (0: off), from last use.
    pub maximum_age: Duration,
    /// How often a collection runs (the kubelet's fixed `ImageGCPeriod`, 5m).
    pub period: Duration,
}

impl ImageGcSettings {
    /// The kubelet's switch: a high threshold of 100 with no maximum age disables image GC.
    pub fn disabled(&self) -> bool {
        self.high_threshold_percent >= 100 && self.maximum_age.is_zero()
    }
}

/// Why a collection failed. Every variant may clear up by the next period.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GcError {
    #[error("failed to list images: {0}")]
    ListImages(#[source] RuntimeError),
    #[error("failed to list containers: {0}")]
    ListContainers(#[source] ContainerRuntimeError),
    #[error("failed to get image filesystem info: {0}")]
    ImageFsInfo(#[source] RuntimeError),
    /// The kubelet's text when the runtime reports no image filesystem.
    #[error("imageFs information is unavailable")]
    NoImageFs,
    #[error("failed to get image filesystem stats: {0}")]
    ImageFsStats(#[source] HostError),
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// Some removals failed (the kubelet's text).
    #[error(
        "wanted to free {wanted} bytes, but freed {freed} bytes space with errors in image deletion: {errors:?}"
    )]
    Removal {
        wanted: u64,
        freed: u64,
        errors: Vec<String>,
    },
    /// Everything removable is gone and the filesystem is still above the low threshold:
    /// the `FreeDiskSpaceFailed` text.
    #[error("{0}")]
    Insufficient(String),
}

/// Why an image was removed (the kubelet's metric reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    Age,
    Space,
}

/// One image the collector removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub id: String,
    pub name: String,
    pub size_bytes: u64,
    pub reason: Reason,
}

/// What a collection did, also when it failed.
#[derive(Debug, Clone, Default)]
pub struct Collection {
    pub need: Option<SpaceNeed>,
    pub removed: Vec<Removed>,
    pub freed_bytes: u64,
}

/// The ports a collection uses and the bookkeeping it keeps.
#[derive(Clone)]
pub struct ImageCollector {
    pub settings: ImageGcSettings,
    runtime: Arc<dyn RuntimeService>,
    containers: Arc<dyn ContainerRuntime>,
    host: Arc<dyn HostSignals>,
    pods: Option<PodsView>,
    records: Kept<ImageRecords>,
    /// When this process began collecting (the max-age pass waits this long).
    started: Instant,
}

impl ImageCollector {
    pub fn new(
        settings: ImageGcSettings,
        runtime: Arc<dyn RuntimeService>,
        containers: Arc<dyn ContainerRuntime>,
        host: Arc<dyn HostSignals>,
        pods: Option<PodsView>,
    ) -> Self {
        Self {
            settings,
            runtime,
            containers,
            host,
            pods,
            records: Kept::default(),
            started: Instant::now(),
        }
    }

    pub fn records(&self) -> ImageRecords {
        self.records.get()
    }

    /// `detectImages`: every image the runtime has, and the images of every container it
    /// holds (running or exited) and of every pod the node runs, as in use now.
    pub async fn detect(&self) -> Result<Vec<Candidate>, GcError> {
        let images = self
            .runtime
            .list_images()
            .await
            .map_err(GcError::ListImages)?;
        let containers = self
            .containers
            .list_containers(ContainerFilter::default())
            .await
            .map_err(GcError::ListContainers)?;
        let mut in_use: HashSet<String> = containers
            .into_iter()
            .flat_map(|container| [container.image, container.image_ref])
            .filter(|reference| !reference.is_empty())
            .collect();
        if let Some(pods) = &self.pods {
            let snapshot = pods.snapshot();
            for container in snapshot.pods().flat_map(|pod| pod.containers.iter()) {
                in_use.insert(container.image.clone());
                in_use.insert(container.image_ref.clone());
            }
        }
        let now = Instant::now();
        Ok(self.records.update(|records| {
            records.detect(&images, &in_use, now);
            records.candidates()
        }))
    }

    async fn image_fs(&self) -> Result<ImageFs, GcError> {
        let filesystems = self
            .runtime
            .image_fs_info()
            .await
            .map_err(GcError::ImageFsInfo)?;
        let mountpoint: PathBuf = filesystems
            .into_iter()
            .next()
            .map(|fs| fs.mountpoint)
            .ok_or(GcError::NoImageFs)?;
        let observation = self.host.observe(Some(mountpoint)).await;
        let stats = observation
            .imagefs
            .ok_or(GcError::NoImageFs)?
            .map_err(GcError::ImageFsStats)?;
        Ok(ImageFs {
            capacity_bytes: stats.capacity_bytes,
            available_bytes: stats.available_bytes,
        })
    }

    /// The periodic `GarbageCollect`: the max-age pass, then, at or above the high threshold,
    /// unused images least recently used first until the low threshold is reached.
    pub async fn garbage_collect(&self) -> (Collection, Result<(), GcError>) {
        let mut collection = Collection::default();
        let result = self.collect_into(&mut collection).await;
        (collection, result)
    }

    async fn collect_into(&self, collection: &mut Collection) -> Result<(), GcError> {
        let mut candidates = self.detect().await?;
        let now = Instant::now();
        let old = expired(&candidates, now, self.started, self.settings.maximum_age);
        if !old.is_empty() {
            let (freed, errors) = self.remove(&old, u64::MAX, Reason::Age, collection).await;
            candidates.retain(|candidate| !old.iter().any(|gone| gone.id == candidate.id));
            if !errors.is_empty() {
                return Err(GcError::Removal {
                    wanted: freed,
                    freed,
                    errors,
                });
            }
        }
        let fs = self.image_fs().await?;
        let need = space_need(
            fs,
            self.settings.high_threshold_percent,
            self.settings.low_threshold_percent,
        )?;
        collection.need = Some(need);
        if need.bytes_to_free == 0 {
            return Ok(());
        }
        tracing::info!(
            usage = need.usage_percent,
            high = self.settings.high_threshold_percent,
            bytes_to_free = need.bytes_to_free,
            "Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold"
        );
        let chosen = removable_for_space(&candidates, now, self.settings.minimum_age);
        let (freed, errors) = self
            .remove(&chosen, need.bytes_to_free, Reason::Space, collection)
            .await;
        if !errors.is_empty() {
            return Err(GcError::Removal {
                wanted: need.bytes_to_free,
                freed,
                errors,
            });
        }
        if freed < need.bytes_to_free {
            return Err(GcError::Insufficient(free_disk_space_failed(
                need.usage_percent,
                fs.capacity_bytes,
                freed,
            )));
        }
        Ok(())
    }

    /// `DeleteUnusedImages`, the eviction manager's reclaim: every unused image past the
    /// minimum age, least recently used first; no max-age pass, no event.
    pub async fn delete_unused_images(&self) -> (Collection, Result<(), GcError>) {
        let mut collection = Collection::default();
        let result = async {
            let candidates = self.detect().await?;
            let chosen =
                removable_for_space(&candidates, Instant::now(), self.settings.minimum_age);
            let (freed, errors) = self
                .remove(&chosen, u64::MAX, Reason::Space, &mut collection)
                .await;
            if errors.is_empty() {
                Ok(())
            } else {
                Err(GcError::Removal {
                    wanted: u64::MAX,
                    freed,
                    errors,
                })
            }
        }
        .await;
        (collection, result)
    }

    /// Removes `chosen` in order until `enough` bytes are freed; a failed removal is kept as an
    /// error and the walk goes on, as the kubelet's.
    async fn remove(
        &self,
        chosen: &[Candidate],
        enough: u64,
        reason: Reason,
        collection: &mut Collection,
    ) -> (u64, Vec<String>) {
        let mut freed = 0u64;
        let mut errors = Vec::new();
        for candidate in chosen {
            tracing::info!(image = %candidate.name, id = %candidate.id, size = candidate.size_bytes, ?reason, "Removing image to free bytes");
            match self.containers.remove_image(candidate.id.clone()).await {
                Ok(()) => {
                    self.records.update(|records| records.forget(&candidate.id));
                    freed = freed.saturating_add(candidate.size_bytes);
                    collection.freed_bytes =
                        collection.freed_bytes.saturating_add(candidate.size_bytes);
                    collection.removed.push(Removed {
                        id: candidate.id.clone(),
                        name: candidate.name.clone(),
                        size_bytes: candidate.size_bytes,
                        reason,
                    });
                }
                Err(error) => errors.push(format!("{}: {error}", candidate.id)),
            }
            if freed >= enough {
                break;
            }
        }
        (freed, errors)
    }
}
