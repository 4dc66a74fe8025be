//! A 1,000-node fleet through a control-plane restart (issue 19): once the emulator answers
//! again, every node renews its Lease within the goal, and the fleet's first seconds back are
//! printed (`--nocapture`) to show how the return is paced.

use std::time::{Duration, Instant, SystemTime};

use nodepulse::{
    apiserver_client::KubeApi,
    config::{self, Config, Settings, Source},
    fleet::{Fleet, FleetOptions},
};
use nodepulse_emulator::{Outage, OutageReport, RequestRecord, Verb};

use crate::exclusive;
use nodepulse_testkit::{
    attack::needs_emulator,
    cluster::{TestCluster, unique_node_name},
    outage::{leases_renewed, outage_length, poll_until, renew_times},
    pods::SIMULATED_FLEET,
};

/// The goal (issue 19), asserted with [`SLACK`] on top for a slow machine.
const FLEET_LEASE_GOAL: Duration = Duration::from_secs(5);
const SLACK: Duration = Duration::from_secs(3);

const FLEET_NODES: usize = 1000;
/// How long a 1,000-node fleet may take to become Ready on a loaded 2-core machine.
const FLEET_START_PATIENCE: Duration = Duration::from_secs(300);

#[actix_rt::test]
async fn a_fleet_of_a_thousand_nodes_renews_every_lease_soon_after_an_outage() {
    let _alone = exclusive().await;
    let test = "a_fleet_of_a_thousand_nodes_renews_every_lease_soon_after_an_outage";
    let cluster = TestCluster::start().await;
    if !needs_emulator(&cluster, test) {
        return;
    }
    let base = unique_node_name("recovery-fleet");
    // The kubelet's Lease timing: the simulated fleet's configuration and nothing shorter.
    let mut config =
        Config::parse(SIMULATED_FLEET, Source::Embedded).expect("valid fleet configuration");
    config.nodes = config::with_generated(&[], &base, FLEET_NODES).expect("enough nodes");
    let names: Vec<String> = config.nodes.iter().map(|node| node.name.clone()).collect();
    let settings = Settings {
        config,
        node_name: base.clone(),
        kubeconfig: Some(cluster.kubeconfig.clone()),
        standalone: false,
        bootstrap: None,
    };
    let api = KubeApi::connect(settings.kubeconfig.as_deref(), &settings.config)
        .await
        .expect("connects");
    let fleet = Fleet::start(&settings, api, &FleetOptions { arbiters: 2 });
    let started = Instant::now();
    poll_until(
        "every node of the fleet has a Lease",
        FLEET_START_PATIENCE,
        Duration::from_millis(500),
        || async { renew_times(&cluster.client).await.len() >= FLEET_NODES },
    )
    .await;
    eprintln!("{test}: {FLEET_NODES} Leases after {:?}", started.elapsed());

    let faults = cluster.faults();
    let went_down = SystemTime::now();
    let down = outage_length();
    let OutageReport { came_back, .. } = faults
        .outage(Outage::abrupt(down))
        .await
        .expect("the server goes down and comes back");
    let renewed_after = leases_renewed(&cluster.client, &names, went_down, came_back).await;
    let window = Duration::from_secs(10);
    tokio::time::sleep_until((came_back + window).into()).await;
    let requests = cluster.emulator.as_ref().expect("the emulator").requests();
    let fleet_requests: Vec<RequestRecord> = requests
        .into_iter()
        .filter(|request| !(request.verb == Verb::List && request.resource == "leases"))
        .collect();
    let sent = first_requests_back(&fleet_requests, came_back, window);
    eprintln!("{test}: down {down:?}; API back → every Lease renewed {renewed_after:?}; {sent}");
    assert!(
        renewed_after <= FLEET_LEASE_GOAL + SLACK,
        "every Lease renewed {renewed_after:?} after the API was back"
    );
    assert!(
        fleet.shutdown(Duration::from_secs(10)).await,
        "the fleet stops"
    );
}

/// The resource requests served in the first `window` after `back`: per second over the
/// window, in the busiest second, and by verb and resource.
fn first_requests_back(requests: &[RequestRecord], back: Instant, window: Duration) -> String {
    let mut per_second = vec![0_usize; window.as_secs() as usize];
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for request in requests {
        let Some(after) = request.received.checked_duration_since(back) else {
            continue;
        };
        if after >= window {
            continue;
        }
        per_second[after.as_secs() as usize] += 1;
        let resource = if request.subresource.is_empty() {
            request.resource.clone()
        } else {
            format!("{}/{}", request.resource, request.subresource)
        };
        *by_kind
            .entry(format!("{} {resource}", request.verb.as_str()))
            .or_default() += 1;
    }
    let total: usize = per_second.iter().sum();
    format!(
        "{:.0} requests/s over the first {window:?} back, {} in the busiest second ({per_second:?}); {by_kind:?}",
        total as f64 / window.as_secs_f64(),
        per_second.iter().max().unwrap_or(&0),
    )
}
