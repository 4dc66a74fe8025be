#!/usr/bin/env bash
# Runs nodepulse's whole test suite: installs what the tests need that cargo cannot (kubectl for
# the emulator's kubectl test; containerd, runc and the CNI plugins for the runtime tests; openssl
# for the TLS test's certificates), then every test binary of
# `cargo test --workspace --all-targets` (scripts/run-test-binaries.sh: the black-box binary
# beside the others; `scripts/test.sh ARGS` passes ARGS to that cargo command instead), and lists
# what the suite left behind. Safe to run repeatedly; installs need root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f emulator/ci-setup.sh ]; then
  bash emulator/ci-setup.sh
fi
bash scripts/ci-setup-containerd.sh  # containerd, runc, CNI plugins and busybox-static for the runtime and pod tests
bash scripts/ci-setup-prometheus.sh  # Debian's prometheus for tests/it/prometheus_scrape.rs
# openssl mints the test certificates of tests/kubeconfig_tls.rs.
if ! command -v openssl >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi
# `--setup-only`: the installs alone (.ci/run runs them beside its build).
if [ "${1:-}" = --setup-only ]; then
  exit 0
fi

# The black-box tests (tests/it, one binary) wait on timers and I/O far more than they compute,
# so they run with more threads than cores. Backtraces stay off: the fault tests panic actors on
# purpose, and symbolising each backtrace under that load takes seconds of CPU the other tests
# are timed on (the panic message still names its file and line).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
export RUST_BACKTRACE="${NODEPULSE_TEST_BACKTRACE:-0}"

# What the suite leaves on the host (and in a real cluster) is a snapshot after it less one
# before it (tests/it/cleanup.rs): each thing left is a `LEFT` line, and with CI set the run
# fails. Both snapshots run the already built black-box binary, so nothing builds twice (the
# build's output is printed through stderr's own descriptor: a `tee /dev/stderr` would open a
# log file that stderr names anew and write over it).
build_output="$(cargo test --workspace --all-targets --no-run 2>&1)" || {
  printf '%s\n' "$build_output" >&2
  exit 1
}
printf '%s\n' "$build_output" >&2
it_binary="$(printf '%s\n' "$build_output" |
  sed -n 's/^ *Executable tests\/it\/main.rs (\(.*\))$/\1/p')"
if [ ! -x "$it_binary" ]; then
  echo "test.sh: cargo named no tests/it binary" >&2
  exit 1
fi
export NODEPULSE_LEFTOVERS_BASELINE="$PWD/target/leftovers-baseline.json"
"$it_binary" --quiet --ignored --exact cleanup::record_what_the_host_and_cluster_hold_before_the_suite

status=0
log="$PWD/target/test-run.log"
if [ $# -gt 0 ]; then
  # Arguments (a filter, `-p ...`) go to cargo, which runs the binaries one after another.
  cargo test --workspace --all-targets --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
else
  scripts/run-test-binaries.sh 2>&1 | tee "$log" || status=$?
fi
"$it_binary" --quiet --ignored --exact cleanup::the_suite_left_nothing_on_the_host_or_in_the_cluster ||
  status=$?
# One closing line for the whole suite (cargo prints one per test binary; the leftover check's
# own comes last): the totals of every binary's `test result:` line.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "suite: %d passed, %d failed\n", passed, failed }' "$log"
exit "$status"
