//! LeaseActor through the real kube-rs adapter against an API server (the emulator, or a real
//! cluster with NODEPULSE_TEST_KUBECONFIG): it creates the Lease owned by its Node, renews it
//! with a renewTime that only moves forward, survives writes behind its back, and keeps
//! renewing across its own restarts.

use std::{sync::Arc, time::Duration};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::PostParams};
use nodepulse::{apiserver_client::KubeApi, config::Config};
use nodepulse_actors::{
    lease::{LeaseActor, LeaseSettings},
    ports::{LeaseApi, NODE_LEASE_NAMESPACE},
};
use nodepulse_supervisor::{
    ChildSpec, KillMode, Supervisor, SupervisorConfig, SupervisorHandle, mailbox,
};
use nodepulse_testkit::{
    PATIENCE,
    cluster::{TestCluster, unique_node_name},
    eventually_async,
};

/// Renewals every second: a 4 s lease renewed at a quarter of it.
const LEASE_SECONDS: i32 = 4;

async fn start_lease_actor(cluster: &TestCluster, node: &str) -> SupervisorHandle {
    let api = KubeApi::connect(
        Some(&cluster.kubeconfig),
        &Config::embedded_default().expect("default config"),
    )
    .await
    .expect("connects");
    let port: Arc<dyn LeaseApi> = api;
    let settings = LeaseSettings {
        node: node.to_owned(),
        lease_duration_seconds: LEASE_SECONDS,
    };
    let mut config = SupervisorConfig::new(node);
    config.backoff.initial = Duration::from_millis(50);
    config.liveness_timeout = Duration::from_secs(2);
    config.liveness_interval = Duration::from_millis(100);
    let (_address, inbox) = mailbox(16);
    Supervisor::builder(config)
        .child(ChildSpec::new("lease", inbox, move || {
            LeaseActor::new(settings.clone(), Arc::clone(&port))
        }))
        .start()
}

async fn read_lease(cluster: &TestCluster, node: &str) -> Option<Lease> {
    Api::<Lease>::namespaced(cluster.client.clone(), NODE_LEASE_NAMESPACE)
        .get_opt(node)
        .await
        .ok()
        .flatten()
}

fn renew_time(lease: &Lease) -> Timestamp {
    lease
        .spec
        .as_ref()
        .and_then(|spec| spec.renew_time.as_ref())
        .map(|time| time.0)
        .expect("renewTime")
}

/// Waits for `count` renewals after `after`, each later than the one before; returns the last.
async fn renewals_continue(
    cluster: &TestCluster,
    node: &str,
    mut after: Timestamp,
    count: usize,
) -> Timestamp {
    for _ in 0..count {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let seen = read_lease(cluster, node)
                .await
                .map(|lease| renew_time(&lease));
            if let Some(seen) = seen.filter(|seen| *seen > after) {
                after = seen;
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the lease was not renewed after {after} within {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    after
}

#[actix_rt::test]
async fn the_lease_is_created_owned_by_its_node_and_renewed_forward() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("lease-owner");
    let uid = cluster.create_node(&node).await;
    let _supervisor = start_lease_actor(&cluster, &node).await;

    eventually_async("the lease exists", || async {
        read_lease(&cluster, &node).await.is_some()
    })
    .await;
    let lease = read_lease(&cluster, &node).await.expect("lease");
    let spec = lease.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(node.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(LEASE_SECONDS));
    let owner = lease.metadata.owner_references.clone().expect("owner")[0].clone();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Node", node.as_str(), uid.as_str())
    );

    renewals_continue(&cluster, &node, renew_time(&lease), 3).await;
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn a_write_behind_its_back_is_absorbed_and_renewals_go_on() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("lease-conflict");
    cluster.create_node(&node).await;
    let _supervisor = start_lease_actor(&cluster, &node).await;
    eventually_async("the lease exists", || async {
        read_lease(&cluster, &node).await.is_some()
    })
    .await;

    // Another writer bumps the resourceVersion, so the actor's cached copy is stale.
    let leases = Api::<Lease>::namespaced(cluster.client.clone(), NODE_LEASE_NAMESPACE);
    let mut edited = read_lease(&cluster, &node).await.expect("lease");
    edited.metadata.labels = Some([("edited".to_owned(), "behind-its-back".to_owned())].into());
    let edited = leases
        .replace(&node, &PostParams::default(), &edited)
        .await
        .expect("replaced");

    let last = renewals_continue(&cluster, &node, renew_time(&edited), 2).await;
    let lease = read_lease(&cluster, &node).await.expect("lease");
    assert_eq!(
        lease
            .metadata
            .labels
            .and_then(|labels| labels.get("edited").cloned())
            .as_deref(),
        Some("behind-its-back")
    );
    assert!(renew_time(&edited) < last);
    cluster.delete_node(&node).await;
}

#[actix_rt::test]
async fn renewals_go_on_across_restarts_of_the_actor() {
    let cluster = TestCluster::start().await;
    let node = unique_node_name("lease-restart");
    cluster.create_node(&node).await;
    let supervisor = start_lease_actor(&cluster, &node).await;
    eventually_async("the lease exists", || async {
        read_lease(&cluster, &node).await.is_some()
    })
    .await;
    let mut last = renew_time(&read_lease(&cluster, &node).await.expect("lease"));

    for mode in [KillMode::Stop, KillMode::Panic, KillMode::Hang] {
        let restarts = supervisor
            .actor("lease")
            .map(|actor| actor.restarts)
            .unwrap_or(0);
        eventually_async("the lease actor is running", || async {
            supervisor
                .actor("lease")
                .is_some_and(|actor| actor.state == nodepulse_supervisor::ChildState::Running)
        })
        .await;
        supervisor.kill("lease", mode).await.expect("killed");
        eventually_async("the lease actor restarted", || async {
            supervisor
                .actor("lease")
                .is_some_and(|actor| actor.restarts > restarts)
        })
        .await;
        last = renewals_continue(&cluster, &node, last, 2).await;
    }
    cluster.delete_node(&node).await;
}

#[test]
fn a_renewal_writes_fewer_bytes_than_the_kubelets_lease_put() {
    let renewal = nodepulse_actors::ports::LeaseRenewal {
        name: "ip-10-0-113-214.eu-west-1.compute.internal".to_owned(),
        resource_version: "123456789".to_owned(),
        lease_duration_seconds: 40,
        renew_time: "2026-11-29T20:31:07.123456Z".parse().expect("time"),
        owner_node_uid: None,
    };
    let body =
        serde_json::to_vec(&nodepulse::apiserver_client::renewal_patch(&renewal)).expect("json");
    eprintln!(
        "lease renewal body: {} bytes: {}",
        body.len(),
        String::from_utf8_lossy(&body)
    );
    // The kubelet 1.36 sends 482 B of protobuf (1.18 kB as JSON) per lease PUT.
    assert!(body.len() < 482, "{} bytes", body.len());
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("\"resourceVersion\":\"123456789\"")
            && text.contains("\"renewTime\":\"2026-11-29T20:31:07.123456Z\""),
        "{text}"
    );
}
