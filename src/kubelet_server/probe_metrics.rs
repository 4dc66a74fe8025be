//! `/metrics/probes` as the kubelet's prober registry serves it: `prober_probe_total`, each
//! probe worker's probes by result, labelled with the container, the pod (name, namespace and
//! UID, the name and namespace from the node's pods view) and the probe's kind. Only the counter:
//! the duration histogram and `process_start_time_seconds` are not kept.

use nodepulse_actors::{
    pods::PodsSnapshot,
    prober::{ProbeResults, ProbeTotals, WorkerKey},
};

use super::{
    exposition::{self, Family},
    reply::Reply,
};

pub fn serve(probes: Option<&ProbeResults>, snapshot: &PodsSnapshot) -> Reply {
    let totals = probes.map(ProbeResults::totals).unwrap_or_default();
    exposition::reply(render(&totals, snapshot))
}

/// The text of the workers' `totals`; a worker whose pod the view does not know (it went) is
/// left out.
pub fn render(totals: &[(WorkerKey, ProbeTotals)], snapshot: &PodsSnapshot) -> String {
    let mut family = Family {
        name: "prober_probe_total",
        help: "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
        kind: "counter",
        samples: Vec::new(),
    };
    for (key, totals) in totals {
        let Some(pod) = snapshot.by_uid(&key.pod_uid) else {
            continue;
        };
        for (result, count) in [("failed", totals.failed), ("successful", totals.successful)] {
            // The kubelet's counter exists once a probe had this result.
            if count == 0 {
                continue;
            }
            let labels = vec![
                ("container", key.container.as_str()),
                ("namespace", pod.namespace.as_str()),
                ("pod", pod.name.as_str()),
                ("pod_uid", key.pod_uid.as_str()),
                ("probe_type", key.kind.title()),
                ("result", result),
            ];
            family.samples.push((labels, count as f64, None));
        }
    }
    exposition::write(&mut [family])
}

#[cfg(test)]
mod tests {
    use nodepulse_actors::{
        pods::{PodRecord, PodsPublisher},
        prober::ProbeKind,
    };

    use super::*;

    #[test]
    fn each_workers_probes_are_counted_by_result_with_the_kubelets_labels() {
        let publisher = PodsPublisher::default();
        publisher.record(PodRecord {
            uid: "u1".into(),
            namespace: "default".into(),
            name: "web".into(),
            deleting: false,
            sandboxes: Vec::new(),
            containers: Vec::new(),
        });
        let key = |uid: &str, kind| WorkerKey {
            pod_uid: uid.into(),
            container: "app".into(),
            kind,
        };
        let totals = [
            (
                key("u1", ProbeKind::Readiness),
                ProbeTotals {
                    successful: 3,
                    failed: 1,
                },
            ),
            (
                key("u1", ProbeKind::Liveness),
                ProbeTotals {
                    successful: 2,
                    failed: 0,
                },
            ),
            (
                key("gone", ProbeKind::Readiness),
                ProbeTotals {
                    successful: 9,
                    failed: 9,
                },
            ),
        ];
        assert_eq!(
            render(&totals, &publisher.view().snapshot()),
            "# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.\n\
             # TYPE prober_probe_total counter\n\
             prober_probe_total{container=\"app\",namespace=\"default\",pod=\"web\",pod_uid=\"u1\",probe_type=\"Liveness\",result=\"successful\"} 2\n\
             prober_probe_total{container=\"app\",namespace=\"default\",pod=\"web\",pod_uid=\"u1\",probe_type=\"Readiness\",result=\"failed\"} 1\n\
             prober_probe_total{container=\"app\",namespace=\"default\",pod=\"web\",pod_uid=\"u1\",probe_type=\"Readiness\",result=\"successful\"} 3\n"
        );
    }
}
