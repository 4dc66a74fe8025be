//! Tells the supervisor that an actor instance ended and how: dropped while its thread was
//! unwinding means it panicked (the panic message comes from [`crate::panic_capture`]);
//! dropped otherwise means it stopped.

use futures::channel::mpsc;

use crate::{KillMode, panic_capture};

/// How an instance ended, as its guard saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExitCause {
    Stopped,
    Panicked(String),
}

/// Why an instance ended, as the supervisor decides on it: a failure (restarted under the
/// `Transient` policy too) or a stop of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InstanceEnd {
    /// It panicked, with the panic's message.
    Panicked(String),
    /// It stopped because fault injection asked it to.
    Killed(KillMode),
    /// The hang check gave up on it, saying why.
    Hung(String),
    /// It stopped by itself.
    Stopped,
}

impl InstanceEnd {
    /// What its guard saw, with the kill asked of it, if any.
    pub fn of(cause: ExitCause, kill_requested: Option<KillMode>) -> Self {
        match (cause, kill_requested) {
            (ExitCause::Panicked(message), _) => Self::Panicked(message),
            (ExitCause::Stopped, Some(mode)) => Self::Killed(mode),
            (ExitCause::Stopped, None) => Self::Stopped,
        }
    }

    pub fn is_failure(&self) -> bool {
        !matches!(self, Self::Stopped)
    }
}

impl std::fmt::Display for InstanceEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Panicked(message) => write!(f, "panicked: {message}"),
            Self::Killed(mode) => write!(f, "killed on request (mode {mode})"),
            Self::Hung(reason) => f.write_str(reason),
            Self::Stopped => f.write_str("stopped"),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::{ExitCause, InstanceEnd};
    use crate::KillMode;

    #[test]
    fn an_end_is_a_failure_unless_the_instance_stopped_by_itself_and_says_so() {
        let cases = [
            (
                InstanceEnd::of(ExitCause::Panicked("boom".to_owned()), None),
                true,
                "panicked: boom",
            ),
            (
                InstanceEnd::of(ExitCause::Stopped, Some(KillMode::Stop)),
                true,
                "killed on request (mode stop)",
            ),
            (
                InstanceEnd::Hung("no poll for 1s".to_owned()),
                true,
                "no poll for 1s",
            ),
            (InstanceEnd::of(ExitCause::Stopped, None), false, "stopped"),
        ];
        for (end, failure, text) in cases {
            assert_eq!(
                (end.is_failure(), end.to_string().as_str()),
                (failure, text)
            );
        }
    }
}
