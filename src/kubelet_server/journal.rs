//! The answer to a node log query for services, as the kubelet's `journalServer`: each service
//! journald knows (`journalctl --field _SYSTEMD_UNIT` lists `<service>.service`) is read with
//! `journalctl --utc --no-pager … --unit=<service> --output=short-precise`, its stdout and
//! stderr streamed as they come; the others from `/var/log/<service>`, `<service>.log` or
//! `<service>/<service>.log` (never outside the log directory). All of it within 30 s;
//! gzip'd when the request's `Accept-Encoding` is exactly `gzip`.

use std::{
    io::{Read, Write},
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use bytes::Bytes;
use flate2::{Compression, write::GzEncoder};
use http::{HeaderValue, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use tokio::{io::AsyncReadExt, sync::mpsc, time::Instant};

use super::{
    node_log_query::{NodeLogQuery, QueryOptions, go_errno},
    reply::Reply,
};

/// The kubelet's deadline for the whole answer.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// What one read takes from a log file or a pipe.
const BLOCK: usize = 64 * 1024;

/// How the journal is read: the program (`journalctl`, looked up in `PATH`), the log
/// directory of the file fallback, the deadline.
#[derive(Debug, Clone)]
pub struct Journal {
    pub program: PathBuf,
    pub log_dir: PathBuf,
    pub deadline: Duration,
}

/// `getLoggingCmd` (Linux): journalctl's arguments for `services`. `--until` is the
/// `untilTime` asked for (the kubelet 1.36 passes `sinceTime` there, and fails without one).
pub fn journalctl_args(options: &QueryOptions, services: &[String]) -> Vec<String> {
    let mut args = vec!["--utc".to_owned(), "--no-pager".to_owned()];
    if let Some(since) = options.since_time {
        args.push(format!("--since={}", since.journal()));
    }
    if let Some(until) = options.until_time {
        args.push(format!("--until={}", until.journal()));
    }
    if let Some(lines) = options.tail_lines {
        args.push("--pager-end".to_owned());
        args.push(format!("--lines={lines}"));
    }
    args.extend(services.iter().map(|service| format!("--unit={service}")));
    if !options.pattern.is_empty() {
        args.push(format!("--grep={}", options.pattern));
    }
    if let Some(boot) = options.boot {
        args.push("--boot".to_owned());
        args.push(boot.to_string());
    }
    args.push("--output=short-precise".to_owned());
    args
}

impl Journal {
    /// The streamed answer for a validated query that names services.
    pub fn serve(self, query: NodeLogQuery, gzip: bool) -> Reply {
        let (sender, receiver) = mpsc::channel::<Bytes>(4);
        tokio::spawn(async move {
            let mut out = Output::new(sender, gzip);
            let deadline = Instant::now() + self.deadline;
            let _ = tokio::time::timeout_at(deadline, self.copy(&query, &mut out)).await;
            out.finish().await;
        });
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            let chunk = receiver.recv().await?;
            Some((Ok::<_, std::io::Error>(Frame::data(chunk)), receiver))
        });
        let mut reply = http::Response::new(StreamBody::new(stream).boxed());
        let headers = reply.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain;charset=UTF-8"),
        );
        if gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        reply
    }

    /// `copyForBoot`: the journal's services first, then the others' files (or why not).
    async fn copy(&self, query: &NodeLogQuery, out: &mut Output) {
        let known = self.journal_units().await;
        let (native, files): (Vec<String>, Vec<String>) = (query.services.iter().cloned())
            .partition(|service| known.contains(&format!("{service}.service")));
        if !native.is_empty() {
            self.copy_services(&query.options, &native, out).await;
        }
        if files.is_empty() {
            return;
        }
        if query.options != QueryOptions::default() {
            let message = format!(
                "\noptions present and query resolved to log files for [{}]\ntry without specifying options\n",
                files.join(" ")
            );
            out.write(message.as_bytes()).await;
            return;
        }
        for service in &files {
            self.copy_file_logs(service, out).await;
        }
    }

    /// `checkForNativeLogger`'s list: every unit journald has logs of, with what journalctl
    /// said on stderr (Go's `CombinedOutput`; a service is journald's when `<service>.service`
    /// is in it); empty when journalctl fails or is missing, so the files are tried.
    async fn journal_units(&self) -> String {
        let output = tokio::process::Command::new(&self.program)
            .args(["--field", "_SYSTEMD_UNIT"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await;
        match output {
            Ok(output) if output.status.success() => {
                let mut units = String::from_utf8_lossy(&output.stdout).into_owned();
                units.push_str(&String::from_utf8_lossy(&output.stderr));
                units
            }
            _ => String::new(),
        }
    }

    /// `copyServiceLogs`: journalctl's stdout and stderr into the answer as they come; a
    /// journalctl that cannot start says so in the answer.
    async fn copy_services(&self, options: &QueryOptions, services: &[String], out: &mut Output) {
        let child = tokio::process::Command::new(&self.program)
            .args(journalctl_args(options, services))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(error) => {
                tracing::debug!(%error, program = %self.program.display(), "journalctl did not start");
                if options.boot.unwrap_or(0) == 0 {
                    out.write(b"\nerror: journal output not available\n").await;
                }
                return;
            }
        };
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
        else {
            return;
        };
        let (mut stdout_open, mut stderr_open) = (true, true);
        let (mut a, mut b) = (vec![0; BLOCK], vec![0; BLOCK]);
        while stdout_open || stderr_open {
            tokio::select! {
                // What journalctl wrote first comes first (both pipes may be ready at once).
                biased;
                read = stdout.read(&mut a), if stdout_open => match read {
                    Ok(n) if n > 0 => if !out.write(&a[..n]).await { return },
                    _ => stdout_open = false,
                },
                read = stderr.read(&mut b), if stderr_open => match read {
                    Ok(n) if n > 0 => if !out.write(&b[..n]).await { return },
                    _ => stderr_open = false,
                },
            }
        }
        let _ = child.wait().await;
    }

    /// `heuristicsCopyFileLogs`: the first of `<service>`, `<service>.log` and
    /// `<service>/<service>.log` that is a file; a directory counts as missing.
    async fn copy_file_logs(&self, service: &str, out: &mut Output) {
        let names = [
            service.to_owned(),
            format!("{service}.log"),
            format!("{service}/{service}.log"),
        ];
        for name in &names {
            match open_log(&self.log_dir, name) {
                Ok(file) => {
                    if let Err(error) = copy_file(file, out).await {
                        let message = format!("\nerror getting log for {service}: {error}\n");
                        out.write(message.as_bytes()).await;
                    }
                    return;
                }
                Err(errno) if errno == rustix::io::Errno::NOENT => {}
                Err(errno) => {
                    let message = format!(
                        "\nerror getting log for {service}: openat {name}: {}\n",
                        go_errno(errno)
                    );
                    out.write(message.as_bytes()).await;
                    return;
                }
            }
        }
        out.write(format!("\nlog not found for {service}\n").as_bytes())
            .await;
    }
}

