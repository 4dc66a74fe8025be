//! Node-level reclaim before an eviction (the kubelet's `reclaimNodeLevelResources`): which
//! signals removing unused images can relieve, given the disk layout, and whether the
//! thresholds that drove the eviction are still met once it ran. Pure.

use std::collections::BTreeSet;

use super::{
    signals::{Observations, Signal},
    thresholds::Threshold,
};

/// Whether deleting unused images can relieve `signal`: the image filesystem's signals always;
/// the node filesystem's only when images live on it (no dedicated image filesystem).
pub fn images_relieve(signal: Signal, dedicated_image_fs: bool) -> bool {
    match signal {
        Signal::ImagefsAvailable | Signal::ImagefsInodesFree => true,
        Signal::NodefsAvailable | Signal::NodefsInodesFree => !dedicated_image_fs,
        _ => false,
    }
}

/// The thresholds among `met` still met in `observations`, grace periods ignored.
pub fn still_met(
    thresholds: &[Threshold],
    met: &BTreeSet<usize>,
    observations: &Observations,
) -> BTreeSet<usize> {
    met.iter()
        .copied()
        .filter(|index| {
            thresholds.get(*index).is_some_and(|threshold| {
                observations
                    .get(&threshold.signal)
                    .is_some_and(|observation| threshold.is_met(*observation, false))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_relieve_the_image_fs_always_and_the_node_fs_only_when_it_holds_the_images() {
        use Signal::*;
        let cases = [
            (ImagefsAvailable, true, true),
            (ImagefsInodesFree, false, true),
            (NodefsAvailable, false, true),
            (NodefsInodesFree, false, true),
            (NodefsAvailable, true, false),
            (MemoryAvailable, false, false),
            (PidAvailable, false, false),
        ];
        for (signal, dedicated, expected) in cases {
            assert_eq!(
                images_relieve(signal, dedicated),
                expected,
                "{signal:?} {dedicated}"
            );
        }
    }
}
