# One node agent at a time on the conformance kit (its folder in CONFORMANCE, outside this repo;
# docs/testing/conformance.md says what it expects in REALK8S_ROOT): sourced
# by bench/agents.sh and bench/kubelet-api.sh, which run nodepulse and the real kubelet 1.36 in
# turns on the same kind of private containerd with the CNI bridge, registered with the same
# running realk8s control plane ($REALK8S_ROOT/start.sh). Not a command of its own.
#
# agent_up AGENT ROUND brings AGENT (nodepulse or kubelet) up as the kit's node-e2e.sh does, without
# the suite (node-runtime.sh: containerd, CNI bridge, images; node-hosts.sh; the agent; Node Ready)
# and sets AGENT_NAME, AGENT_WORK, AGENT_PID, RUNTIME_PID; agent_down tears it all down
# (node-e2e.sh --down: pods, agent, containerd, bridge, Node, hosts line, sysctls), also at exit,
# and prints the requests the node's user sent in its turn (audit-counts.py on the audit log).
#
# The caller sets REPO (the repository) and may set LOG_TAG; env: REALK8S_ROOT (required),
# CONFORMANCE (required: the kit's folder), NODEPULSE_BIN (target/ship/nodepulse:
# `cargo build --profile ship`),
# TEXT_ORDER_CHECK (1: refuse a daemon whose text layout list is stale),
# NODEPULSE_EXTRA_CONFIG (default: the kubelet's API settings of kubelet.sh, x509 client CA +
# AlwaysAllow, so both agents are configured alike), KUBELET_EXTRA_ARGS (kubelet.sh's), POD_CIDR.
ROOT=${REALK8S_ROOT:?set REALK8S_ROOT to the realk8s folder of the conformance kit}
KIT=$(cd "${CONFORMANCE:?set CONFORMANCE to the folder of the conformance kit}" && pwd)
NODEPULSE_BIN=${NODEPULSE_BIN:-$REPO/target/ship/nodepulse}
KUBELET_API=$(printf 'authentication:\n  x509: {clientCAFile: %s/pki/ca.crt}\nauthorization: {mode: AlwaysAllow}' "$ROOT")
export NODEPULSE_EXTRA_CONFIG=${NODEPULSE_EXTRA_CONFIG:-$KUBELET_API}
for f in "$NODEPULSE_BIN" "$KIT/node-e2e.sh" "$ROOT/admin.kubeconfig"; do
  [ -e "$f" ] || { echo "missing $f" >&2; exit 1; }
done
# A ship daemon whose text layout list went stale (its functions renamed since the list was
# made: their symbols carry hashes of the build's metadata) keeps several MiB more of its text
# resident: its memory would not be the build's. Checked
# before any turn; TEXT_ORDER_CHECK=0 measures anyway (a debug build, which has no layout).
if [ "${TEXT_ORDER_CHECK:-1}" != 0 ]; then
  bash "$REPO/scripts/text-order.sh" --check "$NODEPULSE_BIN" || {
    echo "not measuring $NODEPULSE_BIN with a stale text layout (TEXT_ORDER_CHECK=0 measures anyway)" >&2
    exit 1
  }
fi
export POD_CIDR=${POD_CIDR:-198.18.0.0/24} BRIDGE=${BRIDGE:-rk8s0}
NODE_IP=$(python3 -c "import ipaddress;print(ipaddress.ip_network('$POD_CIDR')[1])")
export NODE_IP KUBELET_NODE_IP=$NODE_IP NODEPULSE_BIN
KUBECTL="$ROOT/bin/kubectl --kubeconfig $ROOT/admin.kubeconfig"
# What the kubelet changes (kubelet.sh), restored by node-e2e.sh --down.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
log() { printf '[%s %s] %s\n' "${LOG_TAG:-bench}" "$(date +%H:%M:%S)" "$*"; }

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

agent_up() { # AGENT ROUND: sets AGENT_NAME AGENT_WORK AGENT_PID RUNTIME_PID (and TURN_SINCE)
  local agent=$1 round=$2 script
  case "$agent" in
    nodepulse) AGENT_NAME=np-bench; script=$KIT/nodepulse-agent.sh ;;
    kubelet) AGENT_NAME=kubelet-bench; script=$KIT/kubelet.sh ;;
    *) echo "unknown agent $agent (nodepulse, kubelet)" >&2; exit 2 ;;
  esac
  AGENT_WORK=$ROOT/bench-$agent-$round
  rm -rf "$AGENT_WORK"; mkdir -p "$AGENT_WORK"
  log "round $round: $agent up as $AGENT_NAME (log $AGENT_WORK.log)"
  TURN_SINCE=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
  UP_NAME=$AGENT_NAME UP_WORK=$AGENT_WORK
  up "$script" "$AGENT_NAME" "$AGENT_WORK" > "$AGENT_WORK.log" 2>&1 || { tail -20 "$AGENT_WORK.log" >&2; exit 1; }
  AGENT_PID=$(awk '$1=="agent"{print $2}' "$AGENT_WORK/pids")
  RUNTIME_PID=$(awk '$1=="containerd"{print $2}' "$AGENT_WORK/runtime/pids" | tail -1)
  log "round $round: $agent pid $AGENT_PID, containerd pid $RUNTIME_PID"
}

agent_down() { # after agent_up: tear down, then what the agent sent over its turn (start-up and
  # teardown included), from the audit log
  local name=$AGENT_NAME work=$AGENT_WORK
  down
  python3 "$REPO/bench/audit-counts.py" "$ROOT/audit.log" "$name" --since "$TURN_SINCE" | sed -n 1p
  log "$name done; its log: $work/agent.log"
}
