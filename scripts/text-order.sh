#!/usr/bin/env bash
# Regenerates release/text-order.txt: the daemon's functions that a running node executes, which
# build.rs has the linker place side by side in release builds (README, "One node, as a process").
#
#   scripts/text-order.sh [SECONDS]   every function a node executes from start to shutdown
#                                     (`runtime: simulated` against the emulator, the debug
#                                     endpoint and /metrics scraped), counted by callgrind
#   scripts/text-order.sh --refine [SECONDS]  then, on the release build made with that list and run
#                                     natively, adds the functions whose first instruction fetch
#                                     still faulted outside the list (paths that depend on
#                                     timing, which run differently under valgrind)
#
# Run both after a change to what a running node executes, to any Cargo.toml or to the release
# profile: symbol names carry a hash of the dependency graph and the profile, so such a change
# renames most functions. A stale list only makes the resident text larger, never wrong.
# Needs valgrind, perf (--refine), binutils' nm and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=callgrind
seconds=150
if [ "${1:-}" = --refine ]; then
  mode=refine
  shift
fi
seconds="${1:-$seconds}"
list=release/text-order.txt
cargo build --release -p nodepulse -p nodepulse-emulator --bins
bin="${CARGO_TARGET_DIR:-target}/release"
work="$(mktemp -d)"
emulator=""
trap 'kill $emulator 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api_port="$(free_port)"
debug_port="$(free_port)"
"$bin/nodepulse-emulator" --address "127.0.0.1:$api_port" --kubeconfig-out "$work/kubeconfig" \
  >"$work/emulator.log" 2>&1 &
emulator=$!
for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
printf 'runtime: simulated\ndebug:\n  address: 127.0.0.1:%s\n' "$debug_port" >"$work/nodepulse.yaml"
daemon=("$bin/nodepulse" --config "$work/nodepulse.yaml" --kubeconfig "$work/kubeconfig"
  --node-name text-order)

# Runs "$@" (the daemon, under a recorder) for $seconds, scraping the endpoint half-way.
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

nm --defined-only "$bin/nodepulse" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$work/defined"
if [ "$mode" = callgrind ]; then
  run_node valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
    "${daemon[@]}"
  # callgrind names each function once as `fn=(id) name` (or `cfn=`); keep those the binary
  # defines, in the order callgrind first met them.
  grep -oE '^c?fn=\([0-9]+\) .+' "$work/callgrind.out" | sed -E 's/^c?fn=\([0-9]+\) //' \
    | awk '!seen[$0]++' | grep -Fxf "$work/defined" >"$list"
else
  run_node perf record -q -c 1 -e page-faults -d -o "$work/faults.data" "${daemon[@]}"
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
