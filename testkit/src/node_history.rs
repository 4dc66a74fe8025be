//! Every version of one Node the API server wrote while a test watched, from a watch that starts
//! at the resourceVersion the test read: the server's own change history, so a condition that
//! was Unknown for a single write is seen, where polling every so often can miss it. A watch
//! that ends is resumed from the last version seen; one the server cannot resume (410 Gone) is
//! a gap, reported so that no test passes on writes it did not see.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{WatchEvent, WatchParams},
};

use crate::observer::{conditions, unreachable};

/// One version of the Node: when the watch delivered it, its conditions' statuses by type, and
/// whether it carried the unreachable taint.
#[derive(Clone, Debug)]
pub struct NodeVersion {
    pub seen: Instant,
    pub resource_version: String,
    pub conditions: BTreeMap<String, String>,
    pub unreachable: bool,
}

#[derive(Default)]
struct Recorded {
    versions: Vec<NodeVersion>,
    gaps: Vec<String>,
}

/// Watches one Node until dropped.
pub struct NodeHistory {
    recorded: Arc<Mutex<Recorded>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeHistory {
    /// Starts at the Node's current version (recorded as the first).
    pub async fn start(client: &kube::Client, name: &str) -> Self {
        let nodes = Api::<Node>::all(client.clone());
        let node = nodes.get(name).await.expect("the node exists");
        let mut from = node
            .metadata
            .resource_version
            .clone()
            .expect("a resourceVersion");
        let recorded = Arc::new(Mutex::new(Recorded {
            versions: vec![version(&node)],
            gaps: Vec::new(),
        }));
        let shared = Arc::clone(&recorded);
        let params = WatchParams::default().fields(&format!("metadata.name={name}"));
        let task = actix_rt::spawn(async move {
            loop {
                let mut events = match nodes.watch(&params, &from).await {
                    Ok(events) => events.boxed(),
                    // Not served: nothing is lost while the server keeps its history.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                while let Some(event) = events.next().await {
                    let Ok(mut recorded) = shared.lock() else {
                        return;
                    };
                    match event {
                        Ok(WatchEvent::Added(node) | WatchEvent::Modified(node)) => {
                            let seen = version(&node);
                            from.clone_from(&seen.resource_version);
                            recorded.versions.push(seen);
                        }
                        Ok(WatchEvent::Deleted(node)) => {
                            recorded.gaps.push(format!(
                                "the Node was deleted at version {}",
                                node.metadata.resource_version.unwrap_or_default()
                            ));
                        }
                        Ok(WatchEvent::Bookmark(bookmark)) => {
                            from = bookmark.metadata.resource_version;
                        }
                        Ok(WatchEvent::Error(status)) if status.code == 410 => {
                            recorded.gaps.push(format!(
                                "the watch could not resume after version {from}: {}",
                                status.message
                            ));
                            return;
                        }
                        // Any other error ends this watch; the next resumes where it stopped.
                        Ok(WatchEvent::Error(_)) | Err(_) => break,
                    }
                }
            }
        });
        Self { recorded, task }
    }

    /// The versions seen at or after `since`, oldest first.
    pub fn versions_since(&self, since: Instant) -> Vec<NodeVersion> {
        self.with(|recorded| {
            recorded
                .versions
                .iter()
                .filter(|version| version.seen >= since)
                .cloned()
                .collect()
        })
    }

    /// The Node's versions so far, oldest first.
    pub fn versions(&self) -> Vec<NodeVersion> {
        self.with(|recorded| recorded.versions.clone())
    }

    /// What the watch could not see (empty: every write since the start was seen).
    pub fn gaps(&self) -> Vec<String> {
        self.with(|recorded| recorded.gaps.clone())
    }

    fn with<T>(&self, read: impl FnOnce(&Recorded) -> T) -> T {
        read(&self.recorded.lock().expect("the recorded versions"))
    }
}

impl Drop for NodeHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn version(node: &Node) -> NodeVersion {
    NodeVersion {
        seen: Instant::now(),
        resource_version: node.metadata.resource_version.clone().unwrap_or_default(),
        conditions: conditions(node),
        unreachable: unreachable(node),
    }
}
