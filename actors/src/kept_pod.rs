//! A pod version as the node keeps it between reads: its JSON, compressed (`packed`), with the
//! decoded `Pod` beside it while the version is new. A `k8s-openapi` `Pod` holds every optional
//! field of its spec, containers and volumes inline: the bench's one-container pod with its
//! token volume decodes into about 12 KiB in 70 blocks, where its JSON is 2.4 KiB in one and
//! packed about 250 bytes. A new version is read by every holder within moments, so it is kept
//! decoded, shared by all of them, until [`cool`] finds it unread since its last pass and held
//! by no one else; from then on it is kept packed, and a part that reads it ([`KeptPod::pod`])
//! decodes a copy of its own, freed when it is done. A fleet's settled pod is read by nothing
//! but its volumes' refresh once a minute, so its decoded form would otherwise come back for
//! the seconds after each refresh, every pod of a fleet at once when they started together.
//!
//! Every holder of a pod (the watch's routing, the pod source, the providers, StatusManager,
//! the volume manager) keeps the one `KeptPod` of each version the watch made; cloning one
//! shares it.

use std::{
    fmt,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError, Weak,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::Pod;

mod packed;

/// One pod version: shared, never copied.
#[derive(Clone)]
pub struct KeptPod(Arc<Kept>);

struct Kept {
    uid: Option<Box<str>>,
    /// `metadata.deletionTimestamp` is set (StatusManager's pass reads it for every pod).
    deleting: bool,
    /// The pod's JSON, packed; empty if it could not be written, and then it is never cooled.
    packed: Box<[u8]>,
    hot: Mutex<Hot>,
}

/// The decoded pod while it is read, and whether it was since the last [`cool`].
struct Hot {
    pod: Option<Arc<Pod>>,
    read: bool,
}

/// How often [`cool`] should run: a version is kept decoded one to two periods after its last
/// read. A burst makes new versions faster than its readers leave them, and each decoded one
/// is about 12 KiB: with a 5 s period, the 10,000 pods started on a 1,000-node fleet kept up to
/// 5,800 decoded at once, whose free gaps then stayed resident between what the pods keep;
/// with 1 s, 3,300–4,100 at the most, and 10.3 KiB resident a pod once they all ran against
/// 13.9–14.1 (docs/benchmarks/fleet-pods.md, "Pods packed, cooled each second").
pub const COOL_PERIOD: Duration = Duration::from_secs(1);

/// The versions kept decoded since they were made, for [`cool`] to look at.
static TO_COOL: Mutex<Vec<Weak<Kept>>> = Mutex::new(Vec::new());
/// Reads of a cooled pod (each decodes its own copy) since the process started.
static DECODES: AtomicU64 = AtomicU64::new(0);
/// Pod versions kept decoded now.
static HOT: AtomicUsize = AtomicUsize::new(0);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section leaves its state whole: a panic elsewhere poisons nothing real.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl KeptPod {
    /// Keeps `pod`, decoded for now (its first readers are on their way).
    pub fn new(pod: Arc<Pod>) -> Self {
        let packed = match packed::pack(&pod) {
            Ok(packed) => packed,
            Err(error) => {
                tracing::warn!(%error, pod = ?pod.metadata.name, "a pod could not be written as JSON; it is kept decoded");
                Box::default()
            }
        };
        let kept = Arc::new(Kept {
            uid: pod.metadata.uid.as_deref().map(Box::from),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            hot: Mutex::new(Hot {
                pod: Some(pod),
                read: true,
            }),
            packed,
        });
        HOT.fetch_add(1, Ordering::Relaxed);
        if !kept.packed.is_empty() {
            lock(&TO_COOL).push(Arc::downgrade(&kept));
        }
        Self(kept)
    }

    /// The pod: the shared decoded one while it is kept, else a copy decoded for this reader.
    pub fn pod(&self) -> Arc<Pod> {
        {
            let mut hot = lock(&self.0.hot);
            if let Some(pod) = hot.pod.clone() {
                hot.read = true;
                return pod;
            }
        }
        DECODES.fetch_add(1, Ordering::Relaxed);
        // Packed by `new` from a decoded Pod: it reads back.
        Arc::new(packed::unpack(&self.0.packed))
    }

    pub fn uid(&self) -> Option<&str> {
        self.0.uid.as_deref()
    }

    /// Whether the pod has a `deletionTimestamp`.
    pub fn is_deleting(&self) -> bool {
        self.0.deleting
    }

    /// Whether the two are the same version (one `KeptPod`, not two equal ones).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// How many hold this version (its holders' clones, not the decoded pod's readers).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// Whether the decoded pod is kept now.
    pub fn is_decoded(&self) -> bool {
        lock(&self.0.hot).pod.is_some()
    }
}

impl From<Pod> for KeptPod {
    fn from(pod: Pod) -> Self {
        Self::new(Arc::new(pod))
    }
}

impl From<Arc<Pod>> for KeptPod {
    fn from(pod: Arc<Pod>) -> Self {
        Self::new(pod)
    }
}

/// Equal when the pods are.
impl PartialEq for KeptPod {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other)
            || match (self.0.packed.is_empty(), other.0.packed.is_empty()) {
                // Packing is a function of the JSON, and unpacking one of the packed bytes.
                (false, false) => self.0.packed == other.0.packed,
                _ => self.pod() == other.pod(),
            }
    }
}

