#!/usr/bin/env bash
# Real pods, side by side: nodepulse (`runtime: cri`) against the real kubelet 1.36, each on the
# same kind of private containerd with the CNI bridge, registered with the same real control
# plane, alternating A/B/A/B in one session. Needs the conformance kit (../shared/conformance,
# outside this repo; README "Real pods, side by side" says where it comes from): a running
# realk8s control plane ($REALK8S_ROOT/start.sh) and the offline images (build-e2e.sh; the
# busybox and pause images are all this needs).
#
# Each turn brings one agent up as the kit's node-e2e.sh does, without the suite (node-runtime.sh:
# containerd, CNI bridge, images; node-hosts.sh; the agent; Node Ready), runs `nodepulse-bench agents`
# against its PID and Node (figures added to bench/results/agents.json), and tears it all down
# (node-e2e.sh --down: pods, agent, containerd, bridge, Node, hosts line, sysctls), then prints
# the requests the agent's node user sent in its turn (audit-counts.py on the audit log). The
# control plane is left running.
#
# usage: REALK8S_ROOT=... bench/agents.sh [ROUNDS]        (ROUNDS: 2, i.e. A/B/A/B)
# env:   CONFORMANCE (../shared/conformance beside the repo), NODEPULSE_BIN
#        (target/release/nodepulse), BENCH_BIN (target/release/nodepulse-bench, else debug), PODS (30,100),
#        ORDER ("nodepulse kubelet"), BENCH_ARGS (more `nodepulse-bench agents` flags),
#        OUT_DIR (bench/results), NODEPULSE_EXTRA_CONFIG (default: the kubelet's API settings of
#        kubelet.sh, x509 client CA + AlwaysAllow, so both agents are configured alike).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${REALK8S_ROOT:?set REALK8S_ROOT to the realk8s folder of the conformance kit}
KIT=$(cd "${CONFORMANCE:-$REPO/../shared/conformance}" && pwd)
ROUNDS=${1:-2}
NODEPULSE_BIN=${NODEPULSE_BIN:-$REPO/target/release/nodepulse}
# The bench only creates, watches and reads /proc: a debug build of it does as well.
BENCH_BIN=${BENCH_BIN:-$(ls "$REPO"/target/{release,debug}/nodepulse-bench 2>/dev/null | head -1 || true)}
PODS=${PODS:-30,100}
OUT_DIR=${OUT_DIR:-$REPO/bench/results}
KUBELET_API=$(printf 'authentication:\n  x509: {clientCAFile: %s/pki/ca.crt}\nauthorization: {mode: AlwaysAllow}' "$ROOT")
export NODEPULSE_EXTRA_CONFIG=${NODEPULSE_EXTRA_CONFIG:-$KUBELET_API}
for f in "$NODEPULSE_BIN" "$BENCH_BIN" "$KIT/node-e2e.sh" "$ROOT/admin.kubeconfig"; do
  [ -e "$f" ] || { echo "missing $f" >&2; exit 1; }
done
export POD_CIDR=${POD_CIDR:-198.18.0.0/24} BRIDGE=${BRIDGE:-rk8s0}
NODE_IP=$(python3 -c "import ipaddress;print(ipaddress.ip_network('$POD_CIDR')[1])")
export NODE_IP KUBELET_NODE_IP=$NODE_IP NODEPULSE_BIN
KUBECTL="$ROOT/bin/kubectl --kubeconfig $ROOT/admin.kubeconfig"
# What the kubelet changes (kubelet.sh), restored by node-e2e.sh --down.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
log() { printf '[agents %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# The agent that is up (its Node name and work dir): torn down after its turn, or at exit.
UP_NAME= UP_WORK=
down() {
  [ -n "$UP_WORK" ] || return 0
  log "$UP_NAME down"
  NODE_NAME=$UP_NAME bash "$KIT/node-e2e.sh" --down "$UP_WORK" >> "$UP_WORK.log" 2>&1
  UP_NAME= UP_WORK=
}
trap down EXIT

# The node side of node-e2e.sh without the suite (so no scheduler, no e2e.test): what its
# teardown (`node-e2e.sh --down`) restores is recorded the same way, under WORK/state.
up() { # AGENT_SCRIPT NAME WORK
  local script=$1 name=$2 work=$3 sock=$3/runtime/containerd.sock k
  mkdir -p "$work/state"; : > "$work/state/sysctls"
  for k in $SYSCTLS; do echo "$k $(cat "/proc/sys/${k//.//}")" >> "$work/state/sysctls"; done
  [ -d /var/log/containers ] || touch "$work/state/no-var-log-containers"
  bash "$KIT/node-runtime.sh" up "$work/runtime"
  bash "$KIT/node-hosts.sh" add "$name"
  REALK8S_ROOT=$ROOT setsid "$script" "$name" "$sock" "$work/agent" >> "$work/agent.log" 2>&1 < /dev/null &
  echo "agent $!" > "$work/pids"
  for _ in $(seq 180); do
    [ "$($KUBECTL get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] &&
      return 0
    kill -0 "$(awk '{print $2}' "$work/pids")" 2>/dev/null || { tail -30 "$work/agent.log"; return 1; }
    sleep 1
  done
  echo "node $name not Ready after 180 s"; return 1
}

turn() { # AGENT ROUND
  local agent=$1 round=$2 work=$ROOT/bench-$1-$2 name script pid runtime_pid since
  case "$agent" in
    nodepulse) name=np-bench; script=$KIT/nodepulse-agent.sh ;;
    kubelet) name=kubelet-bench; script=$KIT/kubelet.sh ;;
    *) echo "unknown agent $agent (nodepulse, kubelet)" >&2; exit 2 ;;
  esac
  rm -rf "$work"; mkdir -p "$work"
  log "round $round: $agent up as $name (log $work.log)"
  since=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
  UP_NAME=$name UP_WORK=$work
  up "$script" "$name" "$work" > "$work.log" 2>&1 || { tail -20 "$work.log" >&2; exit 1; }
  pid=$(awk '$1=="agent"{print $2}' "$work/pids")
  runtime_pid=$(awk '$1=="containerd"{print $2}' "$work/runtime/pids" | tail -1)
  log "round $round: $agent pid $pid, containerd pid $runtime_pid"
  # shellcheck disable=SC2086
  "$BENCH_BIN" --out-dir "$OUT_DIR" agents --kubeconfig "$ROOT/admin.kubeconfig" --node "$name" \
    --pid "$pid" --runtime-pid "$runtime_pid" --agent "$agent" --round "$round" --pods "$PODS" \
    ${BENCH_ARGS:-}
  down
  # What the agent sent over its turn (start-up and teardown included), from the audit log.
  python3 "$REPO/bench/audit-counts.py" "$ROOT/audit.log" "$name" --since "$since" | sed -n 1p
  log "round $round: $agent done; its log: $work/agent.log"
}

for round in $(seq "$ROUNDS"); do
  for agent in ${ORDER:-nodepulse kubelet}; do
    turn "$agent" "$round"
  done
done
log "figures in $OUT_DIR/agents.json"
