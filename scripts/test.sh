#!/usr/bin/env bash
# Runs nodepulse's whole test suite: installs what the tests need that cargo cannot (kubectl for
# the emulator's kubectl test; containerd, runc and the CNI plugins for the runtime tests), then
# `cargo test --workspace --all-targets`. Safe to run repeatedly; installs need root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f emulator/ci-setup.sh ]; then
  bash emulator/ci-setup.sh
fi
bash scripts/ci-setup-containerd.sh  # containerd, runc and CNI plugins for tests/runtime_probe.rs

cargo test --workspace --all-targets "$@"
