//! A cached pod status, held once. The status nodepulse decided is kept in an `Arc`, so that a
//! pod's sync takes it without a copy; once the pod watch reports the pod with exactly that
//! status (the API has it: a settled pod), the cache holds the watch's pod instead and drops
//! its own copy, since the watch keeps that pod anyway. A pod costs its status once, not twice,
//! and a settled one only as its [`KeptPod`]'s JSON while nothing reads it.

use std::{
    fmt,
    ops::Deref,
    sync::{Arc, LazyLock},
};

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::kept_pod::KeptPod;

#[derive(Clone)]
pub enum HeldStatus {
    /// Decided here, and not (yet) what the watch's pod has.
    Decided(Arc<PodStatus>),
    /// The watch's pod, whose status is exactly the cached one.
    AsTheApis(KeptPod),
}

impl HeldStatus {
    pub fn decided(status: PodStatus) -> Self {
        Self::Decided(Arc::new(status))
    }

    /// Held as `pod`'s when `pod` (the watch's latest) has exactly this status; held as its
    /// own copy again when it no longer does, so the cache never keeps an older version of a
    /// pod alive.
    pub fn observed(&mut self, pod: &KeptPod) {
        let held = self.get();
        if pod.pod().status.as_ref() == Some(&*held) {
            *self = Self::AsTheApis(pod.clone());
        } else if let Self::AsTheApis(_) = self {
            *self = Self::decided(PodStatus::clone(&held));
        }
    }

    /// Whether the status is held as the watch's pod's.
    pub fn is_the_apis(&self) -> bool {
        matches!(self, Self::AsTheApis(_))
    }

    /// The status (the watch's pod decoded, if it is held as that pod's and was cooled).
    pub fn get(&self) -> HeldRef {
        match self {
            Self::Decided(status) => HeldRef::Decided(Arc::clone(status)),
            Self::AsTheApis(pod) => HeldRef::Pods(pod.pod()),
        }
    }
}

/// A [`HeldStatus`] read: the status, and what holds it while it is read.
pub enum HeldRef {
    Decided(Arc<PodStatus>),
    Pods(Arc<Pod>),
}

impl Deref for HeldRef {
    type Target = PodStatus;

    fn deref(&self) -> &PodStatus {
        // A pod is only held for a status it has; the empty status is never reached.
        static NONE: LazyLock<PodStatus> = LazyLock::new(PodStatus::default);
        match self {
            Self::Decided(status) => status,
            Self::Pods(pod) => pod.status.as_ref().unwrap_or(&NONE),
        }
    }
}

/// Equal when the statuses are: where each is held does not matter.
impl PartialEq for HeldStatus {
    fn eq(&self, other: &Self) -> bool {
        *self.get() == *other.get()
    }
}

impl fmt::Debug for HeldStatus {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        (*self.get()).fmt(formatter)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{Pod, PodStatus};

    use super::HeldStatus;
    use crate::kept_pod::KeptPod;

    fn pod_with(phase: &str) -> KeptPod {
        KeptPod::from(Pod {
            status: Some(status(phase)),
            ..Pod::default()
        })
    }

    fn status(phase: &str) -> PodStatus {
        PodStatus {
            phase: Some(phase.to_owned()),
            ..PodStatus::default()
        }
    }

    #[test]
    fn a_status_the_watchs_pod_has_is_held_as_that_pod() {
        let mut held = HeldStatus::decided(status("Running"));
        let api = pod_with("Running");
        held.observed(&api);
        assert!(held.is_the_apis());
        assert!(
            matches!(&held, HeldStatus::AsTheApis(pod) if pod.ptr_eq(&api)),
            "the watch's pod, not a copy"
        );
        assert_eq!(held.get().phase.as_deref(), Some("Running"));
    }

    #[test]
    fn a_status_the_api_does_not_have_stays_decided() {
        let mut held = HeldStatus::decided(status("Running"));
        held.observed(&pod_with("Pending"));
        assert!(!held.is_the_apis());
        held.observed(&KeptPod::from(Pod::default()));
        assert!(!held.is_the_apis(), "a pod without a status");
        assert_eq!(held, HeldStatus::decided(status("Running")));
    }

    #[test]
    fn a_newer_pod_with_another_status_lets_go_of_the_older_one() {
        let mut held = HeldStatus::decided(status("Running"));
        let older = pod_with("Running").pod();
        held.observed(&KeptPod::from(Arc::clone(&older)));
        held.observed(&pod_with("Failed"));
        assert!(!held.is_the_apis());
        assert_eq!(
            Arc::strong_count(&older),
            1,
            "the older version is not kept alive"
        );
        assert_eq!(
            held.get().phase.as_deref(),
            Some("Running"),
            "the cached status is unchanged"
        );
    }
}
