#!/usr/bin/env bash
# Installs what the runtime-probe and CRI tests start for themselves: containerd, runc, the CNI
# plugins (/usr/lib/cni) and busybox-static (/bin/busybox, the content of the offline test
# images the tests build and import; these machines reach no registry). Only what is missing is installed, so running it again is cheap; the
# tests start their own containerd on a private socket, so nothing is enabled or started here.
set -euo pipefail

missing=()
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
[ -x /bin/busybox ] || missing+=(busybox-static)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ci-setup-containerd: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "ci-setup-containerd: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian package may start a system containerd; the tests never use it, but a unit that
# is not wanted should not linger on a CI machine either.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet containerd 2>/dev/null; then
  systemctl stop containerd || true
fi
containerd --version
