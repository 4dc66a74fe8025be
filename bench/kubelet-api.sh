#!/usr/bin/env bash
# The kubelet API, side by side (issue 26's benchmark): `kubectl logs` of a 10 MiB container log
# and `kubectl exec POD -- true` round trips through the real kube-apiserver, nodepulse
# (`runtime: cri`) against the real kubelet 1.36 on the same kind of private containerd,
# alternating A/B/A/B in one session. Needs what bench/agents.sh needs (the conformance kit's
# running realk8s control plane and its busybox image; bench/kit-node.sh brings each agent up).
#
# Each turn: one pod on the agent's node (busybox) writes LOG_MIB MiB of 1 KiB lines to stdout,
# then is Ready (an exec readiness probe on a file it touches afterwards) and sleeps. The log is
# read once in full as a warm-up (and until all of it is there), then, each timed from kubectl's
# start to its exit: LOG_READS `kubectl logs` (each checked to be LOG_MIB MiB), EXECS `kubectl
# exec POD -- true` (each checked to exit 0) and, as the floor that does not reach the node,
# EXECS `kubectl get pod`. The agent's and containerd's CPU (utime + stime of /proc/PID/stat)
# over each loop, and the agent's resident memory after it. Both agents rotate container logs
# at CONTAINER_LOG_MAX_SIZE (64Mi), above the log's size, so neither rotates it mid-read (at the
# kubelet's 10Mi default the 10 MiB log, with its CRI line prefixes, would be rotated and
# `kubectl logs` would return only the newest file). Figures go to OUT_DIR/kubelet-api.json.
#
# usage: REALK8S_ROOT=... bench/kubelet-api.sh [ROUNDS]      (ROUNDS: 2, i.e. A/B/A/B)
# env:   LOG_MIB (10), LOG_READS (10), EXECS (50), ORDER ("nodepulse kubelet"), OUT_DIR
#        (bench/results), CONTAINER_LOG_MAX_SIZE (64Mi), and bench/kit-node.sh's (NODEPULSE_BIN,
#        NODEPULSE_EXTRA_CONFIG, CONFORMANCE, ...).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${1:-2}
LOG_MIB=${LOG_MIB:-10} LOG_READS=${LOG_READS:-10} EXECS=${EXECS:-50}
OUT_DIR=${OUT_DIR:-$REPO/bench/results}
MAX_SIZE=${CONTAINER_LOG_MAX_SIZE:-64Mi}
for n in "$ROUNDS" "$LOG_MIB" "$LOG_READS" "$EXECS"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS, LOG_MIB, LOG_READS and EXECS must be positive integers, not '$n'" >&2; exit 2; }
done
LOG_TAG=kubelet-api
# shellcheck source=bench/kit-node.sh
. "$REPO/bench/kit-node.sh"
NODEPULSE_EXTRA_CONFIG+=$'\n'"containerLogMaxSize: $MAX_SIZE"
KUBELET_EXTRA_ARGS="${KUBELET_EXTRA_ARGS:-} --container-log-max-size=$MAX_SIZE"
export KUBELET_EXTRA_ARGS
BUSYBOX=$(grep -m1 '/busybox:' "$ROOT/images/refs.txt") ||
  { echo "no busybox image in $ROOT/images/refs.txt (the kit's offline images belong there)" >&2; exit 1; }
POD=kubelet-api-bench
LINE=1023                                  # bytes of each line before its newline
LINES=$(( LOG_MIB * 1024 * 1024 / (LINE + 1) ))
LOG_BYTES=$(( LINES * (LINE + 1) ))
TMP=$(mktemp -d); trap 'down; rm -rf "$TMP"' EXIT

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }     # utime + stime, clock ticks
now() { date +%s.%N; }

pod_up() { # NODE: the pod, Ready once its whole log is written
  $KUBECTL apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $POD, namespace: default}
spec:
  nodeName: $1
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: $BUSYBOX
    command: [sh, -c, "head -c $(( LINES * LINE )) /dev/zero | tr '\\\\0' x | fold -w $LINE && echo && touch /tmp/logged; trap 'exit 0' TERM; while :; do sleep 1; done"]
    readinessProbe:
      exec: {command: [test, -e, /tmp/logged]}
      periodSeconds: 1
EOF
  $KUBECTL wait --for=condition=Ready "pod/$POD" --timeout=180s >/dev/null
  # containerd writes the log from the container's pipe: read until all of it is there
  local got=0
  for _ in $(seq 60); do
    got=$($KUBECTL logs "$POD" | wc -c)
    [ "$got" = "$LOG_BYTES" ] && return 0
    sleep 1
  done
  echo "the log of $POD has $got bytes after 60 s, not $LOG_BYTES" >&2; return 1
}

timed() { # OP N COMMAND...: N runs, each checked, seconds per run to $TMP/samples; CPU to $TMP/cpu
  local op=$1 n=$2 a0 r0 t0 out; shift 2
  a0=$(ticks "$AGENT_PID"); r0=$(ticks "$RUNTIME_PID")
  for _ in $(seq "$n"); do
    t0=$(now)
    out=$("$@" | wc -c) || { echo "$op: '$*' failed" >&2; return 1; }
    awk -v op="$op" -v t0="$t0" -v t1="$(now)" 'BEGIN{printf "%s %.6f\n", op, t1 - t0}' >> "$TMP/samples"
    if [ "$op" = logs ] && [ "$out" != "$LOG_BYTES" ]; then
      echo "kubectl logs gave $out bytes, not $LOG_BYTES" >&2; return 1
    fi
  done
  echo "$op $(( $(ticks "$AGENT_PID") - a0 )) $(( $(ticks "$RUNTIME_PID") - r0 ))" >> "$TMP/cpu"
}

turn() { # AGENT ROUND
  agent_up "$1" "$2"
  : > "$TMP/samples"; : > "$TMP/cpu"
  local load0; load0=$(cut -d' ' -f1-3 /proc/loadavg)
  pod_up "$AGENT_NAME"
  log "round $2: $1: pod Ready, its $LOG_BYTES-byte log all there"
  timed logs "$LOG_READS" $KUBECTL logs "$POD"
  timed exec "$EXECS" $KUBECTL exec "$POD" -- true
  timed get "$EXECS" $KUBECTL get pod "$POD" -o name
  python3 "$REPO/bench/kubelet-api-figures.py" --out "$OUT_DIR/kubelet-api.json" --agent "$1" \
    --round "$2" --node "$AGENT_NAME" --log-bytes "$LOG_BYTES" --samples "$TMP/samples" \
    --cpu "$TMP/cpu" --pid "$AGENT_PID" --load-before "$load0" --binary "$(agent_binary "$1")"
  $KUBECTL delete pod "$POD" --wait=true --timeout=60s >/dev/null
  agent_down
}

agent_binary() { # AGENT: the file that ran
  case "$1" in nodepulse) echo "$NODEPULSE_BIN" ;; *) echo "$ROOT/bin/kubelet" ;; esac
}

for round in $(seq "$ROUNDS"); do
  for agent in ${ORDER:-nodepulse kubelet}; do
    turn "$agent" "$round"
  done
done
log "figures in $OUT_DIR/kubelet-api.json"
