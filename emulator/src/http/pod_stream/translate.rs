//! kube-apiserver's stream translator (`StreamTranslatorHandler`) for `pods/exec` and
//! `pods/attach` on a node that does not declare `ExtendWebSocketsToKubelet`: the client's
//! WebSocket `v5.channel.k8s.io` session is accepted here, and the command runs over SPDY
//! to the kubelet (`POST`, offering v5 … v1 as client-go's SPDY executor does). stdin, resize
//! and v5's CLOSE go one way, stdout and stderr the other, and the kubelet's error stream
//! becomes the v5 status: `Success`, `NonZeroExitCode` with the exit code, or an
//! `InternalError` with what failed (the upgrade's refusal among them).

use bytes::{Bytes, BytesMut};
use futures::Stream;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedSender;

use super::{
    spdy,
    websocket::{self, Message},
};
use crate::kubelet_client::Upgrade;

/// The remote-command protocols client-go's SPDY executor offers, in its order.
pub const SPDY_PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// The v5 channels.
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE_SIGNAL: u8 = 255;

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

/// Runs one translated session: `client` is the WebSocket's input, `out` its output (frames),
/// `dial` the SPDY upgrade to the kubelet at `url` (for the error texts).
pub async fn run<S, E>(
    mut client: websocket::Reader<S>,
    out: UnboundedSender<Bytes>,
    dial: impl Future<Output = Result<Upgrade, String>>,
    url: String,
    options: Options,
) where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let send = |channel: u8, data: &[u8]| {
        let mut message = Vec::with_capacity(data.len() + 1);
        message.push(channel);
        message.extend_from_slice(data);
        let _ = out.send(websocket::frame(websocket::BINARY, &message));
    };
    // The lowest writable channel's empty message tells the client the session is open.
    send(
        match (options.stdout, options.stderr) {
            (true, _) => STDOUT,
            (false, true) => STDERR,
            (false, false) => ERROR,
        },
        b"",
    );
    let status = match dial.await {
        Err(error) => internal(&format!("error sending request: Post \"{url}\": {error}")),
        Ok(Upgrade::Refused { body, .. }) => internal(&format!(
            "unable to upgrade connection: {}",
            upgrade_error_message(&body)
        )),
        Ok(Upgrade::Switched { headers, io }) => {
            let protocol = headers
                .get("x-stream-protocol-version")
                .and_then(|value| value.to_str().ok())
                .unwrap_or("")
                .to_owned();
            match session(&mut client, &send, &out, io, options).await {
                Some(error) => decode(&protocol, &error),
                // The client went away: nobody to tell.
                None => return,
            }
        }
    };
    send(ERROR, status.to_string().as_bytes());
    let _ = out.send(websocket::frame(websocket::CLOSE, &1000u16.to_be_bytes()));
}

/// The SPDY side: streams opened as client-go's v4 protocol opens them, bytes copied until
/// the output streams and the error stream are done. The error stream's content, or `None`
/// when the client closed first.
async fn session<S, E>(
    client: &mut websocket::Reader<S>,
    send: &impl Fn(u8, &[u8]),
    out: &UnboundedSender<Bytes>,
    io: hyper::upgrade::Upgraded,
    options: Options,
) -> Option<Vec<u8>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    let (mut reader, mut writer) = tokio::io::split(hyper_util::rt::TokioIo::new(io));
    let mut compressor = spdy::Headers::default();
    let mut opening = BytesMut::new();
    let mut next_id = 1u32;
    let mut open = |kind: &str, opening: &mut BytesMut| {
        let id = next_id;
        next_id += 2;
        opening.extend_from_slice(&spdy::syn_stream(
            &mut compressor,
            id,
            &[("streamtype", kind)],
        ));
        id
    };
    let error_id = open("error", &mut opening);
    let stdin_id = options.stdin.then(|| open("stdin", &mut opening));
    let stdout_id = options.stdout.then(|| open("stdout", &mut opening));
    let stderr_id = (options.stderr && !options.tty).then(|| open("stderr", &mut opening));
    let resize_id = options.tty.then(|| open("resize", &mut opening));
    if writer.write_all(&opening).await.is_err() {
        return Some(b"error creating streams".to_vec());
    }
    let mut pending: Vec<u32> = [Some(error_id), stdout_id, stderr_id]
        .into_iter()
        .flatten()
        .collect();
    let mut error = Vec::new();
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    let mut stdin_open = stdin_id.is_some();
    while !pending.is_empty() {
        tokio::select! {
            read = reader.read_buf(&mut buffer) => {
                if !matches!(read, Ok(n) if n > 0) {
                    break;
                }
                while let Some(frame) = spdy::parse(&mut buffer) {
                    let (stream, fin) = match frame {
                        spdy::Frame::Data { stream, fin, data } => {
                            if stream == error_id {
                                error.extend_from_slice(&data);
                            } else if Some(stream) == stdout_id {
                                send(STDOUT, &data);
                            } else if Some(stream) == stderr_id {
                                send(STDERR, &data);
                            }
                            (stream, fin)
                        }
                        spdy::Frame::Reset { stream } => (stream, true),
                        spdy::Frame::Ping(echo) => {
                            let _ = writer.write_all(&echo).await;
                            continue;
                        }
                        spdy::Frame::GoAway => {
                            pending.clear();
                            break;
                        }
                        spdy::Frame::Other { stream, fin } => (stream.unwrap_or(0), fin),
                    };
                    if fin {
                        pending.retain(|id| *id != stream);
                    }
                }
            }
            message = client.next() => match message {
                Message::Binary(message) => {
                    let Some((&channel, data)) = message.split_first() else { continue };
                    let target = match channel {
                        STDIN if stdin_open => stdin_id,
                        RESIZE => resize_id,
                        CLOSE_SIGNAL if data.first() == Some(&STDIN) && stdin_open => {
                            stdin_open = false;
                            if let Some(id) = stdin_id {
                                let _ = writer.write_all(&spdy::data(id, b"", true)).await;
                            }
                            None
                        }
                        _ => None,
                    };
                    if let Some(id) = target {
                        for chunk in data.chunks(spdy::MAX_DATA) {
                            let _ = writer.write_all(&spdy::data(id, chunk, false)).await;
                        }
                    }
                }
                // client-go's heartbeat: a ping unanswered ends the session.
                Message::Ping(data) => {
                    let _ = out.send(websocket::frame(websocket::PONG, &data));
                }
                Message::Close => return None,
            },
        }
    }
    let _ = writer.shutdown().await;
    Some(error)
}

