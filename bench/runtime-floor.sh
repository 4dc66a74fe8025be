#!/usr/bin/env bash
# The runtime's floor under bench/agents.sh's figures: the conformance kit's runtime (private
# containerd 1.6 with the CNI bridge and the offline images, `node-runtime.sh up`, the same one
# each agent's turn gets) with no agent and no API server, driven straight over CRI by
# `nodepulse-bench runtime-floor` (P pods at each concurrency, then pods one by one; figures
# added to bench/results/runtime-floor.json), then torn down (`node-runtime.sh down`). Needs
# the kit's images ($REALK8S_ROOT/images), not its control plane.
#
# usage: REALK8S_ROOT=... bench/runtime-floor.sh [ROUND]
# env:   CONFORMANCE (required: the kit's folder), BENCH_BIN
#        (target/{ship,release,debug}/nodepulse-bench, the first there), OUT_DIR (bench/results), BENCH_ARGS (more
#        `nodepulse-bench runtime-floor` flags: --pods, --concurrency, --one-by-one)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${REALK8S_ROOT:?set REALK8S_ROOT to the realk8s folder of the conformance kit}
KIT=$(cd "${CONFORMANCE:?set CONFORMANCE to the folder of the conformance kit}" && pwd)
ROUND=${1:-1}
BENCH_BIN=${BENCH_BIN:-$(ls "$REPO"/target/{ship,release,debug}/nodepulse-bench 2>/dev/null | head -1 || true)}
OUT_DIR=${OUT_DIR:-$REPO/bench/results}
[ -e "$BENCH_BIN" ] || { echo "missing nodepulse-bench (cargo build -p nodepulse-bench)" >&2; exit 1; }
export REALK8S_ROOT=$ROOT POD_CIDR=${POD_CIDR:-198.18.0.0/24} BRIDGE=${BRIDGE:-rk8s0}
WORK=$ROOT/bench-runtime-floor-$ROUND
rm -rf "$WORK"; mkdir -p "$WORK"
down() { bash "$KIT/node-runtime.sh" down "$WORK/runtime" >> "$WORK.log" 2>&1 || true; }
trap down EXIT
bash "$KIT/node-runtime.sh" up "$WORK/runtime" > "$WORK.log" 2>&1 || { tail -20 "$WORK.log" >&2; exit 1; }
RUNTIME_PID=$(awk '$1=="containerd"{print $2}' "$WORK/runtime/pids" | tail -1)
# shellcheck disable=SC2086
"$BENCH_BIN" --out-dir "$OUT_DIR" runtime-floor --endpoint "unix://$WORK/runtime/containerd.sock" \
  --runtime-pid "$RUNTIME_PID" --round "$ROUND" ${BENCH_ARGS:-}
