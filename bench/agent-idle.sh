#!/usr/bin/env bash
# The agents' idle cost (issue 26: the kubelet API's own, next to issue 16's idle figures): each
# agent in turn on the conformance kit's node (bench/kit-node.sh: private containerd, CNI bridge,
# the realk8s control plane), no pod on it, left SETTLE seconds after its Node is Ready, then
# over WINDOW seconds: its wake-ups a second (voluntary context switches summed over its threads,
# /proc/PID/task/*/status), its CPU (utime + stime), and at the end its threads and resident
# memory. `nodepulse` serves the kubelet API (the kit's x509 client CA and AlwaysAllow, as the
# kubelet is configured), `nodepulse-noapi` is the same binary and configuration with
# `enableServer: false`, so their difference is what the API costs while nobody calls it;
# `kubelet` is the real kubelet 1.36 on the same set-up. Figures to OUT_DIR/agent-idle.json.
#
# usage: REALK8S_ROOT=... bench/agent-idle.sh [ROUNDS]      (ROUNDS: 2)
# env:   SETTLE (20), WINDOW (60), ORDER ("nodepulse nodepulse-noapi kubelet"), OUT_DIR
#        (bench/results), and bench/kit-node.sh's (NODEPULSE_BIN, NODEPULSE_EXTRA_CONFIG, ...).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${1:-2} SETTLE=${SETTLE:-20} WINDOW=${WINDOW:-60}
OUT_DIR=${OUT_DIR:-$REPO/bench/results}
for n in "$ROUNDS" "$SETTLE" "$WINDOW"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS, SETTLE and WINDOW must be positive integers, not '$n'" >&2; exit 2; }
done
LOG_TAG=agent-idle
# shellcheck source=bench/kit-node.sh
. "$REPO/bench/kit-node.sh"
WITH_API=$NODEPULSE_EXTRA_CONFIG

wakeups() { # PID: voluntary context switches of the threads alive now
  { cat /proc/"$1"/task/*/status 2>/dev/null || true; } | awk '/^voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

turn() { # AGENT ROUND
  local agent=$1 w0 c0 t0 w1 c1 t1
  case "$agent" in
    nodepulse) NODEPULSE_EXTRA_CONFIG=$WITH_API ;;
    nodepulse-noapi) NODEPULSE_EXTRA_CONFIG=$WITH_API$'\n'"enableServer: false" ;;
  esac
  agent_up "${agent%-noapi}" "$2"
  sleep "$SETTLE"
  w0=$(wakeups "$AGENT_PID") c0=$(ticks "$AGENT_PID") t0=$(date +%s.%N)
  sleep "$WINDOW"
  w1=$(wakeups "$AGENT_PID") c1=$(ticks "$AGENT_PID") t1=$(date +%s.%N)
  python3 - "$OUT_DIR/agent-idle.json" "$agent" "$2" "$AGENT_PID" "$((w1 - w0))" "$((c1 - c0))" "$t0" "$t1" "$(agent_binary "$agent")" <<'PY'
import datetime, json, os, sys
out, agent, rnd, pid, woke, ticks, t0, t1, binary = sys.argv[1:]
seconds = float(t1) - float(t0)
status = {}
with open(f"/proc/{pid}/status", encoding="utf-8") as lines:
    for line in lines:
        key, _, value = line.partition(":")
        status[key] = value.split()
run = {
    "agent": agent, "round": int(rnd), "binary": binary,
    "measuredAt": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    "windowSeconds": round(seconds, 3),
    "wakeupsPerSecond": round(int(woke) / seconds, 2),
    "cpuMillicores": round(1000 * int(ticks) / os.sysconf("SC_CLK_TCK") / seconds, 3),
    "threads": int(status["Threads"][0]),
    "rssBytes": int(status["VmRSS"][0]) * 1024,
    "anonBytes": int(status["RssAnon"][0]) * 1024,
    "loadAverage": list(os.getloadavg()),
}
try:
    with open(out, encoding="utf-8") as existing:
        figures = json.load(existing)
except FileNotFoundError:
    figures = {"runs": []}
figures["runs"].append(run)
with open(out + ".tmp", "w", encoding="utf-8") as f:
    json.dump(figures, f, indent=2, sort_keys=True)
    f.write("\n")
os.replace(out + ".tmp", out)
print(f"{agent} round {rnd}: {run['wakeupsPerSecond']} wake-ups/s, {run['cpuMillicores']} millicores, "
      f"{run['threads']} threads, RSS {run['rssBytes'] / 2**20:.1f} MiB (anon {run['anonBytes'] / 2**20:.1f})")
PY
  agent_down
}

agent_binary() { # AGENT: the file that ran
  case "$1" in nodepulse*) echo "$NODEPULSE_BIN" ;; *) echo "$ROOT/bin/kubelet" ;; esac
}

mkdir -p "$OUT_DIR"
for round in $(seq "$ROUNDS"); do
  for agent in ${ORDER:-nodepulse nodepulse-noapi kubelet}; do
    turn "$agent" "$round"
  done
done
log "figures in $OUT_DIR/agent-idle.json"
