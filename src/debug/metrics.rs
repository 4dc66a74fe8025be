//! `GET /metrics`: the daemon's registry in the OpenMetrics text format — the families the
//! caller registered (the API clients', see `apiserver_client::metrics`) and the supervised actors'
//! figures, read from the supervisors at each scrape. Every family is documented in
//! docs/operating/metrics.md.

use http::StatusCode;
use nodepulse_actors::kept_pod;
use nodepulse_supervisor::{ActorSnapshot, ChildState};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
};

use super::{
    error::DebugError,
    nodes::Nodes,
    reply::{self, Reply},
    routes::Call,
};

const STATES: [ChildState; 5] = [
    ChildState::Starting,
    ChildState::Running,
    ChildState::Backoff,
    ChildState::Stopped,
    ChildState::Escalated,
];

pub async fn metrics(call: Call) -> Result<Reply, DebugError> {
    let mut body = String::with_capacity(16 * 1024);
    if let Err(error) = prometheus_client::encoding::text::encode(&mut body, &call.context.registry)
    {
        // Writing to a String cannot fail; a collector that fails is a bug worth seeing.
        return Ok(reply::with_type(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("cannot encode metrics: {error}"),
        ));
    }
    Ok(reply::with_type(
        StatusCode::OK,
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
        body,
    ))
}

/// The actor families, one sample per actor (and per state or message type).
pub struct ActorMetrics(pub Nodes);

impl std::fmt::Debug for ActorMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ActorMetrics({} nodes)", self.0.all().len())
    }
}

type Labels = Vec<(&'static str, String)>;

fn labels(actor: &ActorSnapshot) -> Labels {
    vec![("node", actor.node.clone()), ("actor", actor.name.clone())]
}

fn with(actor: &ActorSnapshot, key: &'static str, value: &str) -> Labels {
    let mut labels = labels(actor);
    labels.push((key, value.to_owned()));
    labels
}

/// One family: its descriptor, then every sample `samples` gives for each actor.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    (name, help, kind): (&str, &str, MetricType),
    actors: &[ActorSnapshot],
    samples: impl Fn(&ActorSnapshot) -> Vec<(Labels, M)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for actor in actors {
        for (labels, metric) in samples(actor) {
            metric.encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

impl Collector for ActorMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let actors: Vec<ActorSnapshot> = self
            .0
            .all()
            .iter()
            .flat_map(|handle| handle.actors())
            .collect();
        // Counts as integers, as they always were exposed; only the handling time is a float.
        let count = |value: u64| ConstCounter::new(value);
        let gauge = |value: usize| ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
        family(
            &mut encoder,
            (
                "nodepulse_actor_restarts",
                "Restarts of each supervised actor.",
                MetricType::Counter,
            ),
            &actors,
            |actor| vec![(labels(actor), count(actor.restarts))],
        )?;
        family(
            &mut encoder,
            (
                "nodepulse_actor_state",
                "1 for the state each actor is in, 0 for the others.",
                MetricType::Gauge,
            ),
            &actors,
            |actor| {
                STATES
                    .iter()
                    .map(|state| {
                        let on = usize::from(actor.state == *state);
                        (with(actor, "state", state.as_str()), gauge(on))
                    })
                    .collect()
            },
        )?;
        family(
            &mut encoder,
            (
                "nodepulse_actor_mailbox_depth",
                "Messages waiting in each actor's mailbox.",
                MetricType::Gauge,
            ),
            &actors,
            |actor| vec![(labels(actor), gauge(actor.mailbox.mailbox.depth))],
        )?;
        family(
            &mut encoder,
            (
                "nodepulse_actor_mailbox_capacity",
                "Messages each actor's mailbox can hold.",
                MetricType::Gauge,
            ),
            &actors,
            |actor| vec![(labels(actor), gauge(actor.mailbox.mailbox.capacity))],
        )?;
        family(
            &mut encoder,
            (
                "nodepulse_actor_mailbox_high_water",
                "Most messages ever waiting in each actor's mailbox.",
                MetricType::Gauge,
            ),
            &actors,
            |actor| vec![(labels(actor), gauge(actor.mailbox.mailbox.high_water))],
        )?;
        family(
            &mut encoder,
            (
                "nodepulse_actor_messages_handled",
                "Messages handled by each actor, by message type.",
                MetricType::Counter,
            ),
            &actors,
            |actor| {
                actor
                    .mailbox
                    .handled_by_type
                    .iter()
                    .map(|(kind, handled)| (with(actor, "type", kind), count(*handled)))
                    .collect()
            },
        )?;
        family(
            &mut encoder,
            (
                "nodepulse_actor_handling_seconds",
                "Time each actor spent in message handlers.",
                MetricType::Counter,
            ),
            &actors,
            |actor| {
                let seconds = ConstCounter::new(actor.mailbox.handling_seconds);
                vec![(labels(actor), seconds)]
            },
        )
    }
}

/// How pods are kept (`kept_pod`): those decoded now, and the decodes of a cooled one so far
/// (what keeping them packed costs in CPU). One sample each for the process, every node's.
#[derive(Debug)]
pub struct KeptPodMetrics;

impl Collector for KeptPodMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let decoded = i64::try_from(kept_pod::decoded()).unwrap_or(i64::MAX);
        ConstGauge::new(decoded).encode(encoder.encode_descriptor(
            "nodepulse_kept_pods_decoded",
            "Pod versions kept decoded now; the others are kept as their packed JSON.",
            None,
            MetricType::Gauge,
        )?)?;
        ConstCounter::new(kept_pod::decodes()).encode(encoder.encode_descriptor(
            "nodepulse_kept_pod_decodes",
            "Pods decoded again after they were kept as their packed JSON.",
            None,
            MetricType::Counter,
        )?)
    }
}