impl Eq for KeptPod {}

impl fmt::Debug for KeptPod {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.pod().fmt(formatter)
    }
}

/// What one [`cool`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cooled {
    /// Decoded pods given up (unread since the last pass, held by no one else).
    pub dropped: usize,
    /// Decoded pods still kept.
    pub decoded: usize,
}

/// Gives up each decoded pod nobody read since the last call and nobody else holds: a reader
/// from then on decodes a copy of its own. Call it every few seconds (the daemon's heap task
/// does, every [`COOL_PERIOD`]): a new version stays decoded while its holders take it in.
pub fn cool() -> Cooled {
    let mut cooled = Cooled::default();
    let mut decoded = lock(&TO_COOL);
    decoded.retain(|kept| {
        let Some(kept) = kept.upgrade() else {
            return false;
        };
        let mut hot = lock(&kept.hot);
        let unread = !std::mem::replace(&mut hot.read, false);
        let alone = hot
            .pod
            .as_ref()
            .is_some_and(|pod| Arc::strong_count(pod) == 1);
        if unread && alone {
            hot.pod = None;
            HOT.fetch_sub(1, Ordering::Relaxed);
            cooled.dropped += 1;
            false
        } else {
            cooled.decoded += 1;
            true
        }
    });
    // The list held every pod of a burst: its room goes once most of them are cooled.
    if decoded.len() * 4 <= decoded.capacity() {
        decoded.shrink_to_fit();
    }
    cooled
}

/// Reads of a cooled pod since the process started, each a decode: what keeping pods as JSON
/// costs in CPU.
pub fn decodes() -> u64 {
    DECODES.load(Ordering::Relaxed)
}

/// Pod versions kept decoded now, over every node of the process.
pub fn decoded() -> usize {
    HOT.load(Ordering::Relaxed)
}

impl Drop for Kept {
    fn drop(&mut self) {
        let hot = self.hot.get_mut().unwrap_or_else(PoisonError::into_inner);
        if hot.pod.is_some() {
            HOT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(uid: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": uid,
                         "creationTimestamp": "2026-12-05T07:00:00Z"},
            "spec": {"containers": [{"name": "app", "image": "pause", "volumeMounts": [
                {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "token"}]}],
                     "volumes": [{"name": "token", "projected": {"sources": [
                         {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]},
            "status": {"phase": "Running", "podIP": "198.18.0.7",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-12-05T07:00:01Z"}]},
        }))
        .expect("a pod")
    }

    /// One test, so that no other test's `cool` passes in between its steps.
    #[test]
    fn a_pod_unread_for_a_pass_is_cooled_and_read_back_whole() {
        let kept = KeptPod::from(pod("7c1e"));
        assert_eq!(kept.uid(), Some("7c1e"));
        assert!(!kept.is_deleting());
        assert!(!kept.0.packed.is_empty(), "kept packed");

        // Read since the last pass: kept; held by a reader: kept.
        cool();
        assert!(
            kept.is_decoded(),
            "read when made, so kept by the first pass"
        );
        let held = kept.pod();
        cool();
        cool();
        assert!(kept.is_decoded(), "a reader holds it");
        drop(held);

        // Unread for a whole pass and held by no one: only the JSON stays.
        cool();
        cool();
        assert!(!kept.is_decoded());
        let before = decodes();
        let read = kept.pod();
        assert_eq!(*read, pod("7c1e"), "the pod reads back as it was");
        assert!(decodes() > before, "a cooled pod is decoded again");
        assert!(!kept.is_decoded(), "the copy is the reader's, not kept");
        assert!(
            !Arc::ptr_eq(&read, &kept.pod()),
            "each reader decodes its own"
        );

        // Clones are the same version; equal pods made apart are equal, not the same.
        let other = KeptPod::from(pod("7c1e"));
        assert!(kept.ptr_eq(&kept.clone()));
        assert!(!kept.ptr_eq(&other));
        assert_eq!(kept, other);
        assert_ne!(kept, KeptPod::from(pod("9d2f")));
    }
}
