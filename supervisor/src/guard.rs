//! Tells the supervisor that an actor instance ended and how: dropped while its thread was
//! unwinding means it panicked (the panic message comes from [`crate::panic_capture`]);
//! dropped otherwise means it stopped.

use futures::channel::mpsc;

use crate::panic_capture;

/// How an instance ended, as its guard saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExitCause {
    Stopped,
    Panicked(String),
}

/// The report a guard sends when its instance ends.
#[derive(Debug)]
pub(crate) struct ChildExit {
    pub child: usize,
    pub generation: u64,
    pub arbiter: u64,
    pub cause: ExitCause,
}

pub(crate) struct ExitGuard {
    pub child: usize,
    pub generation: u64,
    pub arbiter: u64,
    pub exits: mpsc::UnboundedSender<ChildExit>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let cause = if std::thread::panicking() {
            ExitCause::Panicked(panic_capture::take().unwrap_or_else(|| "unknown panic".to_owned()))
        } else {
            ExitCause::Stopped
        };
        // A closed channel means the supervisor is gone; there is nobody left to tell.
        let _ = self.exits.unbounded_send(ChildExit {
            child: self.child,
            generation: self.generation,
            arbiter: self.arbiter,
            cause,
        });
    }
}
