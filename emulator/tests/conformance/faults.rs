//! Fault injection through the Rust handle and the admin API (emulator only).

use std::time::{Duration, Instant};

use nodepulse_emulator::Verb;
use nodepulse_emulator::{FaultAction, FaultRule, Outage, OutageError};
use serde_json::{Value, json};

use crate::common::{Cluster, eventually, rv, test_config, unique};

/// A GET straight over HTTP: kube-rs retries 429/503 by itself, which would hide the faults.
async fn raw_get(cluster: &Cluster, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{}{path}", cluster.emulator().base_url()))
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

async fn lease_cluster(test: &str) -> Option<(Cluster, String, String)> {
    let cluster = Cluster::emulator_only(test, test_config()).await?;
    let name = unique("fault");
    let created = cluster
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            &json!({"metadata": {"name": name}}),
        )
        .await;
    assert_eq!(created.status, 201);
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}");
    Some((cluster, name, path))
}

#[tokio::test]
async fn next_n_error_responses_then_normal_service_and_counted() {
    let Some((cluster, name, path)) =
        lease_cluster("next_n_error_responses_then_normal_service_and_counted").await
    else {
        return;
    };
    let faults = cluster.emulator().faults();
    faults.inject(
        FaultRule::new(FaultAction::Error {
            code: 503,
            message: None,
        })
        .verb(Verb::Get)
        .resource("leases")
        .name(&name)
        .times(2),
    );
    let replies = [
        raw_get(&cluster, &path).await,
        raw_get(&cluster, &path).await,
        raw_get(&cluster, &path).await,
    ];
    assert_eq!(
        replies.iter().map(|r| r.0).collect::<Vec<_>>(),
        [503, 503, 200]
    );
    assert_eq!(replies[0].1["reason"], "ServiceUnavailable");
    assert_eq!(faults.counters().errors, 2);
}

#[tokio::test]
async fn injected_errors_carry_the_retry_after_the_rule_asks_for() {
    let Some((cluster, name, path)) =
        lease_cluster("injected_errors_carry_the_retry_after_the_rule_asks_for").await
    else {
        return;
    };
    let error = |code| FaultAction::Error {
        code,
        message: None,
    };
    let faults = cluster.emulator().faults();
    let rule = |code| {
        FaultRule::new(error(code))
            .resource("leases")
            .name(&name)
            .times(1)
    };
    // kube-apiserver writes `Retry-After` exactly when `details.retryAfterSeconds` is positive.
    for (rule, code, expected) in [
        (rule(429), 429, Some(1)),
        (rule(503), 503, Some(1)),
        (rule(429).retry_after(7), 429, Some(7)),
        (rule(503).retry_after(3), 503, Some(3)),
        (rule(500), 500, None),
        (rule(500).retry_after(2), 500, Some(2)),
        (rule(429).retry_after(0), 429, None),
        (rule(403), 403, None),
    ] {
        faults.inject(rule);
        let response = reqwest::get(format!("{}{path}", cluster.emulator().base_url()))
            .await
            .expect("request sent");
        assert_eq!(response.status().as_u16(), code);
        let header = response.headers().get("retry-after").map(|value| {
            value
                .to_str()
                .expect("ascii")
                .parse::<u64>()
                .expect("seconds")
        });
        let body: Value = response.json().await.expect("a Status");
        assert_eq!(header, expected, "{code}: {body}");
        assert_eq!(
            body["details"]["retryAfterSeconds"].as_u64(),
            expected,
            "{code}: {body}"
        );
    }
}

#[tokio::test]
async fn forced_conflicts_answer_409_on_writes() {
    let Some((cluster, name, path)) = lease_cluster("forced_conflicts_answer_409_on_writes").await
    else {
        return;
    };
    cluster.emulator().faults().inject(
        FaultRule::new(FaultAction::Conflict)
            .verb(Verb::Update)
            .resource("leases")
            .times(1),
    );
    let current = cluster.get(&path).await.body;
    let reply = cluster.put(&path, &current).await;
    assert_eq!(
        (reply.status, reply.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| m.contains(&name))
    );
    assert_eq!(
        cluster.put(&path, &current).await.status,
        200,
        "only the next write conflicts"
    );
    assert_eq!(cluster.emulator().faults().counters().conflicts, 1);
}

