//! journalctl's arguments, and whole answers from a stand-in `journalctl` (a shell script that
//! records how it was called) and real files: the journal's services first, then the
//! others' files, the 30 s deadline (shortened here), gzip.

use std::io::Read as _;

use http_body_util::BodyExt;

use super::*;
use crate::kubelet_server::node_log_query::parse;

/// Says `kubelet` and `containerd` log to journald (and `stderr`, on its stderr); prints a line on stdout and one on stderr
/// for every query, then sleeps when asked for `slow`; records its arguments.
const FAKE: &str = r#"#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
if [ "$1" = --field ]; then printf 'kubelet.service\ncontainerd.service\nslow.service\n'; echo stderr.service >&2; exit 0; fi
echo "journal: $*"
echo "warning on stderr" >&2
case "$*" in *--unit=slow*) exec sleep 600 ;; esac
"#;

struct Host {
    dir: tempfile::TempDir,
    journal: Journal,
}

impl Host {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let program = dir.path().join("journalctl");
        let logs = dir.path().join("log");
        std::fs::create_dir(&logs).expect("mkdir");
        // Written by a child, so no descriptor of this process keeps it open for writing
        // when another test's child executes it (ETXTBSY).
        let written = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "printf '%s' \"$FAKE\" > \"$1\" && chmod 755 \"$1\"",
                "sh",
            ])
            .arg(&program)
            .env("FAKE", FAKE)
            .status()
            .expect("sh");
        assert!(written.success());
        Self {
            journal: Journal {
                program,
                log_dir: logs,
                deadline: DEADLINE,
            },
            dir,
        }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    async fn answer(&self, query: &str, gzip: bool) -> String {
        let query = parse(query).expect("decodes").expect("a query");
        let reply = self.journal.clone().serve(query, gzip);
        let encoded = reply.headers().get(header::CONTENT_ENCODING).is_some();
        assert_eq!(encoded, gzip);
        let body = reply
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        if !gzip {
            return String::from_utf8_lossy(&body).into_owned();
        }
        let mut text = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut text)
            .expect("gzip");
        text
    }
}

#[test]
fn journalctl_is_asked_as_the_kubelet_asks_it() {
    let query = parse(
        "query=kubelet&query=containerd&sinceTime=2026-01-02T03:04:05Z&untilTime=2026-01-02T13:14:15Z&tailLines=3&pattern=fail.*&boot=-1",
    )
    .expect("decodes")
    .expect("a query");
    assert_eq!(
        journalctl_args(&query.options, &query.services),
        [
            "--utc",
            "--no-pager",
            "--since=2026-1-2 3:4:5",
            "--until=2026-1-2 13:14:15",
            "--pager-end",
            "--lines=3",
            "--unit=kubelet",
            "--unit=containerd",
            "--grep=fail.*",
            "--boot",
            "-1",
            "--output=short-precise",
        ]
    );
    assert_eq!(
        journalctl_args(&QueryOptions::default(), &["kubelet".to_owned()]),
        [
            "--utc",
            "--no-pager",
            "--unit=kubelet",
            "--output=short-precise"
        ]
    );
}

#[tokio::test]
async fn journal_services_come_first_then_the_other_services_files() {
    let host = Host::new();
    let logs = &host.journal.log_dir;
    std::fs::write(logs.join("myapp.log"), "from the file\n").expect("write");
    std::fs::create_dir_all(logs.join("nested")).expect("mkdir");
    std::fs::write(logs.join("nested/nested.log"), "nested file\n").expect("write");
    let answer = host
        .answer("query=kubelet&query=myapp&query=nested&query=gone", false)
        .await;
    assert_eq!(
        answer,
        "journal: --utc --no-pager --unit=kubelet --output=short-precise\nwarning on stderr\n\
         from the file\nnested file\n\nlog not found for gone\n"
    );
    assert_eq!(
        host.calls(),
        [
            "--field _SYSTEMD_UNIT",
            "--utc --no-pager --unit=kubelet --output=short-precise"
        ]
    );
    assert_eq!(
        host.answer("query=stderr", false).await,
        "journal: --utc --no-pager --unit=stderr --output=short-precise\nwarning on stderr\n",
        "the unit list is journalctl's stdout and stderr, as Go's CombinedOutput"
    );
    let with_options = host.answer("query=myapp&tailLines=2", false).await;
    assert_eq!(
        with_options,
        "\noptions present and query resolved to log files for [myapp]\ntry without specifying options\n"
    );
    assert_eq!(
        host.answer("query=kubelet&tailLines=2", true).await,
        "journal: --utc --no-pager --pager-end --lines=2 --unit=kubelet --output=short-precise\nwarning on stderr\n",
        "gzip'd"
    );
}

#[tokio::test]
async fn without_journalctl_every_service_is_looked_for_in_files() {
    let mut host = Host::new();
    host.journal.program = host.dir.path().join("no-such-journalctl");
    std::fs::write(host.journal.log_dir.join("kubelet"), "kubelet file\n").expect("write");
    let outside = tempfile::tempdir().expect("dir");
    std::fs::write(outside.path().join("secret.log"), "secret\n").expect("write");
    std::os::unix::fs::symlink(
        outside.path().join("secret.log"),
        host.journal.log_dir.join("leak.log"),
    )
    .expect("symlink");
    assert_eq!(
        host.answer("query=kubelet&query=leak", false).await,
        "kubelet file\n\nerror getting log for leak: openat leak.log: path escapes from parent\n"
    );
}

#[tokio::test]
async fn the_answer_ends_at_the_deadline_with_what_journalctl_wrote_by_then() {
    let mut host = Host::new();
    host.journal.deadline = Duration::from_millis(500);
    let answer = host.answer("query=slow", false).await;
    assert_eq!(
        answer,
        "journal: --utc --no-pager --unit=slow --output=short-precise\nwarning on stderr\n"
    );
}
