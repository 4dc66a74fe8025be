#!/usr/bin/env python3
"""One turn of bench/kubelet-api.sh as a run in OUT (a JSON file {"machine": ..., "runs": [...]},
created when missing): per operation (logs, exec, get) the wall time of each kubectl run
(count, p50, p90, max, mean), and the agent's and containerd's CPU over the loop, in all and per
run; the agent's resident memory and threads after the loops; the load average before and after.

usage: kubelet-api-figures.py --out OUT --agent A --round R --node N --log-bytes B
         --samples FILE (lines "OP SECONDS") --cpu FILE (lines "OP AGENT_TICKS RUNTIME_TICKS")
         --pid AGENT_PID --load-before "L1 L5 L15" --binary PATH
"""

import argparse
import datetime
import json
import os
import platform
import statistics

TICK = os.sysconf("SC_CLK_TCK")


def percentile(sorted_values, q):
    # nearest rank, as nodepulse-bench's figures are taken
    rank = max(1, round(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def wall(samples):
    values = sorted(samples)
    return {
        "count": len(values),
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "max": values[-1],
        "mean": statistics.fmean(values),
    }


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status", encoding="utf-8") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return {"rssBytes": int(fields["VmRSS"][0]) * 1024, "threads": int(fields["Threads"][0])}


def machine():
    with open("/proc/meminfo", encoding="utf-8") as meminfo:
        memory = meminfo.readline().split(":", 1)[1].strip()
    cpu = ""
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cores": os.cpu_count(), "cpu": cpu, "kernel": platform.release(), "memory": memory}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--out", "--agent", "--node", "--samples", "--cpu", "--load-before", "--binary"):
        parser.add_argument(flag, required=True)
    for flag in ("--round", "--log-bytes", "--pid"):
        parser.add_argument(flag, required=True, type=int)
    args = parser.parse_args()

    samples = {}
    with open(args.samples, encoding="utf-8") as lines:
        for line in lines:
            op, seconds = line.split()
            samples.setdefault(op, []).append(float(seconds))
    ops = {op: {"wallSeconds": wall(values)} for op, values in samples.items()}
    with open(args.cpu, encoding="utf-8") as lines:
        for line in lines:
            op, agent_ticks, runtime_ticks = line.split()
            runs = ops[op]["wallSeconds"]["count"]
            agent, runtime = int(agent_ticks) / TICK, int(runtime_ticks) / TICK
            ops[op]["agentCpuSeconds"] = {"total": agent, "perRun": agent / runs}
            ops[op]["runtimeCpuSeconds"] = {"total": runtime, "perRun": runtime / runs}
    run = {
        "agent": args.agent,
        "round": args.round,
        "node": args.node,
        "binary": args.binary,
        "logBytes": args.log_bytes,
        "measuredAt": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "loadAverage": {
            "before": [float(x) for x in args.load_before.split()],
            "after": list(os.getloadavg()),
        },
        "ops": ops,
        "agentAfter": proc_status(args.pid),
    }
    try:
        with open(args.out, encoding="utf-8") as existing:
            figures = json.load(existing)
    except FileNotFoundError:
        figures = {"runs": []}
    figures["machine"] = machine()
    figures["runs"].append(run)
    with open(args.out + ".tmp", "w", encoding="utf-8") as out:
        json.dump(figures, out, indent=2, sort_keys=True)
        out.write("\n")
    os.replace(args.out + ".tmp", args.out)
    for op, figure in ops.items():
        w = figure["wallSeconds"]
        print(
            f"{args.agent} round {args.round} {op}: p50 {w['p50'] * 1000:.0f} ms, p90 "
            f"{w['p90'] * 1000:.0f} ms, max {w['max'] * 1000:.0f} ms (n={w['count']}); agent CPU "
            f"{figure['agentCpuSeconds']['perRun'] * 1000:.1f} ms a run, containerd "
            f"{figure['runtimeCpuSeconds']['perRun'] * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
