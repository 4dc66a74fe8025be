//! A log body's end is flushed on its own, never with the data before it, as the kubelet's
//! `flushwriter` does (it flushes every write; the terminating chunk goes out when the handler
//! returns). This matters to kube-apiserver's WebSocket log path (`wsstream`'s `messageCopy`):
//! it drops the bytes of a `Read` that also returns `io.EOF`. Go's TLS client reads one record
//! per `Read`, and hyper writes what one flush holds as one record, so a last line flushed
//! together with the `0\r\n\r\n` that ends the chunked body came back as `(n, io.EOF)` and the
//! client got an empty log (the upstream spec "retrieving logs from the container over
//! websockets" failed 13 times in 25). Plain HTTP clients read such a `Read` whole.

use std::{
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures::Stream;

/// `inner`, whose end is held back for one poll after a data item: hyper flushes what it has
/// when the body is pending, so the end goes out in a write of its own. The waker is woken at
/// once, so nothing waits on it.
pub struct EndApart<S> {
    inner: S,
    after_item: bool,
    ended: bool,
}

impl<S> EndApart<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            after_item: false,
            ended: false,
        }
    }
}

impl<S: Stream + Unpin> Stream for EndApart<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        if self.ended {
            // The inner stream already ended (and may not be polled again).
            return Poll::Ready(None);
        }
        let next = ready!(Pin::new(&mut self.inner).poll_next(cx));
        match next {
            Some(item) => {
                self.after_item = true;
                Poll::Ready(Some(item))
            }
            None => {
                self.ended = true;
                if std::mem::take(&mut self.after_item) {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                } else {
                    Poll::Ready(None)
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "end_apart_tests.rs"]
mod tests;
