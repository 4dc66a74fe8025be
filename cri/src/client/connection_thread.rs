//! The thread a node's CRI connection lives on. Its tasks (the HTTP/2 connection, tonic's
//! buffer) run here whatever runtime each call comes from — an actor's arbiter the supervisor
//! may abandon, the CRI engine's thread, a service's task — so no caller that hangs or ends
//! takes the others' connection with it. The thread ends when the last client clone is dropped.

use std::io;

use tokio::{runtime::Handle, sync::oneshot};

pub(super) struct ConnectionThread {
    runtime: Handle,
    /// Dropped with the last client: the thread's runtime then ends.
    _stop: oneshot::Sender<()>,
}

impl ConnectionThread {
    pub(super) fn start() -> io::Result<Self> {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let runtime = tokio.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("cri-connection".to_owned())
            .spawn(move || {
                tokio.block_on(async move {
                    let _ = stopped.await;
                });
            })?;
        Ok(Self {
            runtime,
            _stop: stop,
        })
    }

    pub(super) fn runtime(&self) -> Handle {
        self.runtime.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nodepulse_actors::ports::{RuntimeError, RuntimeService};

    use super::super::{CriClient, events::tests::serve};

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// The fake answers every call "unknown method": an answer, so the connection works (a
    /// dead one is `Unreachable` or `Timeout`).
    fn answered<T>(result: &Result<T, RuntimeError>) -> bool {
        matches!(result, Err(RuntimeError::Call { message, .. }) if message.contains("unknown method"))
    }

    #[test]
    fn a_node_clients_connection_outlives_the_runtime_that_dialled_it() {
        let dir = tempfile::tempdir().expect("a directory");
        let socket = dir.path().join("cri.sock");
        let (bound, listening) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = {
            let socket = socket.clone();
            std::thread::spawn(move || {
                current_thread().block_on(async move {
                    let _server = serve(&socket, None);
                    bound.send(()).expect("the test waits");
                    let _ = stopped.await;
                });
            })
        };
        listening.recv().expect("the fake listens");
        let endpoint = format!("unix://{}", socket.display());
        let client = CriClient::for_node(&endpoint, Duration::from_secs(5)).expect("an endpoint");

        // An actor's arbiter dials, then goes away (abandoned, or the actor stopped).
        let first = current_thread();
        let dialled = first.block_on(client.version());
        assert!(answered(&dialled), "{dialled:?}");
        drop(first);

        let second = current_thread();
        let again = second.block_on(client.version());
        assert!(answered(&again), "{again:?}");
        drop(stop);
        server.join().expect("the fake ends");
    }
}
