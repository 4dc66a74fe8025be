#!/usr/bin/env bash
# Regenerates release/text-order.txt: the daemon's functions that a running node executes, which
# build.rs has the linker place side by side in ship builds (`cargo build --profile ship`,
# target/ship/nodepulse; docs/benchmarks/one-node.md).
#
#   scripts/text-order.sh [SECONDS]   every function a node executes from start to shutdown
#                                     (`runtime: simulated` against the emulator, the debug
#                                     endpoint and /metrics scraped), counted by callgrind
#   scripts/text-order.sh --kit [PODS]  then adds the functions a `runtime: cri` node executes
#                                     with real pods: on the conformance kit (REALK8S_ROOT, its
#                                     control plane started, and CONFORMANCE, the kit's folder;
#                                     docs/testing/conformance.md),
#                                     under callgrind, PODS (100) busybox pods created, Running,
#                                     a `kubectl logs` and `exec`, the kubelet API's stats read,
#                                     all deleted, the node shut down
#   scripts/text-order.sh --refine [SECONDS]  then, on the ship build made with that list and run
#                                     natively, adds the functions whose first instruction fetch
#                                     still faulted outside the list (paths that depend on
#                                     timing, which run differently under valgrind)
#   scripts/text-order.sh --refine-kit [PODS]  the same for the kit's node with real pods
#   scripts/text-order.sh --check [BINARY]  whether the list still applies to the ship build
#                                     (target/ship/nodepulse): fails when under 95 % of its
#                                     names are defined there, i.e. the list has gone stale
#
# NO_BUILD=1 takes the ship build as it is. The callgrind steps only read names, which the
# list does not change, so `--kit` may follow the first step on the same build; each `--refine`
# needs a build made with the list as it then stands.
#
# Run them in that order after a change to what a running node executes, to any Cargo.toml or
# to the ship profile: symbol names carry a hash of the dependency graph, the features and the
# profile, so such a change renames most functions (a build without the `standalone` feature
# too: see docs/operating/install.md). A stale list only makes the resident text larger, never
# wrong. The simulated node's functions come first, so a simulated node's text is packed too.
# Needs valgrind, perf (--refine), binutils' nm and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=callgrind
seconds=150
case "${1:-}" in
  --refine) mode=refine; shift ;;
  --kit) mode=kit; shift; pods="${1:-100}" ;;
  --refine-kit) mode=refine-kit; shift; pods="${1:-100}" ;;
  --check) mode=check; shift; binary="${1:-${CARGO_TARGET_DIR:-target}/ship/nodepulse}" ;;
esac
seconds="${1:-$seconds}"
list=release/text-order.txt
if [ "$mode" = check ]; then
  listed=$(wc -l <"$list")
  defined=$(nm --defined-only "$binary" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u \
    | grep -cFxf - "$list" || true)
  defined=${defined:-0} # grep prints no count when given no patterns (a binary without symbols)
  echo "$binary defines $defined of the $listed functions $list names" >&2
  [ $((defined * 100)) -ge $((listed * 95)) ] || {
    echo "the list is stale: run this script's steps again (see its head)" >&2
    exit 1
  }
  exit 0
fi
# The simulated node's API server is the emulator's own binary, in the quick `release` profile:
# it is not measured, and a second fat-LTO link would double the build.
if [ -z "${NO_BUILD:-}" ]; then
  case "$mode" in
    kit | refine-kit) ;;
    *) cargo build --release -p nodepulse-emulator --bin nodepulse-emulator ;;
  esac
  cargo build --profile ship -p nodepulse --bin nodepulse
fi
bin="${CARGO_TARGET_DIR:-target}/ship"
emulator_bin="${CARGO_TARGET_DIR:-target}/release/nodepulse-emulator"
work="$(mktemp -d)"
emulator=""
trap 'kill $emulator 2>/dev/null || true; rm -rf "$work"' EXIT

# The simulated node's emulator, and the daemon's command line against it (sets debug_port and
# daemon).
start_emulator() {
  local api_port
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  api_port="$(free_port)"
  debug_port="$(free_port)"
  "$emulator_bin" --address "127.0.0.1:$api_port" --kubeconfig-out "$work/kubeconfig" \
    >"$work/emulator.log" 2>&1 &
  emulator=$!
  for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
  printf 'runtime: simulated\ndebug:\n  address: 127.0.0.1:%s\n' "$debug_port" >"$work/nodepulse.yaml"
  daemon=("$bin/nodepulse" --config "$work/nodepulse.yaml" --kubeconfig "$work/kubeconfig"
    --node-name text-order)
}

# Runs "$@" (the simulated daemon, under a recorder) for $seconds, scraping the endpoint
# half-way.
run_node() {
  "$@" >"$work/daemon.log" 2>&1 &
  local recorder=$!
  sleep $((seconds / 2))
  for path in /healthz /debug/actors /debug/node /metrics; do
    curl -fsS "http://127.0.0.1:$debug_port$path" >/dev/null || echo "warning: $path did not answer" >&2
  done
  sleep $((seconds / 2))
  pkill -INT -f -- "--node-name text-order" || true
  wait "$recorder" || true
}

