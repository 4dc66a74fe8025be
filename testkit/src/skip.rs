//! Skipped tests, made visible. A test that needs the emulator (fault injection, its request
//! log, its lifecycle timing) returns early on a real cluster, and the standard harness can only
//! call that "ok"; so every skip is written to the terminal past the harness's output capture,
//! with a running count for the binary, and docs/testing/real-cluster.md says how to total them. A test that
//! needs a tool this machine lacks (containerd, busybox, openssl) skips the same way, except in
//! CI (`CI` set), where a missing tool fails it: CI must never skip them.

use std::{
    io::Write,
    sync::atomic::{AtomicUsize, Ordering},
};

static SKIPPED: AtomicUsize = AtomicUsize::new(0);

/// Whether the tests run against the real cluster named by `NODEPULSE_TEST_KUBECONFIG`.
pub fn on_real_cluster() -> bool {
    std::env::var_os("NODEPULSE_TEST_KUBECONFIG").is_some()
}

/// Records that `test` is skipped because it needs `what`, and says so where the person running
/// the suite sees it (`eprintln!` would be captured and dropped for a passing test).
pub fn skipped(test: &str, what: &str) {
    let count = SKIPPED.fetch_add(1, Ordering::Relaxed) + 1;
    let place = if on_real_cluster() {
        "on the real cluster"
    } else {
        "here"
    };
    let line = format!(
        "SKIPPED {test} {place}: needs {what} ({count} skipped so far in this test binary; its other tests ran)\n"
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// Whether CI runs the suite: `CI` set, as every CI service sets it (to anything but empty,
/// `0` or `false`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
}

/// `test` cannot run because this machine lacks `what` (a tool, with what installs it, or a
/// privilege): fails the test in CI, and elsewhere records a visible skip. The caller returns.
pub fn missing(test: &str, what: &str) {
    assert!(
        !in_ci(),
        "{test} cannot run without {what}, and CI must run it"
    );
    skipped(test, what);
}