#[tokio::test]
async fn added_latency_delays_the_answer() {
    let Some((cluster, _, path)) = lease_cluster("added_latency_delays_the_answer").await else {
        return;
    };
    cluster
        .emulator()
        .faults()
        .inject(FaultRule::new(FaultAction::Latency { millis: 400 }).resource("leases"));
    let started = Instant::now();
    assert_eq!(cluster.get(&path).await.status, 200);
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "answered after {:?}",
        started.elapsed()
    );
    assert_eq!(cluster.emulator().faults().counters().latencies, 1);
}

#[tokio::test]
async fn hung_requests_never_answer() {
    let Some((cluster, _, path)) = lease_cluster("hung_requests_never_answer").await else {
        return;
    };
    cluster.emulator().faults().inject(
        FaultRule::new(FaultAction::Hang)
            .resource("leases")
            .times(1),
    );
    let outcome = tokio::time::timeout(Duration::from_millis(800), cluster.get(&path)).await;
    assert!(
        outcome.is_err(),
        "a hung request must not answer: {outcome:?}"
    );
    assert_eq!(
        cluster.get(&path).await.status,
        200,
        "the next request is served"
    );
    assert_eq!(cluster.emulator().faults().counters().hangs, 1);
}

#[tokio::test]
async fn dropped_connections_fail_mid_response() {
    let Some((cluster, _, path)) = lease_cluster("dropped_connections_fail_mid_response").await
    else {
        return;
    };
    cluster.emulator().faults().inject(
        FaultRule::new(FaultAction::DropConnection)
            .resource("leases")
            .times(1),
    );
    let url = format!("{}{path}", cluster.emulator().base_url());
    let result = async { reqwest::get(&url).await?.bytes().await }.await;
    assert!(result.is_err(), "the body must break off: {result:?}");
    assert_eq!(
        cluster.emulator().faults().counters().dropped_connections,
        1
    );
}

#[tokio::test]
async fn admin_api_injects_lists_and_clears_rules() {
    let Some((cluster, _, path)) = lease_cluster("admin_api_injects_lists_and_clears_rules").await
    else {
        return;
    };
    let base = format!("{}/emulator/v1/faults", cluster.emulator().base_url());
    let http = reqwest::Client::new();
    let rule = json!({"verb": "get", "resource": "leases", "action": {"type": "error", "code": 429}, "probability": 1.0});
    let created = http
        .post(&base)
        .json(&rule)
        .send()
        .await
        .expect("admin reachable");
    assert_eq!(created.status().as_u16(), 201);
    let (status, body) = raw_get(&cluster, &path).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (429, Some("TooManyRequests"))
    );
    let listed: Value = http
        .get(&base)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["rules"][0]["injected"], 1);
    assert_eq!(listed["counters"]["errors"], 1);
    assert_eq!(
        http.delete(&base)
            .send()
            .await
            .expect("clear")
            .status()
            .as_u16(),
        204
    );
    assert_eq!(cluster.get(&path).await.status, 200);
    let bad = http
        .post(&base)
        .json(&json!({"action": {"type": "explode"}}))
        .send()
        .await
        .expect("reachable");
    assert_eq!(bad.status().as_u16(), 400);
}

/// Opens a raw watch on `path` from `resource_version`: the body as it arrives, unparsed, so an
/// end that is clean can be told from a cut one.
async fn raw_watch(cluster: &Cluster, path: &str, resource_version: &str) -> reqwest::Response {
    let url = format!(
        "{}{path}?watch=true&resourceVersion={resource_version}",
        cluster.emulator().base_url()
    );
    let response = reqwest::get(url).await.expect("the watch starts");
    assert_eq!(response.status(), 200);
    response
}

/// Reads the body to its end: `Ok` when it ended cleanly, `Err` when it was cut.
async fn read_to_end(mut response: reqwest::Response) -> Result<(), reqwest::Error> {
    while response.chunk().await?.is_some() {}
    Ok(())
}

