//! Reading a container's log file into the response as the kubelet's reader does: from the
//! start or `tailLines` lines before the end, rendered line by line (`format.rs`); with
//! `follow`, waiting at the end for more while the container runs, moving to the new file
//! when the log was rotated (renamed, and reopened by the runtime) once the old one is read
//! to its end, so no line is lost or repeated, and ending once the container stopped and its
//! last lines are out. The file is polled every [`POLL`] (the kubelet watches
//! it with inotify and re-checks every second). A client that goes away ends the task.

use std::{
    io::{Read, Seek, SeekFrom},
    os::unix::fs::MetadataExt,
    path::PathBuf,
    time::Duration,
};

use bytes::Bytes;
use hyper::body::Frame;
use tokio::sync::mpsc;

use super::{
    format::{Rendered, Renderer},
    options::LogOptions,
};

pub const POLL: Duration = Duration::from_millis(200);

/// What the body receives: a frame of the log, or why it ended early.
pub type SinkItem = Result<Frame<Bytes>, std::io::Error>;

pub type Sink = mpsc::Sender<SinkItem>;

/// Whether the container still runs (its log may still grow).
pub type StillRunning = Box<dyn Fn() -> bool + Send + Sync>;

/// The offset of the start of the `lines`-th `\n`-terminated line before the end (a final line
/// without its newline counts as one), 0 when the file has fewer.
pub fn tail_offset(file: &mut std::fs::File, lines: u64) -> std::io::Result<u64> {
    let length = file.metadata()?.len();
    if lines == 0 {
        return Ok(length);
    }
    let mut block = vec![0; 64 * 1024];
    let mut position = length;
    let mut seen = 0;
    while position > 0 {
        let size = usize::try_from(position.min(block.len() as u64)).unwrap_or(block.len());
        position -= size as u64;
        file.seek(SeekFrom::Start(position))?;
        file.read_exact(&mut block[..size])?;
        for (index, byte) in block[..size].iter().enumerate().rev() {
            let offset = position + index as u64;
            // The newline that ends the file ends the last line; it does not start one.
            if *byte == b'\n' && offset + 1 != length {
                seen += 1;
                if seen == lines {
                    return Ok(offset + 1);
                }
            }
        }
    }
    Ok(0)
}

/// Streams `path` into `sink` until done or the client is gone.
pub async fn stream(
    path: PathBuf,
    options: LogOptions,
    still_running: StillRunning,
    sink: Sink,
) -> std::io::Result<()> {
    let mut renderer = Renderer::new(&options);
    let mut file = LogFile::open(path.clone(), options.tail_lines).await?;
    loop {
        if let Some(line) = file.next_line() {
            if !send(&sink, renderer.render(&line)).await {
                return Ok(());
            }
            continue;
        }
        if file.read_more().await? {
            continue;
        }
        // At the end of the file.
        if !options.follow {
            return finish(&sink, &mut renderer, &mut file).await;
        }
        if let Ok(current) = std::fs::metadata(&path)
            && current.ino() != file.inode
            && (current.len() > 0 || !still_running())
        {
            // Rotated, and the runtime writes to the new file now (it has lines, or the
            // container stopped): it wrote the old one up to its reopen, so the old one is
            // read to its end before the new one is read from its start. Switching while the
            // new file is still empty could miss a line the old one got after this read.
            if !drain(&sink, &mut renderer, &mut file).await? {
                return Ok(());
            }
            file = LogFile::open(path.clone(), None).await?;
            continue;
        }
        if !still_running() {
            // One last read: what the container wrote before it stopped.
            if !drain(&sink, &mut renderer, &mut file).await? {
                return Ok(());
            }
            return finish(&sink, &mut renderer, &mut file).await;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = sink.closed() => return Ok(()),
        }
    }
}

/// Sends every whole line up to the file's end; `false` when the output is done or the
/// client gone.
async fn drain(sink: &Sink, renderer: &mut Renderer, file: &mut LogFile) -> std::io::Result<bool> {
    loop {
        while let Some(line) = file.next_line() {
            if !send(sink, renderer.render(&line)).await {
                return Ok(false);
            }
        }
        if !file.read_more().await? {
            return Ok(true);
        }
    }
}

