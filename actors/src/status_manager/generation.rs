//! `observedGeneration` (PodObservedGenerationTracking, GA in 1.35): the `metadata.generation`
//! of the pod spec a status was made from. SetPodStatus sets the status's own from the pod it
//! was given (`CalculatePodStatusObservedGeneration`), the status builders set each condition
//! they write from the same pod ([`stamp_conditions`]), and the cache never lowers it: a status
//! made from an older pod arriving late keeps the newer generation (`updateStatusInternal`).
//! Pure.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

/// The generation a status or condition made from `pod` has observed: the pod's own; none
/// for a pod without one (a static pod's manifest has none; Go omits the zero).
pub fn observed_generation(pod: &Pod) -> Option<i64> {
    pod.metadata
        .generation
        .filter(|generation| *generation != 0)
}

/// `status` as made from `pod`: its `observedGeneration` the pod's generation.
pub fn with_observed_generation(pod: &Pod, mut status: PodStatus) -> PodStatus {
    status.observed_generation = observed_generation(pod);
    status
}

/// Each of `conditions`, generated from `pod`, observed `pod`'s generation.
pub fn stamp_conditions(pod: &Pod, conditions: &mut [PodCondition]) {
    let generation = observed_generation(pod);
    for condition in conditions {
        condition.observed_generation = generation;
    }
}

/// A status update never lowers the `observedGeneration` already cached.
pub fn keep_the_newest(old: &PodStatus, new: &mut PodStatus) {
    if old.observed_generation > new.observed_generation {
        new.observed_generation = old.observed_generation;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::core::v1::{Pod, PodCondition, PodStatus},
        apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };

    use super::{keep_the_newest, stamp_conditions, with_observed_generation};

    fn pod(generation: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                generation,
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn observed(generation: Option<i64>) -> PodStatus {
        PodStatus {
            observed_generation: generation,
            ..PodStatus::default()
        }
    }

    #[test]
    fn a_status_observes_the_generation_of_the_pod_it_was_made_from() {
        let table = [
            (Some(3), Some(1), Some(3)),
            (Some(1), None, Some(1)),
            (None, Some(2), None),
            (Some(0), None, None),
        ];
        for (generation, given, expected) in table {
            let status = with_observed_generation(&pod(generation), observed(given));
            assert_eq!(status.observed_generation, expected, "{generation:?}");
        }
    }

    #[test]
    fn every_condition_made_from_a_pod_observes_its_generation() {
        let mut conditions = vec![
            PodCondition {
                type_: "Ready".into(),
                observed_generation: Some(1),
                ..PodCondition::default()
            },
            PodCondition {
                type_: "PodScheduled".into(),
                ..PodCondition::default()
            },
        ];
        stamp_conditions(&pod(Some(2)), &mut conditions);
        assert!(
            conditions
                .iter()
                .all(|condition| condition.observed_generation == Some(2)),
            "{conditions:?}"
        );
    }

    #[test]
    fn a_late_status_of_an_older_pod_does_not_lower_the_observed_generation() {
        let table = [
            (Some(5), Some(4), Some(5)),
            (Some(5), None, Some(5)),
            (Some(4), Some(5), Some(5)),
            (None, Some(1), Some(1)),
        ];
        for (old, new, expected) in table {
            let mut status = observed(new);
            keep_the_newest(&observed(old), &mut status);
            assert_eq!(status.observed_generation, expected, "{old:?} then {new:?}");
        }
    }
}
