//! `/logs/` as the kubelet serves node logs without a query: Go's `http.FileServer` over
//! `/var/log` (under `hostRoot`) — a directory is an HTML listing (its `index.html` if it has
//! one; without the trailing slash a redirect to it), a file its bytes, streamed block by block
//! as Go's `io.CopyN` sends them, so a request holds one block whatever the file's size. Unlike
//! Go's file server it never leaves `/var/log` (a `..` segment is a 400, a symlink that
//! resolves outside is answered as missing) and serves only directories and regular files: a
//! FIFO (whose open would wait for a writer), a socket or a device is answered as missing.
//! With `enableSystemLogQuery`, a request with a node log query (`node_log_query`) is answered
//! from the journal (`journal`) or, for one file, by this file server.

use std::{
    fs::File,
    io::Read,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use super::{
    journal::{DEADLINE, Journal},
    node_log_query,
    reply::{self, Reply},
};

/// What a file is read and sent in: the memory one request holds.
const BLOCK: usize = 64 * 1024;
/// What Go's `DetectContentType` looks at.
const SNIFF: usize = 512;

/// Go's `http.Error` texts of its file server.
fn not_found() -> Reply {
    reply::error(StatusCode::NOT_FOUND, "404 page not found")
}

/// `/logs/<rest>`: with `enableSystemLogQuery` and a query, the node log query as the
/// kubelet's `logServer` answers it (400 for what does not decode, 406 for a path beside the
/// query or what does not validate; services from the journal, one file as the file server
/// serves it); otherwise the log directory's files.
pub async fn serve(root: PathBuf, rest: String, query: &str, enabled: bool, gzip: bool) -> Reply {
    let mut rest = rest;
    if enabled {
        match node_log_query::parse(query) {
            Err(errors) => {
                return reply::error(StatusCode::BAD_REQUEST, &node_log_query::aggregate(&errors));
            }
            Ok(Some(query)) => {
                if !(rest.is_empty() || rest == "/") {
                    return reply::error(
                        StatusCode::NOT_ACCEPTABLE,
                        "path not allowed in query mode",
                    );
                }
                let (dir, checked) = (root.clone(), query.clone());
                let errors = tokio::task::spawn_blocking(move || checked.validate(&dir)).await;
                match errors {
                    Ok(errors) if errors.is_empty() => {}
                    Ok(errors) => {
                        let message = node_log_query::aggregate(&errors);
                        return reply::error(StatusCode::NOT_ACCEPTABLE, &message);
                    }
                    Err(error) => {
                        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string());
                    }
                }
                if !query.services.is_empty() {
                    let journal = Journal {
                        program: PathBuf::from("journalctl"),
                        log_dir: root,
                        deadline: DEADLINE,
                    };
                    return journal.serve(query, gzip);
                }
                if let [file] = query.files.as_slice() {
                    rest = file_path(file);
                }
            }
            Ok(None) => {}
        }
    }
    tokio::task::spawn_blocking(move || serve_blocking(&root, &rest))
        .await
        .unwrap_or_else(|error| reply::error(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()))
}

/// The file server's path for a queried file, as Go gives it: the name as it is (`ToSlash`
/// keeps a `\\` on Linux), cleaned as `path.Clean` cleans a rooted path (the name was found
/// under the log directory already), and its `%` escaped, as [`serve_blocking`] decodes.
fn file_path(file: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in file.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    let mut path = segments.join("/");
    if file.ends_with('/') && !path.is_empty() {
        path.push('/');
    }
    path.replace('%', "%25")
}

/// The answer for `rest`, the request path after `/logs/`, under `root` (the node's log
/// directory); blocking (it reads the file system).
pub fn serve_blocking(root: &Path, rest: &str) -> Reply {
    let Some(relative) = decoded(rest) else {
        return reply::error(StatusCode::BAD_REQUEST, "invalid URL path");
    };
    let Ok(root) = root.canonicalize() else {
        return not_found();
    };
    let wanted = root.join(&relative);
    // Resolves every symlink on the way: what is served must still be under the root.
    let Ok(resolved) = wanted.canonicalize() else {
        return not_found();
    };
    if !resolved.starts_with(&root) {
        tracing::debug!(path = %wanted.display(), "a node log path that leaves the log directory");
        return not_found();
    }
    if resolved.is_dir() {
        if !(rest.is_empty() || rest.ends_with('/')) {
            let base = rest.rsplit('/').next().unwrap_or_default();
            return redirect(&format!("{base}/"));
        }
        if let Ok(index) = resolved.join("index.html").canonicalize()
            && index.starts_with(&root)
            && index.is_file()
        {
            return file(&index);
        }
        return listing(&resolved);
    }
    file(&resolved)
}