/// The status the translator writes for the kubelet's error stream under `protocol`, as
/// client-go's decoders read it and `StreamTranslatorHandler` re-encodes the error.
fn decode(protocol: &str, error: &[u8]) -> Value {
    if error.is_empty() {
        return json!({"metadata": {}, "status": "Success"});
    }
    if !matches!(protocol, "v4.channel.k8s.io" | "v5.channel.k8s.io") {
        // v1 to v3: the error stream carries text.
        return internal(&format!(
            "error executing remote command: {}",
            String::from_utf8_lossy(error)
        ));
    }
    let Ok(status) = serde_json::from_slice::<Value>(error) else {
        return internal(&format!(
            "error stream protocol error: invalid JSON in {:?}",
            String::from_utf8_lossy(error)
        ));
    };
    match status["status"].as_str() {
        Some("Success") => json!({"metadata": {}, "status": "Success"}),
        Some("Failure") if status["reason"] == "NonZeroExitCode" => {
            let code = status["details"]["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|cause| cause["reason"] == "ExitCode")
                .and_then(|cause| cause["message"].as_str())
                .map(|code| (code, code.parse::<u8>()));
            match code {
                Some((_, Ok(code))) => json!({
                    "metadata": {},
                    "status": "Failure",
                    "message": format!("command terminated with non-zero exit code: command terminated with exit code {code}"),
                    "reason": "NonZeroExitCode",
                    "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
                }),
                Some((text, Err(_))) => internal(&format!(
                    "error stream protocol error: invalid exit code value {text:?}"
                )),
                None => internal("error stream protocol error: no ExitCode cause given"),
            }
        }
        Some("Failure") => internal(status["message"].as_str().unwrap_or("")),
        _ => internal("error stream protocol error: unknown error"),
    }
}

/// `apierrors.NewInternalError(err)` as `json.Marshal` writes it.
fn internal(message: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("Internal error occurred: {message}"),
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    })
}

/// What client-go's SPDY round tripper reports of a refused upgrade: the body's JSON
/// `message` (or `error`), else its text.
pub fn upgrade_error_message(body: &[u8]) -> String {
    if let Ok(status) = serde_json::from_slice::<Value>(body) {
        for key in ["message", "error"] {
            if let Some(text) = status[key]
                .as_str()
                .map(str::trim)
                .filter(|t| !t.is_empty())
            {
                return text.to_owned();
            }
        }
    }
    let text = String::from_utf8_lossy(body).trim().to_owned();
    if text.is_empty() {
        "empty server response".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_error_stream_becomes_the_v5_status() {
        let v4 = "v4.channel.k8s.io";
        assert_eq!(
            decode(v4, b""),
            json!({"metadata": {}, "status": "Success"})
        );
        let exit = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        let status = decode(v4, exit);
        assert_eq!(status["details"]["causes"][0]["message"], "3");
        assert_eq!(
            status["message"],
            "command terminated with non-zero exit code: command terminated with exit code 3"
        );
        let failed = br#"{"status":"Failure","message":"cannot exec in a stopped state"}"#;
        assert_eq!(
            decode(v4, failed)["message"],
            "Internal error occurred: cannot exec in a stopped state"
        );
        assert_eq!(
            decode("v3.channel.k8s.io", b"boom")["message"],
            "Internal error occurred: error executing remote command: boom"
        );
    }

    #[test]
    fn a_refused_upgrade_reads_as_client_go_reads_it() {
        assert_eq!(
            upgrade_error_message(b"container not found (\"c\")\n"),
            "container not found (\"c\")"
        );
        assert_eq!(upgrade_error_message(br#"{"message":"no"}"#), "no");
        assert_eq!(upgrade_error_message(b""), "empty server response");
    }
}