async fn refuses_connections(cluster: &Cluster) -> bool {
    matches!(
        tokio::net::TcpStream::connect(cluster.emulator().address()).await,
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// Takes the server down for `outage`, checking while it is down that connections are refused
/// and the watch on `path` ends the way the outage ends it; then that the Lease is served again
/// as it was, and a watch resumes from the old resourceVersion.
async fn outage_keeps_state(test: &str, outage: Outage) {
    let Some((cluster, _, path)) = lease_cluster(test).await else {
        return;
    };
    let before = cluster.get(&path).await.body;
    let resource_version = before["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion")
        .to_owned();
    let collection = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let watch = raw_watch(&cluster, collection, &resource_version).await;
    let faults = cluster.emulator().faults();
    faults.schedule_outage(outage).expect("the outage starts");
    let ended = tokio::time::timeout(Duration::from_secs(5), read_to_end(watch))
        .await
        .expect("the watch ends with the outage");
    assert_eq!(
        ended.is_ok(),
        outage.graceful,
        "a graceful outage ends watches cleanly, an abrupt one cuts them: {ended:?}"
    );
    eventually(
        "connections are refused",
        Duration::from_secs(5),
        || async { refuses_connections(&cluster).await.then_some(()) },
    )
    .await;
    assert!(faults.serving().down);
    let report = faults
        .outage(outage)
        .await
        .expect_err("no second outage while one is under way");
    assert_eq!(report, OutageError::Busy);
    let back = faults.outage_over().await.expect("the server comes back");
    assert!(back.came_back.duration_since(back.went_down) >= outage.duration());
    assert!(!faults.serving().down);
    assert_eq!(
        cluster.get(&path).await.body,
        before,
        "the Lease is kept as it was"
    );
    // A watch resumes from the resourceVersion it had, and sees what changes next.
    let resumed = raw_watch(&cluster, collection, &resource_version).await;
    let renewed = cluster
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"spec": {"holderIdentity": "after-outage"}}),
        )
        .await;
    assert_eq!(renewed.status, 200);
    assert!(rv(&renewed.body) > resource_version.parse::<u64>().expect("a number"));
    let mut resumed = resumed;
    let first = tokio::time::timeout(Duration::from_secs(5), resumed.chunk())
        .await
        .expect("the resumed watch delivers")
        .expect("the resumed watch is whole")
        .expect("an event");
    let event: Value = serde_json::from_slice(&first).expect("a JSON event");
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(event["object"]["spec"]["holderIdentity"], "after-outage");
}

#[tokio::test]
async fn an_abrupt_outage_refuses_connections_cuts_watches_and_keeps_every_object() {
    outage_keeps_state(
        "an_abrupt_outage_refuses_connections_cuts_watches_and_keeps_every_object",
        Outage::abrupt(Duration::from_secs(2)),
    )
    .await;
}

#[tokio::test]
async fn a_graceful_outage_ends_watches_cleanly_then_refuses_connections() {
    outage_keeps_state(
        "a_graceful_outage_ends_watches_cleanly_then_refuses_connections",
        Outage::graceful(Duration::from_secs(2)),
    )
    .await;
}

#[tokio::test]
async fn admin_api_schedules_an_outage_with_its_duration() {
    let Some((cluster, _, path)) =
        lease_cluster("admin_api_schedules_an_outage_with_its_duration").await
    else {
        return;
    };
    let url = format!(
        "{}/emulator/v1/faults/outage",
        cluster.emulator().base_url()
    );
    let http = reqwest::Client::new();
    let post = |body: Value| http.post(&url).json(&body).send();
    let refused = post(json!({"seconds": 2, "gracefull": true}))
        .await
        .expect("admin reachable");
    assert_eq!(refused.status(), 400, "an unknown field is refused");
    let accepted = post(json!({"seconds": 2, "graceful": true}))
        .await
        .expect("admin reachable");
    assert_eq!(accepted.status(), 202);
    let faults = cluster.emulator().faults();
    eventually(
        "connections are refused",
        Duration::from_secs(5),
        || async { refuses_connections(&cluster).await.then_some(()) },
    )
    .await;
    faults.outage_over().await.expect("the server comes back");
    assert_eq!(cluster.get(&path).await.status, 200);
}