/// A regular file `name` under `dir`, opened without leaving it (Go's `os.OpenInRoot`); a
/// directory (or anything but a file) reads as missing.
fn open_log(dir: &Path, name: &str) -> Result<std::fs::File, rustix::io::Errno> {
    let root = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = rustix::fs::openat2(
        &root,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )?;
    let kind = rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&file)?.st_mode);
    if kind != rustix::fs::FileType::RegularFile {
        return Err(rustix::io::Errno::NOENT);
    }
    Ok(std::fs::File::from(file))
}

async fn copy_file(file: std::fs::File, out: &mut Output) -> std::io::Result<()> {
    let mut file = Some(file);
    loop {
        let Some(mut current) = file.take() else {
            return Ok(());
        };
        let (current, block) = tokio::task::spawn_blocking(move || {
            let mut block = vec![0; BLOCK];
            let read = current.read(&mut block)?;
            block.truncate(read);
            Ok::<_, std::io::Error>((current, block))
        })
        .await
        .map_err(std::io::Error::other)??;
        if block.is_empty() || !out.write(&block).await {
            return Ok(());
        }
        file = Some(current);
    }
}

/// Where the answer goes: the body's channel, through gzip when asked.
struct Output {
    sender: mpsc::Sender<Bytes>,
    gzip: Option<GzEncoder<Vec<u8>>>,
}

impl Output {
    fn new(sender: mpsc::Sender<Bytes>, gzip: bool) -> Self {
        Self {
            sender,
            gzip: gzip.then(|| GzEncoder::new(Vec::new(), Compression::fast())),
        }
    }

    /// Sends `bytes`; false once the client is gone.
    async fn write(&mut self, bytes: &[u8]) -> bool {
        let chunk = match &mut self.gzip {
            None => bytes.to_vec(),
            Some(encoder) => {
                let _ = encoder.write_all(bytes);
                let _ = encoder.flush();
                std::mem::take(encoder.get_mut())
            }
        };
        chunk.is_empty() || self.sender.send(Bytes::from(chunk)).await.is_ok()
    }

    async fn finish(mut self) {
        if let Some(encoder) = self.gzip.take()
            && let Ok(rest) = encoder.finish()
            && !rest.is_empty()
        {
            let _ = self.sender.send(Bytes::from(rest)).await;
        }
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
