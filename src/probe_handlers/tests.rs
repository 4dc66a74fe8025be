//! The handlers against real servers on 127.0.0.1 (a few lines of HTTP/1 over a tokio
//! listener, a TCP listener, tonic's codec under hyper's HTTP/2 server): the kubelet's
//! headers, statuses, redirects, body cap, timeouts and failure texts. No traffic off loopback.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use nodepulse_actors::ports::{ContainerRuntimeError, ExecOutput, ProbeError, ProbeOutcome};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

use super::{exec, http, tcp};

/// Requests seen by [`serve_http`], raw.
type Seen = Arc<Mutex<Vec<String>>>;

/// Answers each request with `answer(path)`, a full raw HTTP/1 response; records requests.
async fn serve_http(answer: fn(&str, u16) -> String) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Seen::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let request = read_head(&mut stream).await;
            let path = request.split(' ').nth(1).unwrap_or("/").to_owned();
            record.lock().unwrap().push(request);
            let _ = stream.write_all(answer(&path, port).as_bytes()).await;
        }
    });
    (port, seen)
}

/// A loopback port nothing listens on (bound, then released).
pub(super) async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// The request line and headers of one HTTP/1 request.
pub(super) async fn read_head(stream: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut request = Vec::new();
    let mut buffer = [0; 1024];
    while !request.ends_with(b"\r\n\r\n") {
        let Ok(n @ 1..) = stream.read(&mut buffer).await else {
            break;
        };
        request.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&request).into_owned()
}

fn response(status: &str, extra: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> ProbeOutcome {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| ((*n).into(), (*v).into()))
        .collect();
    let spec = http::HttpProbe {
        scheme: "http",
        host: "127.0.0.1",
        port,
        path,
        headers: &headers,
    };
    http::probe(&spec, Duration::from_secs(5)).await
}

#[tokio::test]
async fn http_probe_sends_the_kubelets_headers_and_succeeds_on_2xx_and_3xx() {
    let (port, seen) = serve_http(|path, _| match path {
        "/healthz" => response("200 OK", "", "fine"),
        _ => response("304 Not Modified", "", ""),
    })
    .await;
    let outcome = get(
        port,
        "healthz",
        &[("X-Probe", "yes"), ("Host", "web.local")],
    )
    .await;
    assert_eq!(outcome, ProbeOutcome::Success("fine".into()));
    let request = seen.lock().unwrap()[0].to_lowercase();
    assert!(
        request.starts_with("get /healthz http/1.1\r\n"),
        "{request}"
    );
    for line in [
        "user-agent: kube-probe/1.36",
        "accept: */*",
        "x-probe: yes",
        "host: web.local",
        "connection: close",
    ] {
        assert!(request.contains(line), "{line} missing in {request}");
    }
    assert!(
        matches!(get(port, "/other", &[]).await, ProbeOutcome::Warning(_)),
        "3xx without Location"
    );
    get(port, "/healthz", &[("Accept", "")]).await;
    let request = seen.lock().unwrap()[2].to_lowercase();
    assert!(
        !request.contains("accept:"),
        "an empty Accept is dropped: {request}"
    );
    assert!(
        request.contains(&format!("host: 127.0.0.1:{port}")),
        "{request}"
    );
}

#[tokio::test]
async fn http_probe_fails_with_the_status_code_outside_200_to_399() {
    let (port, _) = serve_http(|_, _| response("500 Internal Server Error", "", "boom")).await;
    let failure = ProbeOutcome::Failure("HTTP probe failed with statuscode: 500".into());
    assert_eq!(get(port, "/", &[]).await, failure);
}

