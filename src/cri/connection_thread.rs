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
