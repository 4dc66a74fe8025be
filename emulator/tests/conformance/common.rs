//! The cluster under test: the in-process emulator by default, or the real cluster named by
//! `NODEPULSE_TEST_KUBECONFIG`. Tests talk HTTP through kube-rs's client, so the same request
//! code works against both (TLS and credentials of a real cluster included).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::WatchEvent;
use nodepulse_emulator::{Emulator, EmulatorConfig, EmulatorHandle};

use crate::cleanup::Created;
use serde_json::{Value, json};

pub const REAL_CLUSTER_ENV: &str = "NODEPULSE_TEST_KUBECONFIG";

/// A cluster to test against.
pub struct Cluster {
    pub client: Client,
    /// What the test created, deleted when the cluster drops.
    created: Created,
    pub emulator: Option<EmulatorHandle>,
    pub kubeconfig: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

/// An HTTP answer: status code and JSON body (Null when the body is not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Cluster {
    /// The emulator (default configuration for tests) or the real cluster.
    pub async fn start() -> Cluster {
        match std::env::var_os(REAL_CLUSTER_ENV) {
            Some(path) => Self::real(PathBuf::from(path)).await,
            None => Self::start_emulator(test_config()).await,
        }
    }

    /// An emulator with `config`; `None` (and a SKIPPED line naming `test`) against a real
    /// cluster, for behaviour only the emulator can show.
    pub async fn emulator_only(test: &str, config: EmulatorConfig) -> Option<Cluster> {
        if std::env::var_os(REAL_CLUSTER_ENV).is_some() {
            skipped(
                test,
                "the emulator (fault injection, lifecycle timing or auth config)",
            );
            return None;
        }
        Some(Self::start_emulator(config).await)
    }

    async fn start_emulator(config: EmulatorConfig) -> Cluster {
        let emulator = Emulator::start(config).await.expect("emulator starts");
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        emulator
            .write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        let client = client_for(&kubeconfig).await;
        Cluster {
            client,
            created: Created::default(),
            emulator: Some(emulator),
            kubeconfig,
            _dir: Some(dir),
        }
    }

    async fn real(kubeconfig: PathBuf) -> Cluster {
        let client = client_for(&kubeconfig).await;
        Cluster {
            client,
            created: Created::default(),
            emulator: None,
            kubeconfig,
            _dir: None,
        }
    }

    pub fn is_real(&self) -> bool {
        self.emulator.is_none()
    }

    pub fn emulator(&self) -> &EmulatorHandle {
        self.emulator
            .as_ref()
            .expect("emulator-only test ran against a real cluster")
    }

    /// A raw request; `content_type` defaults to JSON when there is a body.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = http::Request::builder().method(method).uri(path);
        let bytes = match body {
            Some(body) => {
                request =
                    request.header("Content-Type", content_type.unwrap_or("application/json"));
                serde_json::to_vec(body).expect("serialisable body")
            }
            None => Vec::new(),
        };
        let request = request
            .body(kube::client::Body::from(bytes))
            .expect("valid request");
        let response = self.client.send(request).await.expect("request sent");
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect_bytes()
            .await
            .expect("body read");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        match (method, status) {
            ("POST", 201) => self.created.record(path, &body),
            ("PUT", 201) => self.created.record(parent(path), &body),
            _ => {}
        }
        Reply { status, body }
    }

    /// Remembers an object the test created another way (kube's typed API, kubectl), for the
    /// clean-up: `collection` is its collection's path.
    pub fn created(&self, collection: &str, name: &str) {
        self.created
            .record(collection, &json!({"metadata": {"name": name}}));
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None, None).await
    }
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.call("POST", path, None, Some(body)).await
    }
    pub async fn put(&self, path: &str, body: &Value) -> Reply {
        self.call("PUT", path, None, Some(body)).await
    }
    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Reply {
        self.call("PATCH", path, Some(content_type), Some(body))
            .await
    }
    pub async fn delete(&self, path: &str, options: Option<&Value>) -> Reply {
        self.call("DELETE", path, None, options).await
    }

    /// Creates a Node named `name` (no status) and returns it.
    pub async fn create_node(&self, name: &str) -> Value {
        let reply = self
            .post(
                "/api/v1/nodes",
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
            )
            .await;
        assert_eq!(reply.status, 201, "node create: {:?}", reply.body);
        reply.body
    }

    /// Opens a watch and returns its events (raw JSON objects with `type`/`object`).
    pub async fn watch(&self, path_and_query: &str) -> impl futures::Stream<Item = Value> + use<> {
        let request = http::Request::builder()
            .uri(path_and_query)
            .body(Vec::new())
            .expect("valid request");
        let events = self
            .client
            .request_events::<Value>(request)
            .await
            .expect("watch opens");
        events.filter_map(|e| async move { e.ok().map(event_json) })
    }
}

/// Deletes what the test created, and fails the test if any of it is left (reports it only,
/// when the test already failed).
impl Drop for Cluster {
    fn drop(&mut self) {
        let left = self.created.delete_all(&self.kubeconfig);
        if left.is_empty() {
            return;
        }
        if std::thread::panicking() {
            eprintln!("left in the cluster after a failed test: {left:?}");
        } else {
            panic!("the test left objects in the cluster: {left:?}");
        }
    }
}

/// The collection a PUT to an object's path names (`/api/v1/nodes/n` → `/api/v1/nodes`).
fn parent(path: &str) -> &str {
    let path = path.split('?').next().unwrap_or(path);
    path.rsplit_once('/').map_or(path, |(parent, _)| parent)
}

/// A watch event back in its wire shape, `{"type": ..., "object": ...}`.
fn event_json(event: WatchEvent<Value>) -> Value {
    match event {
        WatchEvent::Added(o) => json!({"type": "ADDED", "object": o}),
        WatchEvent::Modified(o) => json!({"type": "MODIFIED", "object": o}),
        WatchEvent::Deleted(o) => json!({"type": "DELETED", "object": o}),
        WatchEvent::Bookmark(b) => {
            json!({"type": "BOOKMARK", "object": {"kind": b.types.kind, "apiVersion": b.types.api_version,
            "metadata": {"resourceVersion": b.metadata.resource_version, "annotations": b.metadata.annotations}}})
        }
        WatchEvent::Error(status) => {
            json!({"type": "ERROR", "object": {"code": status.code, "reason": status.reason, "message": status.message}})
        }
    }
}

async fn client_for(kubeconfig: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("kubeconfig readable");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig valid");
    Client::try_from(config).expect("client builds")
}

/// The emulator configuration tests use: free port, lifecycle off, one worker.
pub fn test_config() -> EmulatorConfig {
    EmulatorConfig {
        workers: 1,
        ..EmulatorConfig::for_tests()
    }
}

/// Says that `test` is skipped because it needs `what`, past the harness's output capture (a
/// passing test's `eprintln!` is dropped), with this binary's running count of skips.
pub fn skipped(test: &str, what: &str) {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SKIPPED: AtomicUsize = AtomicUsize::new(0);
    let count = SKIPPED.fetch_add(1, Ordering::Relaxed) + 1;
    let line = format!(
        "SKIPPED {test}: needs {what} ({count} skipped so far in the conformance suite; its other tests ran)\n"
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// A name unique to this test run, so tests can share a real cluster.
pub fn unique(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = (0..8)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("np-{prefix}-{suffix}")
}

/// Polls `check` every 50 ms until it yields a value, failing the test after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `metadata.resourceVersion` as a number.
pub fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("numeric resourceVersion")
}

pub use futures::StreamExt;
