"""Reads RUN_DIR/tensorboard/ back with TensorBoard's own readers and checks every value against
RUN_DIR/metrics.jsonl: each step's scalars (exact: float64 tensors), the staleness histogram's
counts, and the histograms of the lists the actors reported (count, sum, min, max, buckets).

usage: tensorboard_check.py RUN_DIR [TAG_THAT_MUST_EXIST...]; exit status 0 when all agree."""
import glob
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
from tensorboard.compat.proto import event_pb2
from tensorboard.util import tensor_util

problems = []


def problem(msg):
    problems.append(msg)


def main():
    run_dir = sys.argv[1]
    required = sys.argv[2:]
    steps = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    files = sorted(glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*")))
    if len(files) != 1:
        sys.exit(f"expected one event file, found {files}")

    # The framing: every record's length and data CRCs (the reader raises DataLossError).
    reader = PyRecordReader_New(files[0].encode())
    records = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            break
        records.append(event_pb2.Event.FromString(reader.record()))
    if records[0].file_version != "brain.Event:2":
        problem(f"first record: file_version {records[0].file_version!r}")
    if len(records) != 1 + len(steps):
        problem(f"{len(records)} records for {len(steps)} steps (+1 file version)")

    acc = ea.EventAccumulator(run_dir + "/tensorboard",
                              size_guidance={ea.TENSORS: 0, ea.HISTOGRAMS: 0, ea.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()
    tensors = {t: {e.step: e for e in acc.Tensors(t)} for t in tags["tensors"]}
    histos = {t: {e.step: e.histogram_value for e in acc.Histograms(t)} for t in tags["histograms"]}
    for t in required:
        if t not in tensors and t not in histos:
            problem(f"tag {t} is missing (tags: {sorted(tensors) + sorted(histos)})")

    checked = 0

    def scalar(tag, step, want):
        nonlocal checked
        ev = tensors.get(tag, {}).get(step)
        if ev is None:
            return problem(f"step {step}: no scalar {tag}")
        got = tensor_util.make_ndarray(ev.tensor_proto).item()
        if got != want:
            problem(f"step {step}: {tag} = {got!r}, metrics.jsonl has {want!r}")
        checked += 1

    def histogram(tag, step, counts):
        """counts: value -> count, from metrics.jsonl."""
        nonlocal checked
        h = histos.get(tag, {}).get(step)
        if h is None:
            return problem(f"step {step}: no histogram {tag}")
        num = sum(counts.values())
        total = sum(v * c for v, c in counts.items())
        if h.num != num or not math.isclose(h.sum, total, rel_tol=1e-12, abs_tol=1e-12):
            problem(f"step {step}: {tag} num/sum {h.num}/{h.sum}, metrics.jsonl {num}/{total}")
        if h.min != min(counts) or h.max != max(counts):
            problem(f"step {step}: {tag} min/max {h.min}/{h.max}, metrics.jsonl {min(counts)}/{max(counts)}")
        if sum(h.bucket) != num:
            problem(f"step {step}: {tag} buckets hold {sum(h.bucket)} of {num}")
        if len(counts) <= 64:  # exact buckets: one per distinct value
            if list(h.bucket_limit) != sorted(counts) or list(h.bucket) != [counts[v] for v in sorted(counts)]:
                problem(f"step {step}: {tag} buckets {list(zip(h.bucket_limit, h.bucket))} != {sorted(counts.items())}")
        checked += 1

    for s in steps:
        n = s["step"]
        scalar("run/version", n, s["version"])
        scalar("run/step_seconds", n, s["seconds"])
        for actor, v in s["busy_seconds"].items():
            scalar(f"run/busy_seconds/{actor}", n, v)
        for actor, v in s["active_seconds"].items():
            scalar(f"run/active_seconds/{actor}", n, v)
        scalar("run/idle_seconds", n, s["idle_seconds"])
        for name, v in s["counters"].items():
            scalar(f"counters/{name}", n, v)
        for name, v in s["metrics"].items():
            scalar(name, n, v)
        histogram("run/staleness", n, {float(k): v for k, v in s["staleness"].items()})
        for name, xs in s.get("lists", {}).items():
            counts = {}
            for x in xs:
                counts[x] = counts.get(x, 0) + 1
            histogram(name, n, counts)
    # Every scalar TensorBoard has must come from metrics.jsonl (nothing extra, nothing lost).
    for tag, by_step in tensors.items():
        for step in by_step:
            if step not in {s["step"] for s in steps}:
                problem(f"{tag}: step {step} is not in metrics.jsonl")
    if problems:
        print("\n".join(problems[:40]))
        sys.exit(1)
    print(f"tensorboard: {len(records)} records, {checked} values and histograms agree with metrics.jsonl")


main()
