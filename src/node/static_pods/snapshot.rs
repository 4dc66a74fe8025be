//! The file source's pods between two reads, and what a new read changes (the kubelet's
//! PodConfig merge, `kl/config/config.go`): a UID that is gone is a removal, a new one an
//! addition (it gets `config.seen` then), one whose content changed an update — removals
//! first, as the kubelet emits them. An edited manifest has a new UID, so it is a removal and
//! an addition, as in the kubelet. Pure: the read time is an argument.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use nodepulse_actors::{config_source::SEEN_ANNOTATION, kept_pod::KeptPod, ports::PodWatchEvent};

/// The pods the last read gave, by UID, each with its `config.seen`.
#[derive(Debug, Default)]
pub struct StaticPodSet {
    pods: BTreeMap<String, Pod>,
}

/// `RFC3339NanoFixed`: nanoseconds always written.
fn seen_text(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

fn without_seen(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    if let Some(annotations) = pod.metadata.annotations.as_mut() {
        annotations.remove(SEEN_ANNOTATION);
    }
    pod
}

impl StaticPodSet {
    /// Takes in a read's pods; the events that bring a follower from the last read to this one.
    pub fn replace(&mut self, read: Vec<Pod>, now: Timestamp) -> Vec<PodWatchEvent> {
        let mut next = BTreeMap::new();
        for pod in read {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            next.insert(uid, pod);
        }
        let mut events: Vec<PodWatchEvent> = self
            .pods
            .iter()
            .filter(|(uid, _)| !next.contains_key(*uid))
            .map(|(_, pod)| PodWatchEvent::Deleted(KeptPod::from(pod.clone())))
            .collect();
        let mut updates = Vec::new();
        for (uid, pod) in &mut next {
            let annotations = pod.metadata.annotations.get_or_insert_default();
            match self.pods.get(uid) {
                None => {
                    annotations.insert(SEEN_ANNOTATION.to_owned(), seen_text(now));
                    events.push(PodWatchEvent::Applied(KeptPod::from(pod.clone())));
                }
                Some(known) => {
                    let seen = known
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(SEEN_ANNOTATION))
                        .cloned()
                        .unwrap_or_else(|| seen_text(now));
                    annotations.insert(SEEN_ANNOTATION.to_owned(), seen);
                    if without_seen(known) != without_seen(pod) {
                        updates.push(PodWatchEvent::Applied(KeptPod::from(pod.clone())));
                    }
                }
            }
        }
        events.extend(updates);
        self.pods = next;
        events
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(uid: &str, name: &str, image: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"uid": uid, "name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": image}]},
        }))
        .unwrap()
    }

    fn said(events: &[PodWatchEvent]) -> Vec<String> {
        events
            .iter()
            .map(|event| match event {
                PodWatchEvent::Applied(pod) => format!("+{}", pod.uid().unwrap()),
                PodWatchEvent::Deleted(pod) => format!("-{}", pod.uid().unwrap()),
                PodWatchEvent::Listed => "listed".to_owned(),
            })
            .collect()
    }

    fn seen(pod: &KeptPod) -> Option<String> {
        pod.pod()
            .metadata
            .annotations
            .as_ref()?
            .get(SEEN_ANNOTATION)
            .cloned()
    }

    #[test]
    fn a_read_says_removals_first_then_additions_then_updates_and_nothing_when_unchanged() {
        let at = |second: i64| Timestamp::from_second(1_800_000_000 + second).unwrap();
        let mut set = StaticPodSet::default();
        let first = set.replace(vec![pod("a", "web", "v1"), pod("b", "db", "v1")], at(0));
        assert_eq!(said(&first), ["+a", "+b"]);
        let PodWatchEvent::Applied(added) = &first[0] else {
            unreachable!()
        };
        assert_eq!(
            seen(added).as_deref(),
            Some("2027-01-15T08:00:00.000000000Z")
        );
        assert!(
            set.replace(vec![pod("a", "web", "v1"), pod("b", "db", "v1")], at(20))
                .is_empty()
        );

        // An edited manifest: a new UID for the same name. A manifest's own UID: an update.
        let edited = set.replace(vec![pod("a2", "web", "v2"), pod("b", "db", "v2")], at(40));
        assert_eq!(said(&edited), ["-a", "+a2", "+b"]);
        let PodWatchEvent::Applied(updated) = &edited[2] else {
            unreachable!()
        };
        assert_eq!(
            seen(updated).as_deref(),
            Some("2027-01-15T08:00:00.000000000Z"),
            "first seen stays"
        );
        assert_eq!(said(&set.replace(vec![], at(60))), ["-a2", "-b"]);
    }
}
