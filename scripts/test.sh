#!/usr/bin/env bash
# Runs nodepulse's whole test suite: installs what the tests need that cargo cannot (kubectl for
# the emulator's kubectl test; containerd, runc and the CNI plugins for the runtime tests; openssl
# for the TLS test's certificates), then
# `cargo test --workspace --all-targets`. Safe to run repeatedly; installs need root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f emulator/ci-setup.sh ]; then
  bash emulator/ci-setup.sh
fi
bash scripts/ci-setup-containerd.sh  # containerd, runc, CNI plugins and busybox-static for the runtime and pod tests
# openssl mints the test certificates of tests/kubeconfig_tls.rs.
if ! command -v openssl >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi

# The black-box tests (tests/it, one binary) wait on timers and I/O far more than they compute,
# so they run with more threads than cores. Backtraces stay off: the fault tests panic actors on
# purpose, and symbolising each backtrace under that load takes seconds of CPU the other tests
# are timed on (the panic message still names its file and line).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
export RUST_BACKTRACE="${NODEPULSE_TEST_BACKTRACE:-0}"
cargo test --workspace --all-targets "$@"
