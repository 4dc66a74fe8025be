#!/usr/bin/env python3
"""Which processes the machine's CPU went to while it was busy, e.g. while an agent starts pods.

    bench/cpu-shares.py record FILE     # samples every 0.5 s until stopped (SIGTERM, ^C)
    bench/cpu-shares.py report FILE     # the longest stretch over half busy, by process group

`record` writes, every half second, the machine's busy and total ticks (`/proc/stat`) and each
process's name, own CPU ticks, its reaped children's and its start time (`/proc/PID/stat`
utime + stime, cutime + cstime, starttime), so the short-lived runc and CNI plugin processes
count for the shim or containerd that waited for them. `report` finds the longest run of
samples with the machine over half busy (with 100 pods starting on 2 cores, the creates'
stretch), and sums what each process group used in it; what no sampled process accounts for
(processes reaped by no one sampled, interrupts) is the machine's busy time less the sum. Run
`record` beside `bench/agents.sh` (one turn: `ORDER=nodepulse PODS=100`).
"""

import collections
import json
import os
import signal
import sys
import time

# Process name prefixes (as `comm` shows them, 15 characters at most) reported by name.
GROUPS = ["containerd-shim", "containerd", "kube-apiserver", "etcd", "kube-controller",
          "kubelet", "nodepulse-bench", "nodepulse", "pause", "sh"]


def record(path):
    with open(path, "w") as out:
        while True:
            with open("/proc/stat") as stat:
                cpu = [int(field) for field in stat.readline().split()[1:]]
            busy = sum(cpu) - cpu[3] - cpu[4]
            processes = {}
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/stat") as stat:
                        text = stat.read()
                except OSError:
                    continue
                name = text[text.index("(") + 1:text.rindex(")")]
                fields = text[text.rindex(")") + 2:].split()
                processes[pid] = (name, int(fields[11]) + int(fields[12]),
                                  int(fields[13]) + int(fields[14]), int(fields[19]))
            out.write(json.dumps([time.time(), busy, sum(cpu), processes]) + "\n")
            out.flush()
            time.sleep(0.5)


def group(name):
    """The name's group, else the name up to its first `/` (kworker threads by their kind)."""
    return next((g for g in GROUPS if name.startswith(g[:15])), name.split("/")[0])


def report(path):
    samples = [json.loads(line) for line in open(path)]
    busy = [(b1 - b0) / max(t1 - t0, 1) > 0.5
            for (_, b0, t0, _), (_, b1, t1, _) in zip(samples, samples[1:])]
    best, start = (0, 0), None
    for index, over in enumerate(busy + [False]):
        if over and start is None:
            start = index
        elif not over and start is not None:
            if index - start > best[1] - best[0]:
                best = (start, index)
            start = None
    first, last = samples[best[0]], samples[best[1]]
    used = collections.Counter()
    for pid, (name, own, children, started) in last[3].items():
        # The same process by its start time (a kworker renames itself by its work).
        before = first[3].get(pid)
        own0, children0 = (before[1], before[2]) if before and before[3] == started else (0, 0)
        used[group(name)] += own - own0 + children - children0
    seconds = last[0] - first[0]
    print(f"{seconds:.1f} s over half busy: {(last[1] - first[1]) / 100:.2f} busy core-seconds")
    for name, ticks in used.most_common():
        if ticks >= 5:
            print(f"  {ticks / 100:7.2f}  {name}")
    print(f"  {sum(t for t in used.values() if t < 5) / 100:7.2f}  (the rest)")
    print(f"  {(last[1] - first[1] - sum(used.values())) / 100:7.2f}  (not attributed)")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("record", "report"):
        sys.exit(__doc__)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        (record if sys.argv[1] == "record" else report)(sys.argv[2])
    except KeyboardInterrupt:
        pass