/// The segments of `rest`, percent-decoded; `None` when one is `..` or not UTF-8.
fn decoded(rest: &str) -> Option<PathBuf> {
    let mut path = PathBuf::new();
    for segment in rest.split('/') {
        let segment = percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .ok()?;
        if segment == ".." || segment.contains('/') || segment.contains('\0') {
            return None;
        }
        if !segment.is_empty() && segment != "." {
            path.push(segment.as_ref());
        }
    }
    Some(path)
}

fn redirect(location: &str) -> Reply {
    let mut reply = reply::text(StatusCode::MOVED_PERMANENTLY, "");
    if let Ok(value) = HeaderValue::from_str(location) {
        reply.headers_mut().insert(header::LOCATION, value);
    }
    reply
}

/// Go's `dirList`: the entries sorted by name, a directory's with a trailing slash.
fn listing(dir: &Path) -> Reply {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return reply::error(StatusCode::INTERNAL_SERVER_ERROR, "Error reading directory");
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|entry| {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                name.push('/');
            }
            name
        })
        .collect();
    names.sort();
    let mut body = String::from(
        "<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n",
    );
    for name in names {
        let href = percent_encoding::utf8_percent_encode(&name, HREF).to_string();
        body.push_str(&format!("<a href=\"{href}\">{}</a>\n", html_escape(&name)));
    }
    body.push_str("</pre>\n");
    let mut reply = reply::text(StatusCode::OK, body);
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    reply
}

/// What a URL path escapes (Go's `url.URL{Path: name}.String()`, roughly).
const HREF: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

fn html_escape(name: &str) -> String {
    name.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// The regular file at `path` (no symlink: it was resolved), streamed; anything else is
/// answered as missing. Opened without blocking, so a FIFO put there after the path was
/// resolved is seen for what it is instead of waiting for a writer.
fn file(path: &Path) -> Reply {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            return reply::error(StatusCode::FORBIDDEN, "403 Forbidden");
        }
        Err(_) => return not_found(),
    };
    let length = match file.metadata() {
        Ok(metadata) if metadata.is_file() => metadata.len(),
        Ok(_) => {
            tracing::debug!(path = %path.display(), "a node log path that is not a regular file");
            return not_found();
        }
        Err(_) => return not_found(),
    };
    let mut first = vec![0; usize::try_from(length).unwrap_or(SNIFF).min(SNIFF)];
    if let Err(error) = file.read_exact(&mut first) {
        tracing::debug!(path = %path.display(), %error, "cannot read a node log");
        return reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "500 Internal Server Error",
        );
    }
    let kind = content_type(path, &first);
    let left = length - first.len() as u64;
    let rest = futures::stream::unfold(Some((file, left)), next_block);
    let first = futures::stream::iter([Ok(Frame::data(Bytes::from(first)))]);
    let mut reply =
        http::Response::new(StreamBody::new(futures::StreamExt::chain(first, rest)).boxed());
    let headers = reply.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    reply
}

/// Go sniffs a type for files without a known extension (`.log`): text for text.
fn content_type(path: &Path, first: &[u8]) -> &'static str {
    if path.extension().is_some_and(|ext| ext == "html") {
        return "text/html; charset=utf-8";
    }
    match std::str::from_utf8(first) {
        // A character cut by the end of the sniffed bytes is still text.
        Ok(_) => "text/plain; charset=utf-8",
        Err(error) if error.error_len().is_none() => "text/plain; charset=utf-8",
        Err(_) => "application/octet-stream",
    }
}

type Block = Result<Frame<Bytes>, std::io::Error>;

