//! The node's client certificate as every API connection presents it: one swappable
//! certificate behind a rustls client-certificate resolver, so a rotated certificate is used
//! by the next handshake of every client without rebuilding any. Installing one also closes
//! every connection made before it (each ends as if the server closed it), as the kubelet
//! does on rotation, so no long-lived watch keeps talking with the old certificate.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::SystemTime;

use futures::task::AtomicWaker;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;

use super::certified::{InstallError, SwappableCertificate};
use super::lifetime::Validity;
use super::store::StoredPair;

/// The certificate in use and the connections made with the ones before it.
#[derive(Default)]
pub struct ClientIdentity {
    certificate: SwappableCertificate,
    connections: Arc<Generations>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("validity", &self.validity())
            .finish_non_exhaustive()
    }
}

impl ClientIdentity {
    /// An identity presenting `pair`.
    pub fn new(pair: &StoredPair) -> Result<Arc<Self>, InstallError> {
        let identity = Arc::new(ClientIdentity::default());
        identity.install(pair)?;
        Ok(identity)
    }

    /// Presents `pair` from the next handshake on and closes every connection made before.
    pub fn install(&self, pair: &StoredPair) -> Result<(), InstallError> {
        self.certificate.install(pair)?;
        self.connections.close_all();
        Ok(())
    }

    /// The validity of the certificate in use.
    pub fn validity(&self) -> Option<Validity> {
        self.certificate.validity()
    }

    /// The certificate in use and its validity, as rotation reads them.
    pub fn certificate(&self) -> &SwappableCertificate {
        &self.certificate
    }

    /// What marks this identity's connections, for [`super::client::RotatingConnector`].
    pub(super) fn generations(&self) -> Arc<Generations> {
        Arc::clone(&self.connections)
    }
}

impl ResolvesClientCert for ClientIdentity {
    /// The certificate in use; none once it has expired (the manager's `Current()` is nil
    /// then), so the server sees an anonymous client rather than an expired certificate.
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.certificate.unexpired(SystemTime::now())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl std::fmt::Debug for Generations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generations")
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A counter every installed certificate bumps, and the wakers of the live connections.
#[derive(Default)]
pub struct Generations {
    generation: AtomicU64,
    wakers: Mutex<Vec<Weak<AtomicWaker>>>,
}

impl Generations {
    fn close_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        wakers.retain(|waker| match waker.upgrade() {
            Some(waker) => {
                waker.wake();
                true
            }
            None => false,
        });
    }

    /// A mark for a connection made now.
    pub(super) fn mark(self: &Arc<Self>) -> ConnectionMark {
        let waker = Arc::new(AtomicWaker::new());
        let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        wakers.retain(|w| w.strong_count() > 0);
        wakers.push(Arc::downgrade(&waker));
        ConnectionMark {
            born: self.generation.load(Ordering::SeqCst),
            generations: Arc::clone(self),
            waker,
        }
    }
}

/// Which certificate generation a connection was made in.
pub struct ConnectionMark {
    born: u64,
    generations: Arc<Generations>,
    waker: Arc<AtomicWaker>,
}

impl ConnectionMark {
    /// Whether a newer certificate was installed since (registering `cx` to hear of one).
    pub(super) fn superseded(&self, cx: &mut Context<'_>) -> bool {
        self.waker.register(cx.waker());
        self.generations.generation.load(Ordering::SeqCst) != self.born
    }
}

/// A connection that reads as closed by the peer once its certificate is superseded.
pub struct MarkedStream<S> {
    pub(super) inner: S,
    pub(super) mark: ConnectionMark,
}

impl<S: hyper::rt::Read + Unpin> hyper::rt::Read for MarkedStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.mark.superseded(cx) {
            // End of stream: hyper drops the connection as a peer's close.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: hyper::rt::Write + Unpin> hyper::rt::Write for MarkedStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: hyper_util::client::legacy::connect::Connection>
    hyper_util::client::legacy::connect::Connection for MarkedStream<S>
{
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        self.inner.connected()
    }
}
