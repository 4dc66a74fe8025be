//! `/logs/` as the kubelet serves node logs without a query: Go's `http.FileServer` over
//! `/var/log` (under `hostRoot`) — a directory is an HTML listing (its `index.html` if it has
//! one; without the trailing slash a redirect to it), a file its bytes. Unlike Go's file server
//! it never leaves `/var/log`: a `..` segment is a 400 and a symlink that resolves outside is
//! answered as missing. The node log query (`?query=`, journald) is not served.

use std::path::{Path, PathBuf};

use http::{HeaderValue, StatusCode, header};

use super::reply::{self, Reply};

/// Go's `http.Error` texts of its file server.
fn not_found() -> Reply {
    reply::error(StatusCode::NOT_FOUND, "404 page not found")
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
        let index = resolved.join("index.html");
        if index.is_file()
            && index
                .canonicalize()
                .is_ok_and(|index| index.starts_with(&root))
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

fn file(path: &Path) -> Reply {
    match std::fs::read(path) {
        Ok(bytes) => {
            // Go sniffs a type for files without a known extension (`.log`): text for text.
            let kind = if path.extension().is_some_and(|ext| ext == "html") {
                "text/html; charset=utf-8"
            } else if std::str::from_utf8(&bytes).is_ok() {
                "text/plain; charset=utf-8"
            } else {
                "application/octet-stream"
            };
            let mut reply = reply::text(StatusCode::OK, bytes);
            reply
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
            reply
        }
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            reply::error(StatusCode::FORBIDDEN, "403 Forbidden")
        }
        Err(_) => not_found(),
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
}
