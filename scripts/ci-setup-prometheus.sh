#!/usr/bin/env bash
# Installs Debian's `prometheus` (the server alone, no exporters) for tests/it/prometheus_scrape.rs,
# which runs its own Prometheus on loopback against a node's kubelet API. Only when missing, so
# running it again is cheap. The package starts a system Prometheus on :9090; the test never uses
# it, so it is stopped and disabled, as nothing on a CI machine should keep running after setup.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ci-setup-prometheus: prometheus is missing; run as root to install it" >&2
  exit 1
fi
echo "ci-setup-prometheus: installing prometheus"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
# Without systemd (a container), the package's init script may have started it.
if [ -x /etc/init.d/prometheus ]; then
  /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi
prometheus --version 2>&1 | head -1
