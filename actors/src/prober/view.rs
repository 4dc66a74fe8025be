//! A read-only view of the prober's kept results for the pod provider's status (§5.4, §5.5):
//! a running container is started once its startup probe succeeded (or it has none) and ready
//! once started and its readiness probe succeeded (or it has none). It never changes a result;
//! where the prober has none yet for this very container, what the API reported stands. The
//! workers' probe totals are read here too, for the kubelet API's `/metrics/probes`.

use k8s_openapi::api::core::v1::{Container, Pod};
use nodepulse_supervisor::Kept;

use super::{
    manager::{ProberMemory, WorkerKey},
    spec::ProbeKind,
    worker::{ProbeResult, ProbeTotals, Reported},
};

/// The prober's results, shared with the prober that writes them.
#[derive(Debug, Clone, Default)]
pub struct ProbeResults {
    memory: Kept<ProberMemory>,
}

impl ProbeResults {
    pub fn new(memory: Kept<ProberMemory>) -> Self {
        Self { memory }
    }

    /// Every worker's probe totals, in key order: what `/metrics/probes` counts. A worker the
    /// prober stopped keeps its totals until its pod goes, as the kubelet's worker lives on
    /// while its container restarts.
    pub fn totals(&self) -> Vec<(WorkerKey, ProbeTotals)> {
        self.memory.read(|memory| {
            (memory.iter())
                .map(|(key, memory)| (key.clone(), memory.totals))
                .collect()
        })
    }

    /// The result published for `container_id`'s probe of `kind`: `None` when the prober holds
    /// nothing for this container (yet), `Some(None)` for startup's initial Unknown.
    fn published(
        &self,
        pod_uid: &str,
        container: &str,
        container_id: &str,
        kind: ProbeKind,
    ) -> Option<Option<ProbeResult>> {
        let key = WorkerKey {
            pod_uid: pod_uid.to_owned(),
            container: container.to_owned(),
            kind,
        };
        self.memory.read(|memory| {
            memory
                .get(&key)
                .filter(|m| m.container_id == container_id)
                .map(|m| m.published)
        })
    }
}

/// The view bound to one pod, for its status.
#[derive(Debug, Clone, Copy)]
pub struct PodProbeView<'a> {
    pub results: &'a ProbeResults,
    /// The pod as the API last showed it: its statuses are what a prober without results
    /// (a daemon restart) resumes from.
    pub pod: &'a Pod,
}

impl PodProbeView<'_> {
    /// `(started, ready)` of the running container `container_id` (`containerd://…`).
    pub fn started_and_ready(&self, container: &Container, container_id: &str) -> (bool, bool) {
        let uid = self.pod.metadata.uid.as_deref().unwrap_or_default();
        let published = |kind| (self.results).published(uid, &container.name, container_id, kind);
        started_and_ready(
            container,
            published,
            reported_by_api(self.pod, &container.name, container_id),
        )
    }
}

/// What the API's status says of container `container_id` (a regular container or a
/// sidecar): nothing for another container.
pub fn reported_by_api(pod: &Pod, name: &str, container_id: &str) -> Reported {
    let status = pod.status.as_ref();
    let regular = status.and_then(|s| s.container_statuses.as_ref());
    let init = status.and_then(|s| s.init_container_statuses.as_ref());
    (regular.into_iter().chain(init))
        .flatten()
        .find(|c| c.name == name && c.container_id.as_deref() == Some(container_id))
        .map(|c| Reported {
            ready: c.ready,
            started: c.started.unwrap_or(false),
        })
        .unwrap_or_default()
}

/// The kubelet's `started` and `ready` of a running container, from the published results
/// (`None`: the prober holds none for it, and the reported values stand).
pub fn started_and_ready(
    container: &Container,
    published: impl Fn(ProbeKind) -> Option<Option<ProbeResult>>,
    reported: Reported,
) -> (bool, bool) {
    let started = container.startup_probe.is_none()
        || published(ProbeKind::Startup).map_or(reported.started, |result| {
            result == Some(ProbeResult::Success)
        });
    let ready = started
        && (container.readiness_probe.is_none()
            || published(ProbeKind::Readiness).map_or(reported.ready, |result| {
                result == Some(ProbeResult::Success)
            }));
    (started, ready)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Probe;

    use super::*;

    fn container(startup: bool, readiness: bool) -> Container {
        Container {
            name: "c".into(),
            startup_probe: startup.then(Probe::default),
            readiness_probe: readiness.then(Probe::default),
            ..Container::default()
        }
    }

    const NOTHING: Reported = Reported {
        ready: false,
        started: false,
    };
    const READY: Reported = Reported {
        ready: true,
        started: true,
    };

    #[test]
    fn started_and_ready_follow_the_published_results_as_the_kubelet_reports_them() {
        use ProbeResult::{Failure, Success};
        let none = |_| None;
        let success = |_| Some(Some(Success));
        let failure = |_| Some(Some(Failure));
        let startup_unknown = |kind| match kind {
            ProbeKind::Startup => Some(None),
            _ => Some(Some(Success)),
        };
        // (startup probe, readiness probe, results, reported) → (started, ready)
        type Results<'a> = &'a dyn Fn(ProbeKind) -> Option<Option<ProbeResult>>;
        type Row<'a> = (bool, bool, Results<'a>, Reported, (bool, bool));
        let table: Vec<Row> = vec![
            (false, false, &none, NOTHING, (true, true)),
            (false, true, &none, NOTHING, (true, false)),
            (false, true, &none, READY, (true, true)),
            (false, true, &success, NOTHING, (true, true)),
            (false, true, &failure, READY, (true, false)),
            (true, false, &none, NOTHING, (false, false)),
            (true, false, &startup_unknown, READY, (false, false)),
            (true, true, &success, NOTHING, (true, true)),
            (true, false, &failure, NOTHING, (false, false)),
        ];
        for (startup, readiness, results, reported, expected) in table {
            let got = started_and_ready(&container(startup, readiness), results, reported);
            assert_eq!(
                got, expected,
                "startup {startup}, readiness {readiness}, reported {reported:?}"
            );
        }
    }

    #[test]
    fn results_of_an_earlier_container_do_not_count_for_a_new_one() {
        let memory = Kept::<ProberMemory>::default();
        let key = WorkerKey {
            pod_uid: "u".into(),
            container: "c".into(),
            kind: ProbeKind::Readiness,
        };
        let mut old = super::super::WorkerMemory::new(ProbeKind::Readiness, "containerd://old");
        old.published = Some(ProbeResult::Success);
        memory.update(|m| m.insert(key, old));
        let results = ProbeResults::new(memory);
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Pod::default()
        };
        let view = PodProbeView {
            results: &results,
            pod: &pod,
        };
        let c = container(false, true);
        assert_eq!(view.started_and_ready(&c, "containerd://old"), (true, true));
        assert_eq!(
            view.started_and_ready(&c, "containerd://new"),
            (true, false)
        );
    }
}
