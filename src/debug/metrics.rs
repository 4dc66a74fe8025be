//! `GET /metrics`: the supervised actors' figures and the API clients' (requests, status
//! updates, Lease renewals; see `kube_api::metrics`) in the Prometheus text exposition format.
//! Every family is documented in README, "Metrics".

use std::fmt::Write as _;

use actix_web::{HttpResponse, web};
use nodepulse_supervisor::{ActorSnapshot, ChildState};

use super::DebugContext;
use crate::kube_api::metrics::API_METRICS;

const STATES: [ChildState; 5] = [
    ChildState::Starting,
    ChildState::Running,
    ChildState::Backoff,
    ChildState::Stopped,
    ChildState::Escalated,
];

pub async fn metrics(context: web::Data<DebugContext>) -> HttpResponse {
    let actors: Vec<ActorSnapshot> = context
        .nodes
        .all()
        .iter()
        .flat_map(|handle| handle.actors())
        .collect();
    let mut body = render(&actors);
    API_METRICS.render(&mut body, jiff::Timestamp::now());
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(body)
}

/// Renders the actor families; one sample per actor (and per state or message type).
pub fn render(actors: &[ActorSnapshot]) -> String {
    let mut out = String::with_capacity(256 + actors.len() * 512);
    family(
        &mut out,
        "nodepulse_actor_restarts_total",
        "counter",
        "Restarts of each supervised actor.",
        actors,
        |actor| vec![(String::new(), actor.restarts as f64)],
    );
    family(
        &mut out,
        "nodepulse_actor_state",
        "gauge",
        "1 for the state each actor is in, 0 for the others.",
        actors,
        |actor| {
            STATES
                .iter()
                .map(|state| {
                    (
                        format!(",state=\"{}\"", state.as_str()),
                        f64::from(u8::from(actor.state == *state)),
                    )
                })
                .collect()
        },
    );
    family(
        &mut out,
        "nodepulse_actor_mailbox_depth",
        "gauge",
        "Messages waiting in each actor's mailbox.",
        actors,
        |actor| vec![(String::new(), actor.mailbox.mailbox.depth as f64)],
    );
    family(
        &mut out,
        "nodepulse_actor_mailbox_capacity",
        "gauge",
        "Messages each actor's mailbox can hold.",
        actors,
        |actor| vec![(String::new(), actor.mailbox.mailbox.capacity as f64)],
    );
    family(
        &mut out,
        "nodepulse_actor_mailbox_high_water",
        "gauge",
        "Most messages ever waiting in each actor's mailbox.",
        actors,
        |actor| vec![(String::new(), actor.mailbox.mailbox.high_water as f64)],
    );
    family(
        &mut out,
        "nodepulse_actor_messages_handled_total",
        "counter",
        "Messages handled by each actor, by message type.",
        actors,
        |actor| {
            actor
                .mailbox
                .handled_by_type
                .iter()
                .map(|(message_type, count)| {
                    (format!(",type=\"{}\"", escape(message_type)), *count as f64)
                })
                .collect()
        },
    );
    family(
        &mut out,
        "nodepulse_actor_handling_seconds_total",
        "counter",
        "Time each actor spent in message handlers.",
        actors,
        |actor| vec![(String::new(), actor.mailbox.handling_seconds)],
    );
    out
}

fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    actors: &[ActorSnapshot],
    samples: impl Fn(&ActorSnapshot) -> Vec<(String, f64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for actor in actors {
        for (extra_labels, value) in samples(actor) {
            let _ = writeln!(
                out,
                "{name}{{node=\"{}\",actor=\"{}\"{extra_labels}}} {value}",
                escape(&actor.node),
                escape(&actor.name)
            );
        }
    }
}

/// Label values escape backslash, double quote and newline, as the text format requires.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
