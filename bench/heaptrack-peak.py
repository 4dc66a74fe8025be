#!/usr/bin/env python3
"""What was live at a heaptrack recording's peak, from the recording itself.

    bench/heaptrack-peak.py RECORDING.zst [FRAME ...]

heaptrack_print's peak figures are per call site; this says how many allocations of which
size a site held at the moment the whole heap peaked, which tells a few large blocks from
many small ones. FRAME selects the backtraces that contain every FRAME given (substrings of
function names), e.g. `reserve_inner poll_read_from_io` for hyper's read buffers; without
one, the largest sizes of all live allocations are listed.

heaptrack's interpreted format, in hex: `s` strings, `i` instruction pointers (module, then
function, file, line for each inlined frame), `t` trace nodes (ip, parent), `a` allocation
kinds (size, trace), `+`/`-` an allocation or free of a kind, `c` timestamps (ms).
"""

import collections
import subprocess
import sys


def main():
    path, wanted = sys.argv[1], sys.argv[2:]
    stream = subprocess.Popen(["zstdcat", path], stdout=subprocess.PIPE, text=True).stdout
    strings, ips, traces, kinds, live = [None], [None], [(0, 0)], [], []
    total = peak = now = peak_at = 0
    at_peak, rising = None, False
    for line in stream:
        tag = line[0]
        if tag == "+":
            kind = int(line[2:], 16)
            live[kind] += 1
            total += kinds[kind][0]
            if total > peak:
                peak, peak_at, rising = total, now, True
        elif tag == "-":
            if rising:  # the first free after a new peak: the peak's moment
                at_peak, rising = live[:], False
            kind = int(line[2:], 16)
            live[kind] -= 1
            total -= kinds[kind][0]
        elif tag == "a":
            size, trace = line[2:].split()
            kinds.append((int(size, 16), int(trace, 16)))
            live.append(0)
        elif tag == "t":
            ip, parent = line[2:].split()
            traces.append((int(ip, 16), int(parent, 16)))
        elif tag == "i":
            fields = [int(field, 16) for field in line[2:].split()[2:]]
            ips.append(fields[0::3])
        elif tag == "s":
            rest = line[2:].rstrip("\n")
            strings.append(rest.split(" ", 1)[1] if " " in rest else "")
        elif tag == "c":
            now = int(line[2:], 16)
    if at_peak is None or rising:
        at_peak = live

    def frames(trace):
        names = []
        while trace:
            ip, trace = traces[trace]
            names += [strings[function] or "" for function in ips[ip]]
        return names

    print(f"peak {peak / 2**20:.2f} MiB at {peak_at / 1000:.1f} s")
    matches, count, held = {}, collections.Counter(), collections.Counter()
    for kind, (size, trace) in enumerate(kinds[: len(at_peak)]):
        if not at_peak[kind]:
            continue
        if trace not in matches:
            names = frames(trace)
            matches[trace] = all(any(w in name for name in names) for w in wanted)
        if matches[trace]:
            count[size] += at_peak[kind]
            held[size] += size * at_peak[kind]
    print(f"selected, live at the peak: {sum(held.values()) / 2**20:.2f} MiB "
          f"in {sum(count.values())} allocations")
    for size, bytes_held in held.most_common(15):
        print(f"{size:>10} bytes x {count[size]:>7} = {bytes_held / 2**20:8.2f} MiB")


if __name__ == "__main__":
    main()
