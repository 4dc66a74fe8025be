//! A container's termination message, read back once it exited (the kubelet's
//! `getTerminationMessage` and `readLastStringFromContainerLogs`): the last 4096 bytes of the
//! file mounted at its `terminationMessagePath`; under `FallbackToLogsOnError`, a failed
//! container whose file is empty gets the tail of its CRI log (80 lines, at most 2048 bytes).

use std::{
    fs::File,
    io::{self, Read, Seek, SeekFrom},
    path::Path,
};

use super::view::{TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION};
use crate::ports::ContainerStatus;

/// `MaxContainerTerminationMessageLength`: what is read of the file.
pub const MAX_MESSAGE_BYTES: u64 = 4096;
/// `MaxContainerTerminationMessageLogLines` and `...LogLength`: the log fallback's tail.
pub const MAX_LOG_LINES: usize = 80;
pub const MAX_LOG_BYTES: usize = 2048;
/// `MaxPodTerminationMessageLogLength`: all of a pod's messages together, shared evenly by its
/// containers when the status is written.
pub const MAX_POD_MESSAGE_BYTES: usize = 12 * 1024;
/// How much of a log's end is read to find its last lines: more than 80 lines' worth of the
/// last 2048 bytes of text, whatever the lines' lengths.
const LOG_WINDOW: u64 = 256 * 1024;

/// The last `max` bytes of `path`, and whether the read started past the file's beginning.
fn read_tail(path: &Path, max: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok((bytes, start > 0))
}

/// The text of CRI log lines (`<time> <stream> <P|F> <text>`): a full line (`F`) ends with a
/// newline, a partial one (`P`) runs on into the next; malformed lines are skipped.
pub fn log_text<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut text = Vec::new();
    for line in lines {
        let mut fields = line.splitn(4, |b| *b == b' ');
        let (Some(_time), Some(_stream), Some(tag), content) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        text.extend_from_slice(content.unwrap_or_default());
        if !tag.starts_with(b"P") {
            text.push(b'\n');
        }
    }
    text
}

/// The kubelet's log fallback: the text of the log's last 80 lines, at most its last 2048
/// bytes.
pub fn log_tail(path: &Path) -> String {
    let (bytes, cut) = match read_tail(path, LOG_WINDOW) {
        Ok(read) => read,
        Err(error) => return format!("Error on reading termination message from logs: {error}"),
    };
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // A window that starts mid-file starts mid-line; a file ends with a newline.
    if cut && !lines.is_empty() {
        lines.remove(0);
    }
    if lines.last().is_some_and(|line| line.is_empty()) {
        lines.pop();
    }
    let first = lines.len().saturating_sub(MAX_LOG_LINES);
    let text = log_text(lines[first..].iter().copied());
    let tail = &text[text.len().saturating_sub(MAX_LOG_BYTES)..];
    String::from_utf8_lossy(tail).into_owned()
}

/// The termination message of the exited container `status`; a relative log path is under
/// `log_dir` (the pod's log directory).
pub fn termination_message(status: &ContainerStatus, log_dir: &Path) -> String {
    let annotation = |key: &str| status.annotations.get(key).map(String::as_str);
    let fallback = annotation(TERMINATION_MESSAGE_POLICY_ANNOTATION)
        == Some("FallbackToLogsOnError")
        && status.exit_code != 0;
    let file = annotation(TERMINATION_MESSAGE_PATH_ANNOTATION)
        .filter(|path| !path.is_empty())
        .and_then(|path| {
            status
                .mounts
                .iter()
                .find(|mount| mount.container_path == Path::new(path))
        });
    let (message, check_logs) = match file
        .map(|mount| read_tail(&mount.host_path, MAX_MESSAGE_BYTES))
    {
        None => (String::new(), fallback),
        Some(Err(error)) if error.kind() == io::ErrorKind::NotFound => (String::new(), fallback),
        Some(Err(error)) => (
            format!(
                "Error on reading termination log {}: {error}",
                file.map(|m| m.host_path.display().to_string())
                    .unwrap_or_default()
            ),
            false,
        ),
        Some(Ok((bytes, _))) => (
            String::from_utf8_lossy(&bytes).into_owned(),
            fallback && bytes.is_empty(),
        ),
    };
    if !check_logs {
        return message;
    }
    log_tail(&log_dir.join(&status.log_path))
}

/// The runtime's own message with the termination message after it, as the kubelet joins them.
pub fn joined(runtime_message: &str, message: &str) -> String {
    match (runtime_message.is_empty(), message.is_empty()) {
        (_, true) => runtime_message.to_owned(),
        (true, false) => message.to_owned(),
        (false, false) => format!("{runtime_message}: {message}"),
    }
}

/// `message` cut to at most `max` bytes, at a character boundary.
pub fn truncated(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}
