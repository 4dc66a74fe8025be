//! A container's termination message, read back once it exited (the kubelet's
//! `getTerminationMessage` and `readLastStringFromContainerLogs`): the last 4096 bytes of the
//! file mounted at its `terminationMessagePath`; under `FallbackToLogsOnError`, a failed
//! container whose file is empty gets the tail of its CRI log (80 lines, at most 2048 bytes).
//! And the file itself, made before the container starts.

use std::{
    fs::{File, OpenOptions, Permissions},
    io::{self, Read, Seek, SeekFrom},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use super::view::{TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION};
use nodepulse_actors::ports::ContainerStatus;

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

/// Creates `<dir>/<name>`, a new empty file any user may write (0666, as the kubelet's, for a
/// container running as any user). `O_EXCL` refuses an existing file or a link at that name,
/// so nothing else is ever truncated or opened up to everyone.
pub fn create_file(dir: &Path, name: &str) -> io::Result<PathBuf> {
    let path = dir.join(name);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    file.set_permissions(Permissions::from_mode(0o666))?;
    Ok(path)
}

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
        && status.exit_code != 0
        // A container that never ran has no log to fall back on (the kubelet's rule).
        && status.reason != "ContainerCannotRun";
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

#[cfg(test)]
mod tests {
    use super::*;
    use nodepulse_actors::ports::{ContainerState, Labels, Mount};

    fn exited(exit_code: i32, policy: &str, file: &Path, log: &Path) -> ContainerStatus {
        let annotations: Labels = [
            (TERMINATION_MESSAGE_PATH_ANNOTATION, "/dev/termination-log"),
            (TERMINATION_MESSAGE_POLICY_ANNOTATION, policy),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        ContainerStatus {
            id: "c".to_owned(),
            name: "app".to_owned(),
            attempt: 0,
            state: ContainerState::Exited,
            created_at: 1,
            started_at: 1,
            finished_at: 2,
            exit_code,
            image: String::new(),
            image_ref: String::new(),
            reason: String::new(),
            message: String::new(),
            labels: Labels::new(),
            annotations,
            log_path: log.to_owned(),
            mounts: vec![Mount {
                container_path: "/dev/termination-log".into(),
                host_path: file.to_owned(),
                ..Mount::default()
            }],
            resources: None,
        }
    }

    #[test]
    fn partial_log_lines_run_on_into_the_next_and_malformed_ones_are_skipped() {
        let lines: [&[u8]; 4] = [
            b"2026-12-01T09:00:00Z stdout P hel",
            b"2026-12-01T09:00:01Z stdout F lo",
            b"garbage",
            b"2026-12-01T09:00:02Z stderr F  two spaces",
        ];
        assert_eq!(log_text(lines), b"hello\n two spaces\n");
    }

    #[test]
    fn the_file_is_made_new_0666_and_never_through_a_link_or_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let made = create_file(dir.path(), "0a1b2c3d").unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&made), 0o666);
        std::fs::write(&made, "written").unwrap();
        create_file(dir.path(), "0a1b2c3d").expect_err("an existing file is refused");
        assert_eq!(std::fs::read_to_string(&made).unwrap(), "written");
        let precious = dir.path().join("precious");
        std::fs::write(&precious, "the host's file").unwrap();
        std::fs::set_permissions(&precious, Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&precious, dir.path().join("planted")).unwrap();
        create_file(dir.path(), "planted").expect_err("a link is refused");
        assert_eq!(
            std::fs::read_to_string(&precious).unwrap(),
            "the host's file"
        );
        assert_eq!(mode(&precious), 0o600);
    }

    #[test]
    fn only_the_last_4096_bytes_of_the_file_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("message");
        let text = format!("{}{}", "a".repeat(100), "b".repeat(4096));
        std::fs::write(&file, text).unwrap();
        let status = exited(1, "File", &file, &dir.path().join("none.log"));
        assert_eq!(termination_message(&status, dir.path()), "b".repeat(4096));
    }

    #[test]
    fn the_log_fallback_needs_an_empty_file_and_a_failure_and_keeps_2048_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("message");
        std::fs::write(&file, "").unwrap();
        let log = dir.path().join("0.log");
        let long = "x".repeat(100);
        let lines: String = (0..30)
            .map(|n| format!("2026-12-01T09:00:00Z stdout F {n:02}{long}\n"))
            .collect();
        std::fs::write(&log, lines).unwrap();
        let fallback = "FallbackToLogsOnError";
        let tail = termination_message(&exited(1, fallback, &file, &log), dir.path());
        assert_eq!(tail.len(), MAX_LOG_BYTES);
        assert!(tail.ends_with(&format!("29{long}\n")), "{tail}");
        assert_eq!(
            termination_message(&exited(0, fallback, &file, &log), dir.path()),
            "",
            "a container that succeeded keeps its empty message"
        );
        std::fs::write(&file, "written").unwrap();
        assert_eq!(
            termination_message(&exited(1, fallback, &file, &log), dir.path()),
            "written"
        );
        assert_eq!(
            termination_message(&exited(1, "File", &file, &log), dir.path()),
            "written"
        );
    }

    #[test]
    fn messages_join_after_the_runtimes_and_are_cut_at_a_character_boundary() {
        assert_eq!(joined("OOM", "gone"), "OOM: gone");
        assert_eq!(joined("", "gone"), "gone");
        assert_eq!(joined("OOM", ""), "OOM");
        assert_eq!(truncated("héllo", 2), "h");
        assert_eq!(truncated("héllo", 3), "hé");
        assert_eq!(truncated("hello", 10), "hello");
    }
}
