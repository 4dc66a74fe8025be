//! The debug endpoint over real HTTP: every route, every documented error code, and fault
//! injection that really kills and restarts an actor.

use std::{num::NonZeroU32, time::Duration};

use nodepulse::debug::{self, FaultInjectionGate};
use nodepulse_supervisor::{
    ChildSpec, IntensityPolicy, RestartPolicy, Supervisor, SupervisorConfig, SupervisorHandle,
    mailbox,
};
use nodepulse_testkit::{actors::RecorderStore, eventually_async};
use reqwest::{Client, StatusCode};
use serde_json::Value;

const TOKEN: &str = "test-token-0123456789";

struct Fixture {
    base: String,
    client: Client,
    supervisor: SupervisorHandle,
}

fn test_supervisor(max_restarts: u32) -> SupervisorHandle {
    let mut config = SupervisorConfig::new("debug-node");
    config.backoff.initial = Duration::from_millis(20);
    config.backoff.jitter = 0.0;
    config.liveness_interval = Duration::from_millis(20);
    config.liveness_timeout = Duration::from_secs(2);
    config.intensity = IntensityPolicy {
        max_restarts: NonZeroU32::new(max_restarts).unwrap_or(NonZeroU32::MIN),
        window: Duration::from_secs(60),
    };
    let (_recorder, recorder_inbox) = mailbox(32);
    let (_finished, finished_inbox) = mailbox(32);
    Supervisor::builder(config)
        .child(ChildSpec::new(
            "recorder",
            recorder_inbox,
            RecorderStore::default().factory(),
        ))
        .child(
            ChildSpec::new(
                "finished",
                finished_inbox,
                RecorderStore::default().factory(),
            )
            .restart(RestartPolicy::Temporary),
        )
        .start()
}

async fn serve(fault_injection: bool, max_restarts: u32) -> Fixture {
    let supervisor = test_supervisor(max_restarts);
    let gate = FaultInjectionGate::new(fault_injection, Some(TOKEN.to_owned()));
    let endpoint = debug::start(
        "127.0.0.1:0".parse().expect("address"),
        vec![supervisor.clone()],
        gate,
        debug::Extras::default(),
    )
    .expect("binds");
    let base = format!("http://{}", endpoint.address);
    actix_rt::spawn(endpoint.server);
    let fixture = Fixture {
        base,
        client: Client::new(),
        supervisor,
    };
    fixture.wait_for_actor("recorder", "running", 0).await;
    fixture
}