/// The last line, when the file ends without its newline (the kubelet still writes it).
async fn finish(sink: &Sink, renderer: &mut Renderer, file: &mut LogFile) -> std::io::Result<()> {
    let rest = file.rest();
    if !rest.is_empty() {
        send(sink, renderer.render(&rest)).await;
    }
    Ok(())
}

/// An open log file read in blocks on the blocking pool, and the bytes read but not yet
/// handed out as lines.
struct LogFile {
    file: Option<std::fs::File>,
    inode: u64,
    buffer: Vec<u8>,
    start: usize,
}

const BLOCK: usize = 64 * 1024;

impl LogFile {
    async fn open(path: PathBuf, tail: Option<u64>) -> std::io::Result<Self> {
        let (file, inode) = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::open(&path)?;
            let inode = file.metadata()?.ino();
            let offset = match tail {
                Some(lines) => tail_offset(&mut file, lines)?,
                None => 0,
            };
            file.seek(SeekFrom::Start(offset))?;
            Ok::<_, std::io::Error>((file, inode))
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(Self {
            file: Some(file),
            inode,
            buffer: Vec::new(),
            start: 0,
        })
    }

    /// The next whole line (with its `\n`) among the bytes read.
    fn next_line(&mut self) -> Option<Vec<u8>> {
        let end = self.buffer[self.start..]
            .iter()
            .position(|byte| *byte == b'\n')?;
        let line = self.buffer[self.start..=self.start + end].to_vec();
        self.start += end + 1;
        Some(line)
    }

    /// The bytes read after the last whole line.
    fn rest(&mut self) -> Vec<u8> {
        let rest = self.buffer[self.start..].to_vec();
        self.start = self.buffer.len();
        rest
    }

    /// Reads one more block; `false` at the end of the file.
    async fn read_more(&mut self) -> std::io::Result<bool> {
        self.buffer.drain(..self.start);
        self.start = 0;
        let Some(mut file) = self.file.take() else {
            return Ok(false);
        };
        let (file, block) = tokio::task::spawn_blocking(move || {
            let mut block = vec![0; BLOCK];
            let read = file.read(&mut block)?;
            block.truncate(read);
            Ok::<_, std::io::Error>((file, block))
        })
        .await
        .map_err(std::io::Error::other)??;
        self.file = Some(file);
        self.buffer.extend_from_slice(&block);
        Ok(!block.is_empty())
    }
}

/// Sends what a line rendered to; `false` when the output is done (limit) or the client gone.
async fn send(sink: &Sink, rendered: Rendered) -> bool {
    let (bytes, more) = match rendered {
        Rendered::Skip => return true,
        Rendered::Write(bytes) => (bytes, true),
        Rendered::Last(bytes) => (bytes, false),
    };
    if !bytes.is_empty()
        && sink
            .send(Ok(Frame::data(Bytes::from(bytes))))
            .await
            .is_err()
    {
        return false;
    }
    more
}

#[cfg(test)]
mod tests {
    use std::{
        io::Write,
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
    };

    use super::*;

    async fn next_text(
        frames: &mut mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
    ) -> String {
        let frame = tokio::time::timeout(Duration::from_secs(10), frames.recv())
            .await
            .expect("a frame in time")
            .expect("the stream is open")
            .expect("no error");
        String::from_utf8_lossy(frame.data_ref().expect("data")).into_owned()
    }

