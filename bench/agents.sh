#!/usr/bin/env bash
# Real pods, side by side: nodepulse (`runtime: cri`) against the real kubelet 1.36, each on the
# same kind of private containerd with the CNI bridge, registered with the same real control
# plane, alternating A/B/A/B in one session. Needs the conformance kit (its folder in CONFORMANCE,
# outside this repo; docs/testing/conformance.md says what it expects in REALK8S_ROOT): a running
# realk8s control plane ($REALK8S_ROOT/start.sh) and the offline images in $REALK8S_ROOT/images
# (the busybox and pause images are all this needs).
#
# Each turn brings one agent up (bench/kit-node.sh: as the kit's node-e2e.sh does, without the
# suite), runs `nodepulse-bench agents` against its PID and Node (figures added to
# bench/results/agents.json), tears it all down and prints the requests the agent's node user
# sent in its turn (audit-counts.py on the audit log). The control plane is left running.
#
# usage: REALK8S_ROOT=... bench/agents.sh [ROUNDS]        (ROUNDS: 2, i.e. A/B/A/B)
# env:   CONFORMANCE (required: the kit's folder), NODEPULSE_BIN (target/ship/nodepulse:
#        `cargo build --profile ship`), BENCH_BIN
#        (target/{ship,release,debug}/nodepulse-bench, the first there), PODS (30,100),
#        ORDER ("nodepulse kubelet"), BENCH_ARGS (more `nodepulse-bench agents` flags),
#        OUT_DIR (bench/results), NODEPULSE_EXTRA_CONFIG (default: the kubelet's API settings of
#        kubelet.sh, x509 client CA + AlwaysAllow, so both agents are configured alike).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${1:-2}
# The bench only creates, watches and reads /proc: a debug build of it does as well.
BENCH_BIN=${BENCH_BIN:-$(ls "$REPO"/target/{ship,release,debug}/nodepulse-bench 2>/dev/null | head -1 || true)}
PODS=${PODS:-30,100}
OUT_DIR=${OUT_DIR:-$REPO/bench/results}
[ -e "$BENCH_BIN" ] || { echo "missing nodepulse-bench (cargo build -p nodepulse-bench)" >&2; exit 1; }
LOG_TAG=agents
# shellcheck source=bench/kit-node.sh
. "$REPO/bench/kit-node.sh"

turn() { # AGENT ROUND
  agent_up "$1" "$2"
  # shellcheck disable=SC2086
  "$BENCH_BIN" --out-dir "$OUT_DIR" agents --kubeconfig "$ROOT/admin.kubeconfig" --node "$AGENT_NAME" \
    --pid "$AGENT_PID" --runtime-pid "$RUNTIME_PID" --agent "$1" --round "$2" --pods "$PODS" \
    ${BENCH_ARGS:-}
  agent_down
}

for round in $(seq "$ROUNDS"); do
  for agent in ${ORDER:-nodepulse kubelet}; do
    turn "$agent" "$round"
  done
done
log "figures in $OUT_DIR/agents.json"