/// The next block of `file`, of which `left` bytes are still to send (the size it had when the
/// answer began, as Go's `io.CopyN` sends it); a file that shrank ends the answer with an error,
/// so the client sees it cut short.
async fn next_block(state: Option<(File, u64)>) -> Option<(Block, Option<(File, u64)>)> {
    let (mut file, left) = state.filter(|(_, left)| *left > 0)?;
    let size = usize::try_from(left).unwrap_or(BLOCK).min(BLOCK);
    let read = tokio::task::spawn_blocking(move || {
        let mut block = vec![0; size];
        let read = file.read(&mut block)?;
        block.truncate(read);
        Ok::<_, std::io::Error>((file, block))
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|read| read);
    match read {
        Ok((file, block)) if !block.is_empty() => {
            let left = left - block.len() as u64;
            Some((Ok(Frame::data(Bytes::from(block))), Some((file, left))))
        }
        Ok(_) => Some((
            Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while it was sent",
            )),
            None,
        )),
        Err(error) => Some((Err(error), None)),
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn answer(root: &Path, rest: &str) -> (u16, String) {
        let reply = serve_blocking(root, rest);
        let status = reply.status().as_u16();
        let body = reply.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn files_and_listings_are_served_and_nothing_outside_the_log_directory() {
        let outside = tempfile::tempdir().expect("dir");
        std::fs::write(outside.path().join("secret"), "key\n").expect("write");
        let logs = tempfile::tempdir().expect("dir");
        std::fs::create_dir(logs.path().join("pods")).expect("mkdir");
        std::fs::write(logs.path().join("syslog"), "booted\n").expect("write");
        std::os::unix::fs::symlink(outside.path().join("secret"), logs.path().join("escape"))
            .expect("symlink");
        std::os::unix::fs::symlink(logs.path().join("syslog"), logs.path().join("inside"))
            .expect("symlink");
        let root = logs.path();
        assert_eq!(answer(root, "syslog").await, (200, "booted\n".into()));
        assert_eq!(answer(root, "inside").await, (200, "booted\n".into()));
        let (status, listing) = answer(root, "").await;
        assert_eq!(status, 200);
        assert!(
            listing.contains("<a href=\"pods/\">pods/</a>\n<a href=\"syslog\">syslog</a>\n"),
            "{listing}"
        );
        assert_eq!(answer(root, "pods").await.0, 301);
        assert_eq!(
            answer(root, "escape").await,
            (404, "404 page not found\n".into())
        );
        assert_eq!(
            answer(root, "../secret").await,
            (400, "invalid URL path\n".into())
        );
        assert_eq!(answer(root, "pods/%2e%2e/syslog").await.0, 400);
        assert_eq!(answer(root, "missing").await.0, 404);
    }

    #[tokio::test]
    async fn a_file_is_streamed_whole_and_only_regular_files_are_served() {
        let logs = tempfile::tempdir().expect("dir");
        let root = logs.path();
        // Blocks and a last partial one, with a character cut at the sniffed bytes' end.
        let mut text = "x".repeat(SNIFF - 1) + "é";
        text += &"line\n".repeat(3 * BLOCK / 5 + 7);
        std::fs::write(root.join("big.log"), &text).expect("write");
        let reply = serve_blocking(root, "big.log");
        assert_eq!(
            reply.headers().get(header::CONTENT_LENGTH),
            Some(&HeaderValue::from(text.len()))
        );
        assert_eq!(
            answer(root, "big.log").await,
            (200, text.clone()),
            "every byte, in order"
        );
        std::fs::write(root.join("binary"), [0xff, 0, 1]).expect("write");
        assert_eq!(
            serve_blocking(root, "binary")
                .headers()
                .get(header::CONTENT_TYPE),
            Some(&HeaderValue::from_static("application/octet-stream"))
        );
        std::fs::write(root.join("empty"), "").expect("write");
        assert_eq!(answer(root, "empty").await, (200, String::new()));

        let fifo = root.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
        // Answered at once: no writer is waited for.
        assert_eq!(
            answer(root, "fifo").await,
            (404, "404 page not found\n".into())
        );
        let _socket = std::os::unix::net::UnixListener::bind(root.join("socket")).expect("bind");
        assert_eq!(answer(root, "socket").await.0, 404);
    }
}
