//! The watch side of the store: the bounded window of recent changes and the broadcast of new
//! ones. A watch resumes from this window or, when its version fell out of it, gets 410 Expired
//! exactly like kube-apiserver's watch cache.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use crate::api::{ApiError, StoredKind};

/// `ADDED`, `MODIFIED` or `DELETED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change to one stored object. `revision` is the global resourceVersion the change created.
#[derive(Debug)]
pub struct Change {
    pub kind: StoredKind,
    pub event_type: EventType,
    pub object: Arc<Value>,
    /// The object before the change (for selector transitions: a MODIFIED that makes an object
    /// stop matching is delivered as DELETED, one that makes it start matching as ADDED).
    pub previous: Option<Arc<Value>>,
    pub revision: u64,
}

/// The retained window of changes, oldest first.
#[derive(Debug)]
pub struct History {
    changes: VecDeque<Arc<Change>>,
    capacity: usize,
    /// The revision of the newest change that was dropped from the window (0: none yet).
    compacted: u64,
}

impl History {
    pub fn new(capacity: usize) -> Self {
        History {
            changes: VecDeque::with_capacity(capacity.min(4096)),
            capacity: capacity.max(1),
            compacted: 0,
        }
    }

    pub fn push(&mut self, change: Arc<Change>) {
        if self.changes.len() == self.capacity
            && let Some(dropped) = self.changes.pop_front()
        {
            self.compacted = dropped.revision;
        }
        self.changes.push_back(change);
    }

    /// Changes of `kind` newer than `since`, or 410 Expired when `since` is older than the window
    /// (`too old resource version: <since> (<oldest-1>)`, as the watch cache words it).
    pub fn since(&self, kind: StoredKind, since: u64) -> Result<Vec<Arc<Change>>, ApiError> {
        if since < self.compacted {
            return Err(ApiError::expired(format!(
                "too old resource version: {since} ({})",
                self.compacted
            )));
        }
        let start = self.changes.partition_point(|c| c.revision <= since);
        Ok(self
            .changes
            .iter()
            .skip(start)
            .filter(|c| c.kind == kind)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(revision: u64) -> Arc<Change> {
        Arc::new(Change {
            kind: StoredKind::Node,
            event_type: EventType::Added,
            object: Arc::new(json!({})),
            previous: None,
            revision,
        })
    }

    #[test]
    fn resumes_after_a_version_and_expires_what_fell_out() {
        let mut history = History::new(3);
        for rv in 1..=5 {
            history.push(change(rv));
        }
        let revisions = |v: Vec<Arc<Change>>| v.iter().map(|c| c.revision).collect::<Vec<_>>();
        assert_eq!(
            history.since(StoredKind::Node, 3).map(revisions),
            Ok(vec![4, 5])
        );
        assert_eq!(
            history.since(StoredKind::Node, 2).map(revisions),
            Ok(vec![3, 4, 5])
        );
        let err = history
            .since(StoredKind::Node, 1)
            .expect_err("revision 1 fell out of the window");
        assert_eq!(
            (err.code, err.reason, err.message.as_str()),
            (410, "Expired", "too old resource version: 1 (2)")
        );
        assert_eq!(history.since(StoredKind::Pod, 2).map(revisions), Ok(vec![]));
    }
}