impl Fixture {
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn kill(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self.client.post(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn wait_for_actor(&self, name: &str, state: &str, restarts: u64) {
        let url = format!("{}/debug/actors/{name}", self.base);
        eventually_async(
            &format!("{name} is {state} after {restarts} restarts"),
            || {
                let request = self.client.get(&url).send();
                async move {
                    let Ok(response) = request.await else {
                        return false;
                    };
                    let body: Value = response.json().await.unwrap_or(Value::Null);
                    body["state"] == state && body["restarts"] == restarts
                }
            },
        )
        .await;
    }
}

fn error_reason(body: &Value) -> &str {
    body["error"]["reason"]
        .as_str()
        .unwrap_or("<no JSON error body>")
}

/// Asserts a documented error: the status code and the JSON body's reason.
fn expect_error((status, body): (StatusCode, Value), expected: StatusCode, reason: &str) {
    assert_eq!(
        (status, error_reason(&body)),
        (expected, reason),
        "body: {body}"
    );
}

#[actix_rt::test]
async fn actors_route_lists_every_actor_with_stable_fields() {
    let fixture = serve(false, 10).await;
    let (status, body) = fixture.get("/debug/actors").await;
    assert_eq!(status, StatusCode::OK);
    let actors = body["actors"].as_array().expect("an actors array");
    assert_eq!(actors.len(), 2);
    let recorder = &actors[0];
    for field in [
        "name",
        "node",
        "state",
        "restarts",
        "lastFailure",
        "backoffUntil",
        "mailbox",
        "handled",
        "handledByType",
        "lastMessage",
    ] {
        assert!(
            recorder.get(field).is_some(),
            "field {field} missing from {recorder}"
        );
    }
    for field in ["depth", "capacity", "highWater"] {
        assert!(
            recorder["mailbox"].get(field).is_some(),
            "mailbox.{field} missing"
        );
    }
    assert_eq!(
        (recorder["name"].as_str(), recorder["node"].as_str()),
        (Some("recorder"), Some("debug-node"))
    );
    assert_eq!(recorder["mailbox"]["capacity"], 32);

    let (status, body) = fixture.get("/debug/actors?node=debug-node").await;
    assert_eq!(
        (status, body["actors"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(2))
    );
    expect_error(
        fixture.get("/debug/actors?node=elsewhere").await,
        StatusCode::NOT_FOUND,
        "NotFound",
    );
}

#[actix_rt::test]
async fn one_actor_route_adds_the_actors_own_state() {
    let fixture = serve(false, 10).await;
    let (status, body) = fixture.get("/debug/actors/recorder").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["actorState"]["available"], true);
    assert_eq!(
        body["actorState"]["value"],
        serde_json::json!({ "instance": 1, "recorded": 0 })
    );
    expect_error(
        fixture.get("/debug/actors/nobody").await,
        StatusCode::NOT_FOUND,
        "NotFound",
    );
}

#[actix_rt::test]
async fn kill_is_forbidden_while_fault_injection_is_disabled() {
    let fixture = serve(false, 10).await;
    expect_error(
        fixture
            .kill("/debug/actors/recorder/kill?mode=stop", Some(TOKEN))
            .await,
        StatusCode::FORBIDDEN,
        "Forbidden",
    );
    assert_eq!(
        fixture
            .supervisor
            .actor("recorder")
            .map(|actor| actor.restarts),
        Some(0)
    );
}

#[actix_rt::test]
async fn kill_checks_token_actor_and_mode_then_really_kills() {
    let fixture = serve(true, 10).await;
    let cases = [
        (
            "/debug/actors/recorder/kill?mode=stop",
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (
            "/debug/actors/recorder/kill?mode=stop",
            Some("wrong-token-0123456789"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "/debug/actors/nobody/kill?mode=stop",
            Some(TOKEN),
            StatusCode::NOT_FOUND,
        ),
        (
            "/debug/actors/recorder/kill?mode=explode",
            Some(TOKEN),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/debug/actors/recorder/kill",
            Some(TOKEN),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/debug/actors/recorder/kill?mode=stop&extra=1",
            Some(TOKEN),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (path, token, expected) in cases {
        let (status, body) = fixture.kill(path, token).await;
        assert_eq!(status, expected, "{path} with {token:?}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|message| !message.is_empty()),
            "JSON error for {path}"
        );
    }
    assert_eq!(
        fixture
            .supervisor
            .actor("recorder")
            .map(|actor| actor.restarts),
        Some(0),
        "refused kills did nothing"
    );

    for (restarts, mode) in [(1, "stop"), (2, "panic"), (3, "hang")] {
        let (status, body) = fixture
            .kill(
                &format!("/debug/actors/recorder/kill?mode={mode}"),
                Some(TOKEN),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(
            (body["actor"].as_str(), body["mode"].as_str()),
            (Some("recorder"), Some(mode))
        );
        fixture
            .wait_for_actor("recorder", "running", restarts)
            .await;
    }
}

#[actix_rt::test]
async fn killing_an_actor_that_is_not_running_is_a_conflict() {
    let fixture = serve(true, 10).await;
    let (status, _) = fixture
        .kill("/debug/actors/finished/kill?mode=stop", Some(TOKEN))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    fixture.wait_for_actor("finished", "stopped", 0).await;
    expect_error(
        fixture
            .kill("/debug/actors/finished/kill?mode=stop", Some(TOKEN))
            .await,
        StatusCode::CONFLICT,
        "Conflict",
    );
    let (status, body) = fixture.get("/debug/actors/finished").await;
    assert_eq!(
        (status, &body["actorState"]["available"]),
        (StatusCode::OK, &Value::Bool(false))
    );
}

#[actix_rt::test]
async fn a_flood_of_kill_requests_is_rate_limited() {
    let fixture = serve(true, 10).await;
    let mut statuses = Vec::new();
    for _ in 0..60 {
        statuses.push(
            fixture
                .kill("/debug/actors/nobody/kill?mode=stop", Some(TOKEN))
                .await
                .0,
        );
    }
    assert!(
        statuses.contains(&StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    assert!(
        statuses
            .iter()
            .all(|status| [StatusCode::NOT_FOUND, StatusCode::TOO_MANY_REQUESTS].contains(status))
    );
}

#[actix_rt::test]
async fn healthz_turns_unavailable_with_reasons_when_an_actor_escalates() {
    let fixture = serve(true, 1).await;
    let response = fixture
        .client
        .get(format!("{}/healthz", fixture.base))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.ok().as_deref(), Some("ok"));

    fixture
        .kill("/debug/actors/recorder/kill?mode=panic", Some(TOKEN))
        .await;
    fixture.wait_for_actor("recorder", "running", 1).await;
    fixture
        .kill("/debug/actors/recorder/kill?mode=panic", Some(TOKEN))
        .await;
    fixture.wait_for_actor("recorder", "escalated", 1).await;
    let (status, body) = fixture.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let problems = body["problems"].as_array().expect("problems listed");
    assert!(
        problems.iter().any(|problem| problem
            .as_str()
            .is_some_and(|text| text.contains("\"recorder\" escalated"))),
        "{body}"
    );
}

#[actix_rt::test]
async fn metrics_are_openmetrics_text_with_node_and_actor_labels() {
    let fixture = serve(true, 10).await;
    fixture
        .kill("/debug/actors/recorder/kill?mode=stop", Some(TOKEN))
        .await;
    fixture.wait_for_actor("recorder", "running", 1).await;
    let response = fixture
        .client
        .get(format!("{}/metrics", fixture.base))
        .send()
        .await
        .expect("request");
    assert!(
        response.headers()["content-type"]
            .to_str()
            .is_ok_and(|kind| kind.starts_with("application/openmetrics-text; version=1.0.0"))
    );
    let text = response.text().await.expect("body");
    for expected in [
        "# TYPE nodepulse_actor_restarts counter",
        "nodepulse_actor_restarts_total{node=\"debug-node\",actor=\"recorder\"} 1",
        "nodepulse_actor_state{node=\"debug-node\",actor=\"recorder\",state=\"running\"} 1",
        "nodepulse_actor_state{node=\"debug-node\",actor=\"recorder\",state=\"backoff\"} 0",
        "nodepulse_actor_mailbox_capacity{node=\"debug-node\",actor=\"recorder\"} 32",
        "# TYPE nodepulse_actor_mailbox_depth gauge",
    ] {
        assert!(
            text.contains(expected),
            "metrics lack {expected:?}:\n{text}"
        );
    }
}

#[actix_rt::test]
async fn the_page_unknown_routes_and_wrong_methods() {
    let fixture = serve(false, 10).await;
    let page = fixture
        .client
        .get(format!("{}/debug/", fixture.base))
        .send()
        .await
        .expect("request");
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .is_ok_and(|kind| kind.starts_with("text/html"))
    );
    assert!(page.text().await.is_ok_and(|html| html.contains("nodepulse actors") && html.contains("fetch('actors')")));

    expect_error(
        fixture.get("/debug/nothing/here").await,
        StatusCode::NOT_FOUND,
        "NotFound",
    );
    let response = fixture
        .client
        .delete(format!("{}/debug/actors/recorder", fixture.base))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let response = fixture
        .client
        .get(format!("{}/debug/actors/recorder/kill", fixture.base))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let huge = "x".repeat(4 * 1024 * 1024);
    let response = fixture
        .client
        .post(format!(
            "{}/debug/actors/recorder/kill?mode=stop",
            fixture.base
        ))
        .bearer_auth(TOKEN)
        .body(huge)
        .send()
        .await;
    // Fault injection is off here: a huge body changes nothing, whatever the transport does with it.
    if let Ok(response) = response {
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
    assert_eq!(
        fixture
            .supervisor
            .actor("recorder")
            .map(|actor| actor.restarts),
        Some(0)
    );
}

/// Hostile requests against a whole running daemon: malformed paths and request lines, wrong
/// methods, huge bodies and headers, bad tokens and floods all get a 4xx (or, for bytes that
/// are not HTTP, a closed connection), and none of it restarts an actor or touches the node.
#[actix_rt::test]
async fn hostile_requests_to_a_running_daemon_get_4xx_and_change_nothing() {
    use nodepulse_testkit::{
        attack::{clean_up, ready_daemon},
        cluster::{TestCluster, unique_node_name},
        daemon::DEBUG_TOKEN,
        observer::NodeObserver,
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let cluster = TestCluster::start().await;
    let name = unique_node_name("hostile");
    let mut daemon = ready_daemon(&cluster, &name, 10).await;
    let observer = NodeObserver::start(&cluster.client, &name).await;
    let since = std::time::Instant::now();
    let client = Client::new();
    let url = |path: &str| format!("{}{path}", daemon.debug);
    let mut answers: Vec<(String, StatusCode)> = Vec::new();

    let huge_path = format!("/debug/actors/{}", "a".repeat(8 * 1024));
    for path in [
        "/debug/actors/%ff%fe",
        "/debug/actors/..%2f..%2fetc%2fpasswd",
        "/debug/actors/lease/kill/again",
        "//debug///actors",
        "/debug/actors/lease%00/kill?mode=stop",
        "/debug/actors/lease/kill?mode=stop&mode=panic",
        "/debug/actors/lease/kill?mode=%ZZ",
        "/debug/actors/lease/kill?node=elsewhere&mode=stop",
        huge_path.as_str(),
    ] {
        for method in [reqwest::Method::GET, reqwest::Method::POST] {
            let response = client
                .request(method.clone(), url(path))
                .bearer_auth(DEBUG_TOKEN)
                .send()
                .await
                .expect("an answer");
            answers.push((format!("{method} {path:.60}"), response.status()));
        }
    }
    for method in ["PUT", "DELETE", "PATCH", "OPTIONS", "BREW"] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let response = client
            .request(method.clone(), url("/debug/actors/lease/kill?mode=stop"))
            .bearer_auth(DEBUG_TOKEN)
            .send()
            .await
            .expect("an answer");
        answers.push((format!("{method} on the kill route"), response.status()));
    }
    let huge_body = "x".repeat(8 * 1024 * 1024);
    let response = client
        .post(url("/debug/actors/lease/kill?mode=explode"))
        .bearer_auth(DEBUG_TOKEN)
        .body(huge_body)
        .send()
        .await;
    if let Ok(response) = response {
        answers.push(("an 8 MiB body".to_owned(), response.status()));
    }
    let long_token = "t".repeat(128 * 1024);
    for (what, header) in [
        ("no scheme", DEBUG_TOKEN.to_owned()),
        ("basic auth", format!("Basic {DEBUG_TOKEN}")),
        ("lower-case bearer", format!("bearer {DEBUG_TOKEN}")),
        ("an empty bearer", "Bearer ".to_owned()),
        ("a 128 KiB token", format!("Bearer {long_token}")),
    ] {
        let response = client
            .post(url("/debug/actors/lease/kill?mode=stop"))
            .header("Authorization", header)
            .send()
            .await;
        if let Ok(response) = response {
            answers.push((what.to_owned(), response.status()));
        }
    }
    // Floods: bad tokens, and the right token against an actor that does not exist.
    for (what, token, actor) in [
        ("a flood of bad tokens", "not-the-token-0123456789", "lease"),
        ("a flood of kills of nobody", DEBUG_TOKEN, "nobody"),
    ] {
        let requests = (0..200).map(|_| {
            client
                .post(url(&format!("/debug/actors/{actor}/kill?mode=stop")))
                .bearer_auth(token)
                .send()
        });
        let mut limited = 0;
        for response in futures::future::join_all(requests).await {
            let status = response.expect("an answer").status();
            limited += usize::from(status == StatusCode::TOO_MANY_REQUESTS);
            answers.push((what.to_owned(), status));
        }
        eprintln!("{what}: {limited} of 200 rate limited");
        // Guessing tokens is limited like killing: the limit comes before the token check.
        assert!(limited > 0, "{what} was not rate limited");
    }
    // Bytes that are not HTTP at all.
    let address = daemon.debug.trim_start_matches("http://").to_owned();
    let huge_request_line = format!(
        "GET /debug/actors/{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(256 * 1024)
    );
    for garbage in [
        huge_request_line.as_bytes(),
        &b"HELLO\r\n\r\n"[..],
        b"GET /debug/actors/\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /debug/actors/lease/kill?mode=stop HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"\xff\xfe\xfd\r\n\r\n",
    ] {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connects");
        stream.write_all(garbage).await.expect("written");
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 4"),
            "{:?} was answered {text:?}",
            String::from_utf8_lossy(&garbage[..garbage.len().min(60)])
        );
    }

    let not_4xx: Vec<_> = answers
        .iter()
        .filter(|(_, status)| !status.is_client_error())
        .collect();
    assert!(not_4xx.is_empty(), "answers that are not 4xx: {not_4xx:#?}");
    let (status, _) = daemon.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "the daemon is healthy");
    assert_eq!(
        daemon.wait_exit(Duration::ZERO).await,
        None,
        "the daemon still runs"
    );
    for actor in daemon.snapshots().await {
        assert_eq!(actor.restarts, 0, "nothing was restarted: {actor:?}");
    }
    let wrong = observer.wrong_since(since);
    assert!(wrong.is_empty(), "the node looked wrong: {wrong:#?}");
    eprintln!(
        "HOSTILE: {} requests answered 4xx; statuses {:?}",
        answers.len(),
        answers
            .iter()
            .map(|(_, status)| status.as_u16())
            .collect::<std::collections::BTreeSet<_>>()
    );
    clean_up(&cluster, daemon, &name).await;
}

/// DNS rebinding: a page whose name an attacker points at 127.0.0.1 reaches the endpoint with
/// that name in `Host`. Only loopback names and the bound address are served.
#[actix_rt::test]
async fn a_request_naming_another_host_is_refused() {
    let fixture = serve(false, 10).await;
    let port = fixture.base.rsplit(':').next().expect("a port").to_owned();
    let with_host = |host: String, path: &'static str| {
        let request = fixture
            .client
            .get(format!("{}{path}", fixture.base))
            .header(reqwest::header::HOST, host)
            .send();
        async move {
            let response = request.await.expect("request");
            let status = response.status();
            (status, response.json().await.unwrap_or(Value::Null))
        }
    };
    for path in ["/debug/actors", "/metrics", "/healthz"] {
        expect_error(
            with_host(format!("rebind.attacker.example:{port}"), path).await,
            StatusCode::FORBIDDEN,
            "Forbidden",
        );
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_owned(),
    ] {
        assert_eq!(
            with_host(host.clone(), "/debug/actors").await.0,
            StatusCode::OK,
            "{host}"
        );
    }
}

/// Idle local connections (each sends nothing) do not keep `/healthz` (the liveness probe)
/// out: short of the cap, the probe is answered at once, nothing closed for it and nothing
/// waited for (a server that waited for a slot would answer only once an idle connection's
/// 5 s header timeout closed it); past the cap, the oldest idle connections are closed for new
/// ones, and the probe is still answered.
#[actix_rt::test]
async fn idle_connections_do_not_keep_healthz_out() {
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
    };
    let fixture = serve(false, 10).await;
    let address = fixture.base.trim_start_matches("http://").to_owned();
    let probe = || async {
        let mut probe = TcpStream::connect(&address).await.expect("connects");
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        let mut answer = String::new();
        probe.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    };
    let still_open = |stream: &TcpStream| {
        let mut byte = [0; 1];
        matches!(stream.try_read(&mut byte), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
    };
    let mut idle = Vec::new();
    for _ in 1..debug::MAX_CONNECTIONS {
        idle.push(TcpStream::connect(&address).await.expect("connects"));
    }
    probe().await;
    let open = idle.iter().filter(|stream| still_open(stream)).count();
    assert_eq!(
        open,
        idle.len(),
        "/healthz was answered only after idle connections were closed"
    );

    for _ in 0..debug::MAX_CONNECTIONS {
        idle.push(TcpStream::connect(&address).await.expect("connects"));
    }
    probe().await;
    let open: Vec<bool> = idle.iter().map(still_open).collect();
    assert!(
        open.last() == Some(&true),
        "the newest idle connection is open"
    );
    assert!(
        open.first() == Some(&false),
        "the oldest idle connection was closed for newer ones"
    );
    assert!(
        open.iter().filter(|open| **open).count() < debug::MAX_CONNECTIONS,
        "at most the cap is open"
    );
}