#[tokio::test]
async fn http_redirects_are_followed_on_the_same_host_only_and_at_most_ten_times() {
    let (port, seen) = serve_http(|path, port| match path {
        "/old" => response("302 Found", "Location: /new\r\n", ""),
        "/absolute" => response(
            "301 Moved",
            &format!("Location: http://127.0.0.1:{port}/new\r\n"),
            "",
        ),
        "/new" => response("200 OK", "", "arrived"),
        "/away" => response(
            "302 Found",
            "Location: http://elsewhere.invalid/x\r\n",
            "moved",
        ),
        _ => response("302 Found", "Location: /loop\r\n", ""),
    })
    .await;
    assert_eq!(
        get(port, "/old", &[]).await,
        ProbeOutcome::Success("arrived".into())
    );
    assert_eq!(
        get(port, "/absolute", &[]).await,
        ProbeOutcome::Success("arrived".into())
    );
    let warning = "Probe terminated redirects, Response body: moved".to_owned();
    assert_eq!(
        get(port, "/away", &[]).await,
        ProbeOutcome::Warning(warning)
    );
    let before = seen.lock().unwrap().len();
    let ProbeOutcome::Failure(text) = get(port, "/loop", &[]).await else {
        panic!("loop")
    };
    assert!(text.ends_with("stopped after 10 redirects"), "{text}");
    assert_eq!(
        seen.lock().unwrap().len() - before,
        11,
        "the first request and 10 redirects"
    );
}

#[tokio::test]
async fn http_body_is_read_up_to_10_kib() {
    let (port, _) =
        serve_http(|_, _| response("200 OK", "", &"x".repeat(3 * http::MAX_BODY_BYTES))).await;
    let ProbeOutcome::Success(body) = get(port, "/", &[]).await else {
        panic!("success")
    };
    assert_eq!(body.len(), http::MAX_BODY_BYTES);
}

#[tokio::test]
async fn http_probe_fails_on_a_refused_connection_and_on_a_silent_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = listener.local_addr().unwrap().port();
    let closed = closed_port().await;
    let ProbeOutcome::Failure(text) = get(closed, "/", &[]).await else {
        panic!("refused")
    };
    assert!(
        text.starts_with(&format!("Get \"http://127.0.0.1:{closed}/\": ")),
        "{text}"
    );
    let spec = http::HttpProbe {
        scheme: "http",
        host: "127.0.0.1",
        port: silent,
        path: "/",
        headers: &[],
    };
    let ProbeOutcome::Failure(text) = http::probe(&spec, Duration::from_millis(200)).await else {
        panic!("timeout")
    };
    assert!(
        text.ends_with(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        ),
        "{text}"
    );
    drop(listener);
}

#[tokio::test]
async fn tcp_probe_succeeds_on_connect_and_reports_the_dial_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let open = listener.local_addr().unwrap().port();
    assert!(matches!(
        tcp::probe("127.0.0.1", open, Duration::from_secs(5)).await,
        ProbeOutcome::Success(_)
    ));
    let (_accepted, _) = listener.accept().await.expect("the probe connected");
    let closed = closed_port().await;
    let failure = format!("dial tcp 127.0.0.1:{closed}: connect: connection refused");
    assert_eq!(
        tcp::probe("127.0.0.1", closed, Duration::from_secs(5)).await,
        ProbeOutcome::Failure(failure)
    );
}

#[test]
fn exec_outcome_follows_the_exit_code_and_names_a_timeout() {
    let command = vec!["sh".to_owned(), "-c".to_owned(), "sleep 5".to_owned()];
    let second = Duration::from_secs(1);
    let output = |code| ExecOutput {
        stdout: b"out ".to_vec(),
        stderr: b"err".to_vec(),
        exit_code: code,
    };
    assert_eq!(
        exec::outcome(Ok(output(0)), &command, second),
        ProbeOutcome::Success("out err".into())
    );
    assert_eq!(
        exec::outcome(Ok(output(1)), &command, second),
        ProbeOutcome::Failure("out err".into())
    );
    let timed_out = ContainerRuntimeError::ExecTimedOut {
        command: command.clone(),
        timeout: second,
    };
    let text = "command timed out: \"sh -c sleep 5\" timed out after 1s".to_owned();
    assert_eq!(
        exec::outcome(Err(timed_out), &command, second),
        ProbeOutcome::Failure(text)
    );
    let gone = ContainerRuntimeError::NotFound {
        method: "ExecSync",
        message: "no such container".into(),
    };
    let ProbeOutcome::Unknown(ProbeError::Exec(text)) = exec::outcome(Err(gone), &command, second)
    else {
        panic!()
    };
    assert!(text.contains("no such container"));
    let big = ExecOutput {
        stdout: vec![b'a'; 3 * http::MAX_BODY_BYTES],
        stderr: vec![],
        exit_code: 0,
    };
    let ProbeOutcome::Success(text) = exec::outcome(Ok(big), &command, second) else {
        panic!()
    };
    assert_eq!(text.len(), http::MAX_BODY_BYTES);
}
