//! The mounted claims' filesystem figures for `kubelet_volume_stats_*`: `statvfs` of each
//! claim's volume directory (a claim is a filesystem of its own), each claim once however many
//! pods mount it, measured at most once per `volumeStatsAggPeriod` (the kubelet's volume stats
//! calculator's period) and shared by every scrape in between, so a scrape costs no I/O.

use std::{path::PathBuf, sync::Arc, time::Duration};

use jiff::Timestamp;
use nodepulse_actors::volume_manager::VolumeView;
use tokio::{sync::Mutex, time::Instant};

use super::{
    node::fs_stats,
    storage,
    summary::{FsStats, PvcReference},
};
use crate::host::filesystem;

/// One claim's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimStats {
    pub claim: PvcReference,
    pub fs: FsStats,
}

/// The latest measurement, kept for a period.
#[derive(Debug)]
pub struct VolumeStatsCache {
    period: Duration,
    latest: Mutex<Option<(Instant, Arc<[ClaimStats]>)>>,
}

impl VolumeStatsCache {
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            latest: Mutex::new(None),
        }
    }

    /// The claims mounted on the node, as measured within the last period.
    pub async fn claims(&self, view: Option<&VolumeView>) -> Arc<[ClaimStats]> {
        // Held while measuring: scrapes that come meanwhile take this measurement.
        let mut latest = self.latest.lock().await;
        if let Some((at, stats)) = latest.as_ref()
            && at.elapsed() < self.period
        {
            return Arc::clone(stats);
        }
        let volumes = view.map(storage::claim_volumes).unwrap_or_default();
        let measured = tokio::task::spawn_blocking(move || measure(&volumes, Timestamp::now()))
            .await
            .unwrap_or_else(|error| {
                tracing::warn!(%error, "the volume stats task failed");
                Arc::from([])
            });
        *latest = Some((Instant::now(), Arc::clone(&measured)));
        measured
    }
}

/// `statvfs` of each claim's directory (blocking); a claim that cannot be measured is left
/// out, as the kubelet has no figures for it.
pub fn measure(volumes: &[(PvcReference, PathBuf)], time: Timestamp) -> Arc<[ClaimStats]> {
    let mut stats: Vec<ClaimStats> = Vec::new();
    for (claim, path) in volumes {
        if stats.iter().any(|known| known.claim == *claim) {
            continue;
        }
        match filesystem(path) {
            Ok(fs) => stats.push(ClaimStats {
                claim: claim.clone(),
                fs: fs_stats(time, &fs),
            }),
            Err(error) => tracing::debug!(%error, claim = %claim.name, "no volume figures"),
        }
    }
    stats.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str) -> PvcReference {
        PvcReference {
            name: name.into(),
            namespace: "default".into(),
        }
    }

    #[test]
    fn each_claim_is_measured_once_from_its_filesystem() {
        let dir = tempfile::tempdir().expect("a directory");
        let volumes = [
            (claim("data"), dir.path().to_owned()),
            (claim("data"), dir.path().join("elsewhere")),
            (claim("logs"), dir.path().to_owned()),
        ];
        let stats = measure(&volumes, Timestamp::now());
        let names: Vec<&str> = stats.iter().map(|s| s.claim.name.as_str()).collect();
        assert_eq!(names, ["data", "logs"]);
        let fs = &stats[0].fs;
        let (capacity, used) = (
            fs.capacity_bytes.expect("capacity"),
            fs.used_bytes.expect("used"),
        );
        assert!(capacity > 0 && used <= capacity, "{fs:?}");
        assert!(
            fs.available_bytes
                .is_some_and(|available| available <= capacity)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_measurement_is_kept_for_a_period() {
        let cache = VolumeStatsCache::new(Duration::from_secs(60));
        let first = cache.claims(None).await;
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(Arc::ptr_eq(&first, &cache.claims(None).await), "kept");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            !Arc::ptr_eq(&first, &cache.claims(None).await),
            "measured again"
        );
    }
}