    #[tokio::test]
    async fn following_reads_what_is_appended_across_a_rotation_until_the_container_stops() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("0.log");
        let append = |path: &std::path::Path, text: &str| {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open");
            file.write_all(text.as_bytes()).expect("write");
        };
        append(&path, "2026-12-01T10:00:00Z stdout F one\n");
        let running = Arc::new(AtomicBool::new(true));
        let still = Arc::clone(&running);
        let (sink, mut frames) = mpsc::channel(16);
        let options = LogOptions {
            follow: true,
            ..LogOptions::default()
        };
        let task = tokio::spawn(stream(
            path.clone(),
            options,
            Box::new(move || still.load(Ordering::SeqCst)),
            sink,
        ));
        assert_eq!(next_text(&mut frames).await, "one\n");
        // A partial line, then its end written in two pieces: nothing of the unfinished line
        // goes out before its newline.
        append(
            &path,
            "2026-12-01T10:00:01Z stdout P tw\n2026-12-01T10:00:01Z stdout F ",
        );
        assert_eq!(next_text(&mut frames).await, "tw");
        append(&path, "o\n");
        assert_eq!(next_text(&mut frames).await, "o\n");
        append(&path, "2026-12-01T10:00:02Z stdout F three\n");
        assert_eq!(next_text(&mut frames).await, "three\n");
        std::fs::rename(&path, dir.path().join("0.log.20261201-100003")).expect("rotate");
        append(&path, "2026-12-01T10:00:03Z stderr F four\n");
        assert_eq!(next_text(&mut frames).await, "four\n");
        append(&path, "2026-12-01T10:00:04Z stdout F five\n");
        running.store(false, Ordering::SeqCst);
        assert_eq!(next_text(&mut frames).await, "five\n");
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("ends once the container stopped")
            .expect("joined")
            .expect("no error");
        assert!(frames.recv().await.is_none(), "nothing after the end");
    }

    /// The runtime goes on writing the renamed file until its reopen made the new one: a line
    /// written there after the new (still empty) file appeared is still read, once, before
    /// the new file's lines.
    #[tokio::test]
    async fn a_line_written_to_the_renamed_log_before_the_reopen_is_neither_lost_nor_repeated() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("0.log");
        let rotated = dir.path().join("0.log.20261201-100001");
        let append = |path: &std::path::Path, text: &str| {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .expect("open");
            file.write_all(text.as_bytes()).expect("write");
        };
        append(&path, "2026-12-01T10:00:00Z stdout F one\n");
        // Counts the follower's polls: it asks after each look at the path.
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let running = Arc::new(AtomicBool::new(true));
        let (counted, still) = (Arc::clone(&polls), Arc::clone(&running));
        let (sink, mut frames) = mpsc::channel(16);
        let options = LogOptions {
            follow: true,
            ..LogOptions::default()
        };
        let task = tokio::spawn(stream(
            path.clone(),
            options,
            Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                still.load(Ordering::SeqCst)
            }),
            sink,
        ));
        assert_eq!(next_text(&mut frames).await, "one\n");
        std::fs::rename(&path, &rotated).expect("rotate");
        std::fs::File::create(&path).expect("the runtime creates the new log");
        // Two more polls: the follower has looked at the new, empty file at least once.
        let seen = polls.load(Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(10), async {
            while polls.load(Ordering::SeqCst) < seen + 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the follower polls");
        append(&rotated, "2026-12-01T10:00:01Z stdout F two\n");
        append(&path, "2026-12-01T10:00:02Z stdout F three\n");
        assert_eq!(next_text(&mut frames).await, "two\n");
        assert_eq!(next_text(&mut frames).await, "three\n");
        running.store(false, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("ends once the container stopped")
            .expect("joined")
            .expect("no error");
        assert!(frames.recv().await.is_none(), "nothing after the end");
    }

    #[tokio::test]
    async fn a_follower_whose_client_went_away_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("0.log");
        std::fs::write(&path, "2026-12-01T10:00:00Z stdout F one\n").expect("write");
        let (sink, frames) = mpsc::channel(16);
        let options = LogOptions {
            follow: true,
            ..LogOptions::default()
        };
        let task = tokio::spawn(stream(path, options, Box::new(|| true), sink));
        drop(frames);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("ends without its client")
            .expect("joined")
            .expect("no error");
    }

    #[test]
    fn the_tail_starts_that_many_lines_before_the_end() {
        let mut file = tempfile::tempfile().expect("file");
        file.write_all(b"a\nbb\nccc\n").expect("write");
        let starts: Vec<u64> = (0..5)
            .map(|lines| tail_offset(&mut file, lines).expect("tail"))
            .collect();
        assert_eq!(starts, [9, 5, 2, 0, 0]);
        file.write_all(b"unfinished").expect("write");
        assert_eq!(tail_offset(&mut file, 1).expect("tail"), 9);
    }
}
