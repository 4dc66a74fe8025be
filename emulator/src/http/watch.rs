//! Watch: a chunked stream of `{"type": ..., "object": ...}` lines.
//!
//! Starts from the current state (no or `0` resourceVersion, synthetic ADDED events), from a
//! resourceVersion (replayed from history; an ERROR event with 410 Expired when too old), or as
//! a streaming list (`sendInitialEvents=true`, ending the initial events with the
//! `k8s.io/initial-events-end` BOOKMARK). Selector transitions are delivered as ADDED/DELETED,
//! bookmarks are sent with `allowWatchBookmarks=true`, and the stream ends at `timeoutSeconds`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::web::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::Ending;
use super::events_view::present;
use super::handlers::Request;
use crate::api::{ApiError, ApiResource};
use crate::select::Selector;
use crate::store::{Change, EventType, Subscription, meta_str};

/// What a watcher wants to see.
struct Filter {
    resource: &'static ApiResource,
    namespace: Option<String>,
    name: Option<String>,
    selector: Selector,
    /// Send each object as a one-row `Table` (kubectl `get -w`).
    table: bool,
}

impl Filter {
    fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(object, "namespace") == ns)
            && self
                .name
                .as_deref()
                .is_none_or(|n| meta_str(object, "name") == n)
            && self.selector.matches(object)
    }

    /// The event this watcher sees for `change`, if any.
    fn event_for(&self, change: &Change) -> Option<&'static str> {
        let now = self.matches(&change.object);
        let before = change.previous.as_deref().is_some_and(|p| self.matches(p));
        match change.event_type {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => now.then_some("DELETED"),
            EventType::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        }
    }
}

/// Serves a watch request.
pub fn serve(req: &Request<'_>) -> Result<HttpResponse, ApiError> {
    let resource = req.target.resource;
    let filter = Filter {
        resource,
        namespace: req.target.namespace.clone(),
        name: req.target.name.clone(),
        selector: req.query.selector(resource)?,
        table: req.table,
    };
    let send_initial = req.query.flag("sendInitialEvents");
    let bookmarks = req.query.flag("allowWatchBookmarks");
    if send_initial && !bookmarks {
        return Err(ApiError::invalid_watch(
            "sendInitialEvents is forbidden for watch unless allowWatchBookmarks=true",
        ));
    }
    let since = match req.query.get("resourceVersion") {
        None | Some("0") => None,
        _ if send_initial => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let timeout = req
        .query
        .timeout()?
        .unwrap_or(req.state.watch.default_timeout);
    let mut pending = VecDeque::new();
    let subscription = match req.state.store.subscribe(resource.stored, since) {
        Ok(sub) => Some(sub),
        Err(expired) => {
            pending.push_back(encode("ERROR", &expired.to_status()));
            None
        }
    };
    let stream = WatchStream::new(
        filter,
        subscription,
        pending,
        send_initial,
        bookmarks.then_some(req.state.watch.bookmark_interval),
        timeout,
        req.state.shutdown.clone(),
    );
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("Transfer-Encoding", "chunked"))
        .streaming(futures::stream::unfold(stream, WatchStream::next)))
}

struct WatchStream {
    filter: Filter,
    receiver: Option<tokio::sync::broadcast::Receiver<Arc<Change>>>,
    pending: VecDeque<Bytes>,
    /// All changes up to this revision have been considered; what bookmarks report.
    progress: u64,
    bookmark_every: Option<Duration>,
    next_bookmark: Instant,
    deadline: Instant,
    shutdown: tokio::sync::watch::Receiver<Ending>,
    /// The response was cut: nothing more is sent.
    cut: bool,
}

impl WatchStream {
    fn new(
        filter: Filter,
        subscription: Option<Subscription>,
        mut pending: VecDeque<Bytes>,
        send_initial: bool,
        bookmark_every: Option<Duration>,
        timeout: Duration,
        shutdown: tokio::sync::watch::Receiver<Ending>,
    ) -> Self {
        let now = Instant::now();
        let mut stream = WatchStream {
            filter,
            receiver: None,
            pending: VecDeque::new(),
            progress: 0,
            bookmark_every,
            next_bookmark: now + bookmark_every.unwrap_or(Duration::MAX / 4),
            deadline: now + timeout,
            shutdown,
            cut: false,
        };
        if let Some(sub) = subscription {
            stream.progress = sub.revision;
            for change in &sub.initial {
                stream.consider(change);
            }
            if send_initial {
                let mark = stream.bookmark(true);
                stream.pending.push_back(mark);
            }
            stream.receiver = Some(sub.receiver);
        }
        pending.append(&mut stream.pending);
        stream.pending = pending;
        stream
    }

    fn consider(&mut self, change: &Change) {
        self.progress = self.progress.max(change.revision);
        if change.kind != self.filter.resource.stored {
            return;
        }
        if let Some(event_type) = self.filter.event_for(change) {
            let object = if self.filter.table {
                let rv = change.revision.to_string();
                super::table::table(
                    self.filter.resource,
                    &[&change.object],
                    &rv,
                    std::time::SystemTime::now(),
                )
            } else {
                present(self.filter.resource, &change.object)
            };
            let line = encode(event_type, &object);
            self.pending.push_back(line);
        }
    }

    fn bookmark(&self, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": self.progress.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.filter.resource.kind, "apiVersion": self.filter.resource.api_version(), "metadata": metadata});
        encode("BOOKMARK", &object)
    }

    async fn next(mut self) -> Option<(Result<Bytes, std::io::Error>, Self)> {
        if self.cut {
            return None;
        }
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some((Ok(line), self));
            }
            let receiver = self.receiver.as_mut()?;
            tokio::select! {
                received = receiver.recv() => match received {
                    Ok(change) => self.consider(&change),
                    // A watcher that fell behind is closed; the client resumes from its last
                    // resourceVersion (or relists on 410), as with kube-apiserver's watch cache.
                    Err(RecvError::Lagged(_) | RecvError::Closed) => return None,
                },
                () = tokio::time::sleep_until(self.next_bookmark), if self.bookmark_every.is_some() => {
                    let mark = self.bookmark(false);
                    self.pending.push_back(mark);
                    self.next_bookmark = Instant::now() + self.bookmark_every.unwrap_or_default();
                }
                () = tokio::time::sleep_until(self.deadline) => return None,
                _ = self.shutdown.changed() => {
                    if *self.shutdown.borrow() != Ending::Cut {
                        return None;
                    }
                    // An error ends the response unfinished (no last chunk): the client sees
                    // its watch cut, as when kube-apiserver is killed.
                    self.cut = true;
                    let error = std::io::Error::other("the watch was cut by an outage");
                    return Some((Err(error), self));
                }
            }
        }
    }
}

fn encode(event_type: &str, object: &Value) -> Bytes {
    let mut line =
        serde_json::to_vec(&json!({"type": event_type, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
