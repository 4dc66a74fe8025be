use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Wake, Waker},
};

use bytes::Bytes;
use futures::StreamExt;
use hyper::body::Frame;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::*;

/// Counts its wakes.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_end_after_an_item_is_held_back_one_poll_and_the_task_woken_at_once() {
    let wakes = Arc::new(Wakes::default());
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    let mut stream = EndApart::new(futures::stream::iter(["one", "two"]));
    assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(Some("one")));
    assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(Some("two")));
    assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Pending);
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "woken, so nothing waits");
    assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(None));
    assert_eq!(stream.poll_next_unpin(&mut cx), Poll::Ready(None));

    let mut empty = EndApart::new(futures::stream::iter(Vec::<&str>::new()));
    assert_eq!(empty.poll_next_unpin(&mut cx), Poll::Ready(None));
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        1,
        "an empty body ends at once"
    );
}

/// A connection that hands hyper one request, then waits, and keeps each write apart: a TLS
/// stream turns each write into a record, and Go's TLS client reads one record at a time.
struct Recorder {
    request: Option<Vec<u8>>,
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl AsyncRead for Recorder {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.request.take() {
            Some(request) => {
                buf.put_slice(&request);
                Poll::Ready(Ok(()))
            }
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for Recorder {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.writes.lock().expect("writes").push(buf.to_vec());
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_logs_last_line_and_the_bodys_end_go_out_in_separate_writes() {
    // The log task was quicker than the connection: the line is queued and the task gone by
    // the time hyper polls the body (what a loaded node shows).
    let (sink, frames) = tokio::sync::mpsc::channel(16);
    sink.send(Ok(Frame::data(Bytes::from_static(b"container is alive\n"))))
        .await
        .expect("queued");
    drop(sink);
    let frames = Mutex::new(Some(frames));
    let writes = Arc::new(Mutex::new(Vec::new()));
    let connection = Recorder {
        // As kube-apiserver's Go client asks: keep-alive, gzip accepted.
        request: Some(
            b"GET /containerLogs/default/web/main HTTP/1.1\r\nHost: node:10250\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n"
                .to_vec(),
        ),
        writes: Arc::clone(&writes),
    };
    let service = hyper::service::service_fn(move |_| {
        let frames = frames.lock().expect("frames").take().expect("one request");
        let reply = super::super::streamed(frames);
        async move { Ok::<_, std::convert::Infallible>(reply) }
    });
    let served = tokio::spawn(
        hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(connection), service),
    );
    let ended = |writes: &[Vec<u8>]| writes.iter().any(|write| write.ends_with(b"0\r\n\r\n"));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ended(&writes.lock().expect("writes")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the body never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    served.abort();

    let writes = writes.lock().expect("writes").clone();
    let text: Vec<String> = writes
        .iter()
        .map(|write| String::from_utf8_lossy(write).into_owned())
        .collect();
    assert!(
        text.concat()
            .contains("\r\n\r\n13\r\ncontainer is alive\n\r\n"),
        "{text:?}"
    );
    assert_eq!(
        text.last().map(String::as_str),
        Some("0\r\n\r\n"),
        "the end in a write of its own: {text:?}"
    );
}