# The names callgrind met (`fn=(id) name` or `cfn=`, each named once) that the binary defines, in
# the order callgrind first met them.
executed() { # CALLGRIND_OUT
  grep -oE '^c?fn=\([0-9]+\) .+' "$1" | sed -E 's/^c?fn=\([0-9]+\) //' \
    | awk '!seen[$0]++' | grep -Fxf "$work/defined"
}

# A `runtime: cri` node on the kit with $1 real pods, under the recorder "${@:2}" (bench/kit-node.sh
# brings it up and down as bench/agents.sh does).
run_kit_node() {
  local pods=$1 kubelet_api i running
  shift
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$*" "$(realpath "$bin/nodepulse")" >"$work/nodepulse"
  chmod +x "$work/nodepulse"
  {
    printf '{"apiVersion": "v1", "kind": "List", "items": ['
    for i in $(seq 0 $((pods - 1))); do
      [ "$i" = 0 ] || printf ','
      printf '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "text-order-%s", "namespace": "default"}, "spec": {"nodeName": "np-bench", "terminationGracePeriodSeconds": 5, "containers": [{"name": "main", "image": "registry.k8s.io/e2e-test-images/busybox:1.37.0-1", "command": ["/bin/sh", "-c", "trap '"'"'exit 0'"'"' TERM; while :; do sleep 3600 & wait $!; done"]}]}}' "$i"
    done
    printf ']}\n'
  } >"$work/pods.json"
  (
    # The list is what this run makes: kit-node.sh's check of it does not apply (and the
    # daemon here is a recorder's wrapper script).
    REPO=$PWD NODEPULSE_BIN="$work/nodepulse" LOG_TAG=text-order TEXT_ORDER_CHECK=0
    # shellcheck source=bench/kit-node.sh
    . bench/kit-node.sh
    agent_up nodepulse text-order
    $KUBECTL apply -f "$work/pods.json" >/dev/null
    for _ in $(seq 900); do
      running=$($KUBECTL get pods -n default --field-selector status.phase=Running -o name | grep -c text-order- || true)
      [ "$running" = "$pods" ] && break
      sleep 2
    done
    log "$running of $pods pods Running"
    $KUBECTL logs text-order-0 >/dev/null || log "warning: kubectl logs failed"
    $KUBECTL exec text-order-0 -- true || log "warning: kubectl exec failed"
    kubelet_api=(curl -fsSk --cert "$ROOT/pki/apiserver-kubelet-client.crt" --key "$ROOT/pki/apiserver-kubelet-client.key")
    for path in /stats/summary /metrics/resource /pods /healthz; do
      "${kubelet_api[@]}" "https://$NODE_IP:10250$path" >/dev/null || log "warning: $path did not answer"
    done
    sleep 90
    $KUBECTL delete -f "$work/pods.json" --wait=true --timeout=900s >/dev/null
    sleep 30
    # The recorder writes its file once the node has shut down (perf stops its workload with a
    # SIGTERM too).
    kill -TERM "$AGENT_PID"
    for _ in $(seq 300); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 1; done
    agent_down
  )
}

nm --defined-only "$bin/nodepulse" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$work/defined"
if [ "$mode" = kit ]; then
  run_kit_node "$pods" valgrind --tool=callgrind --demangle=no \
    --callgrind-out-file="$work/callgrind.out"
  executed "$work/callgrind.out" | grep -Fxvf "$list" >"$work/added" || true
  echo "$(wc -l <"$work/added") functions added" >&2
  cat "$work/added" >>"$list"
elif [ "$mode" = callgrind ]; then
  start_emulator
  run_node valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
    "${daemon[@]}"
  executed "$work/callgrind.out" >"$list"
else
  recorder=(perf record -q -c 1 -e page-faults -d -o "$work/faults.data")
  if [ "$mode" = refine-kit ]; then
    run_kit_node "$pods" "${recorder[@]}"
  else
    start_emulator
    run_node "${recorder[@]}" "${daemon[@]}"
  fi
  # An instruction fetch fault has the faulting address equal to the instruction pointer.
  perf script -i "$work/faults.data" -F ip,addr,dso,sym --no-demangle 2>/dev/null \
    | awk -v binary="$(realpath "$bin/nodepulse")" '
        { n = split($0, f, " ") }
        n >= 6 && f[3] == "(" binary ")" && f[1] == f[4] { print f[2] }' \
    | grep -Fxf "$work/defined" | grep -Fxvf "$list" | sort -u >"$work/missed" || true
  echo "$(wc -l <"$work/missed") functions faulted outside the list" >&2
  cat "$work/missed" >>"$list"
fi
echo "$list: $(wc -l <"$list") functions" >&2
