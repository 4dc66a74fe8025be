//! A record of the resource requests the emulator served — who asked, the verb, the resource
//! and the status code — as kube-apiserver's audit log would show them, so tests can derive
//! the RBAC a client needs from what it really did. Bounded: the oldest records make room.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::api::Verb;

/// How many records are kept; enough for any test, small enough for a long standalone run.
const CAPACITY: usize = 10_000;

/// One served request, in RBAC's terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestRecord {
    /// `system:anonymous` for requests without a token.
    pub user: String,
    pub verb: Verb,
    /// `""` for the core group.
    pub group: String,
    pub resource: String,
    /// `""` for the main resource.
    pub subresource: String,
    /// `""` for cluster-scoped resources and all-namespace lists.
    pub namespace: String,
    pub name: String,
    /// The `fieldSelector` of a list or watch as sent (`metadata.name=x`, `spec.nodeName=n`),
    /// `""` without one: the Node authorizer decides on it, and the audit log's `requestURI`
    /// shows it.
    pub field_selector: String,
    /// The HTTP status of the answer (a watch's is its first line's, 200).
    pub code: u16,
    /// When the request came in (before any injected latency), so tests can measure the gaps
    /// between a client's requests.
    pub received: Instant,
}

/// The shared log; cloning shares it.
#[derive(Clone, Default)]
pub struct RequestLog(Arc<Mutex<VecDeque<RequestRecord>>>);

impl RequestLog {
    pub fn record(&self, record: RequestRecord) {
        let mut records = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if records.len() == CAPACITY {
            records.pop_front();
        }
        records.push_back(record);
    }

    /// The records kept, oldest first.
    pub fn snapshot(&self) -> Vec<RequestRecord> {
        let records = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        records.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> RequestRecord {
        RequestRecord {
            user: "u".into(),
            verb: Verb::Get,
            group: String::new(),
            resource: "nodes".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: name.into(),
            field_selector: String::new(),
            code: 200,
            received: Instant::now(),
        }
    }

    #[test]
    fn the_oldest_records_make_room() {
        let log = RequestLog::default();
        for n in 0..=CAPACITY {
            log.record(record(&n.to_string()));
        }
        let records = log.snapshot();
        assert_eq!(records.len(), CAPACITY);
        assert_eq!(records[0].name, "1");
        assert_eq!(records[CAPACITY - 1].name, CAPACITY.to_string());
    }
}
