#!/usr/bin/env python3
"""A node's requests, counted from a kube-apiserver audit log (JSON lines, one event a line, as
the conformance kit's realk8s writes it): pod GETs, pod status PATCHes, Event creates and
PATCHes, and every other kind by verb and resource, for the user `system:node:NAME` of each node
named, optionally between two RFC 3339 times (the `stageTimestamp` of the ResponseComplete
event). Issue 29 compares these for nodepulse and the kubelet under the e2e suite.

usage: audit-counts.py AUDIT_LOG NODE [NODE ...] [--since T] [--until T] [--json]
"""

import argparse
import collections
import json
import sys


def kind(event):
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return f'{event.get("verb", "")} {resource}'.strip()


# The groups issue 29 names, by (verb, resource) as the audit log writes them.
GROUPS = {
    "podGets": {("get", "pods")},
    "podStatusPatches": {("patch", "pods/status"), ("update", "pods/status")},
    "eventCreates": {("create", "events")},
    "eventPatches": {("patch", "events"), ("update", "events")},
}


def count(lines, users, since=None, until=None):
    by_user = {user: collections.Counter() for user in users}
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        user = (event.get("user") or {}).get("username")
        if user not in by_user:
            continue
        at = event.get("stageTimestamp", "")
        # RFC 3339 in UTC with a fixed layout compares as text.
        if (since and at < since) or (until and at > until):
            continue
        by_user[user][kind(event)] += 1
    return by_user


def grouped(kinds):
    figures = {}
    for group, members in GROUPS.items():
        figures[group] = sum(
            n for k, n in kinds.items() if tuple(k.split(" ", 1)) in members
        )
    figures["total"] = sum(kinds.values())
    figures["byKind"] = dict(sorted(kinds.items()))
    return figures


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("audit_log")
    parser.add_argument("nodes", nargs="+")
    parser.add_argument("--since")
    parser.add_argument("--until")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    users = [f"system:node:{node}" for node in args.nodes]
    with open(args.audit_log, encoding="utf-8") as log:
        by_user = count(log, users, args.since, args.until)
    figures = {user: grouped(kinds) for user, kinds in by_user.items()}
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
        return 0
    for user, numbers in figures.items():
        print(
            f"{user}: {numbers['podGets']} pod GETs, {numbers['podStatusPatches']} pod status "
            f"PATCHes, {numbers['eventCreates']} Event creates, {numbers['eventPatches']} Event "
            f"PATCHes ({numbers['total']} requests)"
        )
        for k, n in sorted(numbers["byKind"].items(), key=lambda item: -item[1]):
            print(f"  {n:8d}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
