//! Remembers the message of the last panic on each thread, so the exit guard of an actor whose
//! task unwound can say why it died, and marks the instance panicking before anything slow (a
//! backtrace) runs, so the hang check leaves it to the exit guard. The hook chains to the one
//! installed before it.

use std::{cell::RefCell, panic, sync::Once};

use crate::liveness;

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Installs the capturing hook once per process.
pub(crate) fn install() {
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            // First: symbolising a backtrace under load takes seconds, which is not a hang.
            liveness::mark_running_panicking();
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            let location = info
                .location()
                .map(|at| format!(" at {}:{}", at.file(), at.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|last| *last.borrow_mut() = Some(format!("{message}{location}")));
            previous(info);
        }));
    });
}

/// The last panic message seen on this thread, cleared by reading it.
pub(crate) fn take() -> Option<String> {
    LAST_PANIC.with(|last| last.borrow_mut().take())
}
