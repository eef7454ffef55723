#!/usr/bin/env python3
"""Sums the GPU kernels of a Chrome trace (libtorch's profiler: `milesrt bench train --profile`, or
torch.profiler's export) by name: total time, calls and share, largest first, with the GPU time and
the span of the trace. A profiling aid for docs/benchmarks.md, not part of milesrt.

    trace_table.py TRACE.json [--top 30]
"""
import argparse
import collections
import json


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args()
    events = json.load(open(args.trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    if not kernels:
        print("no GPU kernels in", args.trace)
        return
    total = collections.Counter()
    calls = collections.Counter()
    for e in kernels:
        total[e["name"]] += e["dur"]
        calls[e["name"]] += 1
    busy = sum(total.values())
    span = max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)
    print(f"GPU busy {busy / 1e3:.2f} ms of a {span / 1e3:.2f} ms span ({100 * busy / span:.1f}%), "
          f"{len(kernels)} kernels")
    for name, us in total.most_common(args.top):
        print(f"{us / 1e3:9.3f} ms {100 * us / busy:5.1f}% {calls[name]:6d}x  {name[:110]}")


if __name__ == "__main__":
    main()
