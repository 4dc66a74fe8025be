//! The kubelet API holds what it promises under load a stranger can make: `/logs/` streams a
//! file of any size in the same memory (the daemon's peak RSS, read from `/proc`, while three
//! clients read a 256 MiB file at once) and never waits on a FIFO; and a flood of distinct
//! bearer tokens does not push a token in use out of the TokenReview cache.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use futures::future::BoxFuture;
use k8s_openapi::api::{
    authentication::v1::{TokenReviewStatus, UserInfo},
    authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus},
};
use nodepulse::{
    config::{Config, Settings, Source},
    kubelet_server::{
        self, Parts,
        reviews::{ReviewError, Reviews},
    },
};

use super::kubelet_api::free_port;
use nodepulse_testkit::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
    daemon::DaemonProcess,
    kubelet_client::{KubeletClient, TestCa, serving_ca},
    root_dir::RootDir,
};

const MIB: u64 = 1024 * 1024;

/// The most a process has had resident (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

#[tokio::test]
async fn node_logs_stream_a_huge_file_to_three_readers_in_constant_memory() {
    let cluster = TestCluster::start().await;
    let root = RootDir::new();
    let ca = TestCa::new("test-cluster-ca");
    let ca_file = root.path().join("client-ca.crt");
    std::fs::write(&ca_file, &ca.pem).expect("write the client CA");
    let port = free_port();
    let yaml = format!(
        "runtime: cri\ncontainerRuntimeEndpoint: unix://{root}/no-runtime.sock\nrootDir: {root}\naddress: 127.0.0.1\nport: {port}\nhealthzPort: 0\nauthentication:\n  x509: {{clientCAFile: {ca}}}\nauthorization: {{mode: AlwaysAllow}}\ndebug:\n  address: 127.0.0.1:0\n",
        root = root.path().display(),
        ca = ca_file.display(),
    );
    let node = unique_node_name("kapi-logs-rss");
    let daemon = DaemonProcess::start(&cluster.kubeconfig, &node, &yaml).await;
    // A directory of its own under the node's /var/log, removed however the test ends; the
    // file is sparse, so it costs no disk.
    let logs = tempfile::Builder::new()
        .prefix("nodepulse-test-")
        .tempdir_in("/var/log")
        .expect("a directory under /var/log");
    let size = 256 * MIB;
    std::fs::File::create(logs.path().join("huge.log"))
        .and_then(|file| file.set_len(size))
        .expect("a 256 MiB file");
    let dir = logs.path().file_name().expect("a name").to_string_lossy();
    let crt = std::fs::read_to_string(root.path().join("pki/kubelet.crt")).expect("kubelet.crt");
    let admin = ca.client("kube-apiserver-kubelet-client", "system:masters");
    let client = KubeletClient::new(
        SocketAddr::from(([127, 0, 0, 1], port)),
        &node,
        &serving_ca(&crt),
        Some(&admin),
    );
    assert_eq!(client.get("/healthz").await.status, 200);
    let before = peak_rss(daemon.pid());
    let path = format!("/logs/{dir}/huge.log");
    let reads = futures::future::join_all((0..3).map(|_| client.get_counted(&path))).await;
    let after = peak_rss(daemon.pid());
    eprintln!(
        "the daemon's peak RSS: {} MiB before, {} MiB after three reads of a {} MiB file at once",
        before / MIB,
        after / MIB,
        size / MIB
    );
    assert_eq!(reads, vec![(200, size); 3], "every byte to every reader");
    assert!(
        after - before < 32 * MIB,
        "the peak RSS grew by {} MiB",
        (after - before) / MIB
    );

    rustix::fs::mknodat(
        rustix::fs::CWD,
        logs.path().join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    // Bounded only so a daemon that waits for the FIFO's writer fails the test, not hangs it.
    let fifo = tokio::time::timeout(PATIENCE, client.get(&format!("/logs/{dir}/fifo")))
        .await
        .expect("an answer without a writer");
    assert_eq!(
        (fifo.status, fifo.body.as_str()),
        (404, "404 page not found\n")
    );
}

/// Knows the tokens that start with `good-`; counts the reviews asked per token.
#[derive(Default)]
struct CountedReviews {
    asked: Mutex<HashMap<String, usize>>,
}

impl CountedReviews {
    fn asked(&self, token: &str) -> usize {
        self.asked
            .lock()
            .map(|asked| asked.get(token).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Reviews for CountedReviews {
    fn token_review(
        &self,
        token: String,
    ) -> BoxFuture<'static, Result<TokenReviewStatus, ReviewError>> {
        if let Ok(mut asked) = self.asked.lock() {
            *asked.entry(token.clone()).or_default() += 1;
        }
        let good = token.starts_with("good-");
        Box::pin(async move {
            Ok(TokenReviewStatus {
                authenticated: Some(good),
                user: good.then(|| UserInfo {
                    username: Some(token),
                    ..UserInfo::default()
                }),
                ..TokenReviewStatus::default()
            })
        })
    }

    fn access_review(
        &self,
        _spec: SubjectAccessReviewSpec,
    ) -> BoxFuture<'static, Result<SubjectAccessReviewStatus, ReviewError>> {
        Box::pin(async { Err(ReviewError("AlwaysAllow asks none".into())) })
    }
}

#[tokio::test]
async fn a_flood_of_unknown_tokens_does_not_evict_a_token_in_use() {
    let root = RootDir::new();
    let yaml = format!(
        "runtime: cri\nrootDir: {}\naddress: 127.0.0.1\nport: 0\nhealthzPort: 0\nauthentication:\n  webhook: {{enabled: true, cacheTTL: 1h}}\nauthorization: {{mode: AlwaysAllow}}\n",
        root.path().display()
    );
    let node = unique_node_name("kapi-tokens");
    let settings = Settings {
        config: Config::parse(&yaml, Source::Embedded).expect("valid"),
        node_name: node.clone(),
        kubeconfig: None,
        standalone: false,
        bootstrap: None,
    };
    let reviews = Arc::new(CountedReviews::default());
    let served = kubelet_server::prepare(&settings)
        .expect("prepared")
        .serve(Parts {
            reviews: Arc::clone(&reviews) as Arc<dyn Reviews>,
            problems: None,
            pods: nodepulse_actors::pods::PodsView::empty(),
            runtime: None,
            volumes: None,
            probes: None,
            pod_storage: None,
        })
        .expect("serving");
    let crt = std::fs::read_to_string(root.path().join("pki/kubelet.crt")).expect("kubelet.crt");
    let client = KubeletClient::new(
        SocketAddr::from(([127, 0, 0, 1], served.address.port())),
        &node,
        &serving_ca(&crt),
        None,
    );
    let mut connection = client.connection().await;
    let in_use = "good-metrics-scraper";
    // More distinct tokens than the cache holds, the one in use among them as a scraper
    // would use it.
    for flood in 0..5_000 {
        if flood % 256 == 0 {
            assert_eq!(connection.get("/healthz", Some(in_use)).await, 200);
        }
        let stranger = format!("unknown-{flood}");
        assert_eq!(connection.get("/healthz", Some(&stranger)).await, 401);
    }
    assert_eq!(connection.get("/healthz", Some(in_use)).await, 200);
    assert_eq!(reviews.asked(in_use), 1, "reviewed once, then cached");
    assert_eq!(reviews.asked("unknown-4999"), 1);
    served.stop();
}
