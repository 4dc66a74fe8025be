//! `staticPodURL` with real containers (issue 27): a small HTTP server of the test's, on
//! loopback, serves the manifest; its pod runs as source `http` with a mirror pod; a changed
//! body (a PodList now) replaces it; answers that are errors (a 404, a body that is no pod)
//! leave it running; an empty PodList removes it and its mirror.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use crate::{
    cri_pods::{UNTIL_TERM, app, runtime_id},
    static_pods::{HASH, NAMESPACE, StaticSetup, annotation, runs, wait_mirror},
};
use nodepulse_testkit::{
    cleanup::{RUN_LABEL, run_id},
    eventually_async,
    oci_image::BUSYBOX_IMAGE,
};

/// The test's manifest server: answers every GET with the status line and body set now,
/// and counts the requests.
#[derive(Clone)]
pub(crate) struct ManifestServer {
    pub(crate) url: String,
    answer: Arc<Mutex<(String, String)>>,
    requests: Arc<AtomicUsize>,
    /// The last request's head, lower-cased.
    last_head: Arc<Mutex<String>>,
}

impl ManifestServer {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/manifests", listener.local_addr().expect("addr"));
        let server = Self {
            url,
            answer: Arc::new(Mutex::new(("404 Not Found".to_owned(), String::new()))),
            requests: Arc::default(),
            last_head: Arc::default(),
        };
        let serving = server.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = vec![0; 8192];
                let read = stream.read(&mut head).await.unwrap_or(0);
                *serving.last_head.lock().expect("head") =
                    String::from_utf8_lossy(&head[..read]).to_lowercase();
                let (status, body) = serving.answer.lock().expect("answer").clone();
                serving.requests.fetch_add(1, Ordering::SeqCst);
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        });
        server
    }

    pub(crate) fn answer(&self, status: &str, body: String) {
        *self.answer.lock().expect("answer") = (status.to_owned(), body);
    }

    /// Waits until nodepulse read the answer set now at least twice.
    async fn read_twice(&self) {
        let from = self.requests.load(Ordering::SeqCst);
        eventually_async("nodepulse read the URL twice more", || async {
            self.requests.load(Ordering::SeqCst) >= from + 2
        })
        .await;
    }
}

fn pod(version: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "served", "namespace": NAMESPACE, "labels": {RUN_LABEL: run_id()}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "app", "image": BUSYBOX_IMAGE, "command": ["/bin/sh", "-c", UNTIL_TERM],
                "env": [{"name": "VERSION", "value": version}],
            }],
        },
    })
}

#[actix_rt::test]
async fn a_url_serves_static_pods_that_follow_its_body_and_outlive_its_errors() {
    let test = "a_url_serves_static_pods_that_follow_its_body_and_outlive_its_errors";
    let server = ManifestServer::start().await;
    server.answer("200 OK", serde_yaml_ng::to_string(&pod("1")).expect("yaml"));
    let extra = format!(
        "staticPodURL: {}\nhttpCheckFrequency: 1s\nstaticPodURLHeader: {{X-Test: [one]}}\n",
        server.url
    );
    let Some(setup) = StaticSetup::start_with(test, "static-url", &extra).await else {
        return;
    };
    setup
        .node
        .guard(async {
            let mirror_name = setup.mirror_name("served");
            let first = wait_mirror(&setup, &mirror_name, "the served pod Running", |_| true).await;
            assert_eq!(
                annotation(&first, "kubernetes.io/config.source"),
                Some("http")
            );
            let hash = annotation(&first, HASH).expect("config.hash").to_owned();
            let container = runtime_id(&app(&first));
            let head = server.last_head.lock().expect("head").clone();
            assert!(
                head.contains("x-test: one"),
                "staticPodURLHeader is sent: {head}"
            );

            // A new body, now a PodList: the pod is replaced.
            let list = json!({"apiVersion": "v1", "kind": "PodList", "items": [pod("2")]});
            server.answer("200 OK", list.to_string());
            let second = wait_mirror(&setup, &mirror_name, "the new body's pod Running", |pod| {
                annotation(pod, HASH).is_some_and(|new| new != hash)
            })
            .await;
            let new_hash = annotation(&second, HASH).expect("config.hash").to_owned();
            let replacement = runtime_id(&app(&second));
            assert_ne!(replacement, container);
            setup
                .wait_containers_gone(&hash, "the old body's containers are gone")
                .await;

            // Errors keep what runs: a 404, then a body that is no pod.
            server.answer("404 Not Found", "gone".to_owned());
            server.read_twice().await;
            server.answer("200 OK", "kind: [".to_owned());
            server.read_twice().await;
            assert!(runs(&setup.fixture, &replacement).await, "the pod runs on");
            let still = setup
                .pods()
                .get(&mirror_name)
                .await
                .expect("the mirror pod");
            assert_eq!(annotation(&still, HASH), Some(new_hash.as_str()));

            // An empty list: the pod stops and its mirror goes.
            let empty = json!({"apiVersion": "v1", "kind": "PodList", "items": []});
            server.answer("200 OK", empty.to_string());
            setup.wait_mirror_deleted(&mirror_name).await;
            setup
                .wait_containers_gone(&new_hash, "the served pod's containers are gone")
                .await;
        })
        .await;
}
