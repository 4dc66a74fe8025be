#!/usr/bin/env python3
"""Where a pod's start goes, from the two logs that time it from outside the agent: the API
server's audit log (the pod's create, the node's status PATCHes of it) and containerd's log
(RunPodSandbox, CreateContainer, StartContainer: each request and its answer, at info level
in containerd 1.6). For every pod whose name starts with PREFIX, each step's time from the one
before; printed as p50 / p90 / max over the pods, in milliseconds.

usage: timeline.py AUDIT_LOG CONTAINERD_LOG NODE PREFIX [--since T] [--until T]
(`bench/agents.sh` leaves containerd's log in $REALK8S_ROOT/bench-AGENT-ROUND/runtime/.)
"""

import argparse
import collections
import datetime
import json
import math
import re
import sys

STEPS = [
    ("created", "the pod's create answered (audit)"),
    ("sandbox_sent", "RunPodSandbox received by containerd"),
    ("sandbox_done", "RunPodSandbox answered"),
    ("create_sent", "CreateContainer received"),
    ("create_done", "CreateContainer answered"),
    ("start_sent", "StartContainer received"),
    ("start_done", "StartContainer answered"),
    ("patched", "the node's first pod status PATCH after that answered (audit)"),
]


def when(text):
    """An RFC 3339 time with up to nanoseconds, as seconds since the epoch."""
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", text)
    if not match:
        return None
    base = datetime.datetime.fromisoformat(match.group(1)).replace(tzinfo=datetime.timezone.utc)
    fraction = float("0." + match.group(2)) if match.group(2) else 0.0
    return base.timestamp() + fraction


def outside(at, window):
    since, until = window
    return (since is not None and at < since) or (until is not None and at > until)


def audit(path, node, prefix, window):
    created, patches = {}, collections.defaultdict(list)
    user = f"system:node:{node}"
    with open(path, encoding="utf-8") as log:
        for line in log:
            if prefix not in line:
                continue
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            name = ref.get("name", "")
            if event.get("stage") != "ResponseComplete" or not name.startswith(prefix):
                continue
            at = when(event.get("stageTimestamp", ""))
            if at is None or outside(at, window):
                continue
            if event["verb"] == "create" and ref.get("resource") == "pods" and not ref.get("subresource"):
                created[name] = at
            elif (event["user"]["username"] == user and ref.get("subresource") == "status"
                  and event["verb"] in ("patch", "update")):
                patches[name].append(at)
    return created, patches


SANDBOX = re.compile(r'RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),')
SANDBOX_ID = re.compile(r'returns sandbox id \\"([0-9a-f]+)\\"')
CREATE = re.compile(r'CreateContainer within sandbox \\"([0-9a-f]+)\\"')
CONTAINER_ID = re.compile(r'returns container id \\"([0-9a-f]+)\\"')
START = re.compile(r'StartContainer for \\"([0-9a-f]+)\\"')


def containerd(path, prefix, window):
    steps = collections.defaultdict(dict)
    sandbox_pod, container_pod = {}, {}
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            stamp = re.match(r'time="([^"]+)"', line)
            at = when(stamp.group(1)) if stamp else None
            if at is None or outside(at, window):
                continue
            if match := SANDBOX.search(line):
                pod = match.group(1)
                if not pod.startswith(prefix):
                    continue
                if sandbox := SANDBOX_ID.search(line):
                    sandbox_pod[sandbox.group(1)] = pod
                    steps[pod].setdefault("sandbox_done", at)
                else:
                    steps[pod].setdefault("sandbox_sent", at)
            elif match := CREATE.search(line):
                pod = sandbox_pod.get(match.group(1))
                if pod is None:
                    continue
                if container := CONTAINER_ID.search(line):
                    container_pod[container.group(1)] = pod
                    steps[pod].setdefault("create_done", at)
                else:
                    steps[pod].setdefault("create_sent", at)
            elif match := START.search(line):
                pod = container_pod.get(match.group(1))
                if pod is None:
                    continue
                key = "start_done" if "returns successfully" in line else "start_sent"
                steps[pod].setdefault(key, at)
    return steps


def spread(values):
    values = sorted(values)
    if not values:
        return "-"

    def pick(q):
        return values[min(len(values), max(1, math.ceil(q * len(values)))) - 1]

    return f"{pick(0.5) * 1000:7.0f} {pick(0.9) * 1000:7.0f} {values[-1] * 1000:7.0f}"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("audit_log")
    parser.add_argument("containerd_log")
    parser.add_argument("node")
    parser.add_argument("prefix")
    parser.add_argument("--since", help="RFC 3339, UTC: only what happened after")
    parser.add_argument("--until", help="RFC 3339, UTC: only what happened before")
    args = parser.parse_args(argv)
    window = (when(args.since) if args.since else None, when(args.until) if args.until else None)
    created, patches = audit(args.audit_log, args.node, args.prefix, window)
    steps = containerd(args.containerd_log, args.prefix, window)
    for pod, at in created.items():
        steps[pod]["created"] = at
        done = steps[pod].get("start_done")
        later = [p for p in patches.get(pod, []) if done is not None and p >= done]
        if later:
            steps[pod]["patched"] = later[0]
    print(f"{len(created)} pods created; ms from the step before: p50 p90 max")
    for (step, what), (before, _) in zip(STEPS[1:], STEPS):
        deltas = [s[step] - s[before] for s in steps.values() if step in s and before in s]
        print(f"{spread(deltas)}  {what} ({len(deltas)} pods)")
    whole = [s["patched"] - s["created"] for s in steps.values() if "patched" in s and "created" in s]
    print(f"{spread(whole)}  in all: create answered -> that PATCH answered")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
