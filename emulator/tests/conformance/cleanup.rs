//! What the conformance suite creates, it deletes: the cluster remembers the path of every
//! object a request of the test created, and deletes them all when the test ends, passing or
//! failing (pods with grace 0), then fails the test if any is still there.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The object paths a test created, in creation order.
#[derive(Default)]
pub struct Created(Mutex<Vec<String>>);

impl Created {
    /// Remembers the object a create request to `collection` (a path, maybe with a query)
    /// answered with `body`.
    pub fn record(&self, collection: &str, body: &serde_json::Value) {
        let Some(name) = body["metadata"]["name"].as_str() else {
            return;
        };
        let collection = collection.split('?').next().unwrap_or(collection);
        let path = format!("{}/{name}", collection.trim_end_matches('/'));
        let mut created = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !created.contains(&path) {
            created.push(path);
        }
    }

    /// Deletes everything recorded, on a thread with its own runtime and client (the test's
    /// runtime may be the one unwinding); returns the paths still there afterwards.
    pub fn delete_all(&self, kubeconfig: &Path) -> Vec<String> {
        let paths = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        if paths.is_empty() {
            return paths;
        }
        let kubeconfig = kubeconfig.to_owned();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a clean-up runtime")
                .block_on(delete(kubeconfig, paths))
        })
        .join()
        .unwrap_or_else(|_| vec!["the clean-up thread panicked".into()])
    }
}

async fn delete(kubeconfig: PathBuf, paths: Vec<String>) -> Vec<String> {
    let config = Kubeconfig::read_from(&kubeconfig).expect("kubeconfig readable");
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig valid");
    let client = Client::try_from(config).expect("client builds");
    let mut left = Vec::new();
    // Newest first: pods before the namespaces they live in.
    for path in paths.iter().rev() {
        // Grace 0: a pod bound to a node without an agent never confirms a graceful delete.
        let _ = send(&client, "DELETE", &format!("{path}?gracePeriodSeconds=0")).await;
    }
    for path in &paths {
        let status = send(&client, "GET", path).await;
        // A namespace being finalized is on its way out, as deleted as a real cluster allows.
        let terminating = path.starts_with("/api/v1/namespaces/") && path.matches('/').count() == 4;
        if status != Some(404) && !(terminating && status == Some(200)) {
            left.push(path.clone());
        }
    }
    left
}

async fn send(client: &Client, method: &str, path: &str) -> Option<u16> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .body(kube::client::Body::empty())
        .ok()?;
    client.send(request).await.ok().map(|r| r.status().as_u16())
}
