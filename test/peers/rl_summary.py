#!/usr/bin/env python3
"""Summarises a GRPO run of graphs/bench_rl_{sync,async}.capnp: one JSON line with the medians over
the steps after the warm-up, from RUN_DIR/metrics.jsonl (docs/metrics.md). Per step:

  step_s              the step's wall time (`seconds`)
  rollout_s           wall time the rollout actor had work (`active_seconds`: generating, and
                      applying the published weights)
  train_s             wall time the trainer had work
  publish_s           wall time the publisher had work
  reward_s            wall time the reward and filter actors had work (mostly under rollout_s)
  overhead_s          wall time no actor had work (`idle_seconds`): the runtime's own share; in
                      the sync schedule the step time minus the parts
  train_tokens        tokens trained (prompt + response of every sequence of the batch)
  train_tokens_per_s  train_tokens / step_s: the whole loop's throughput
  steps_per_min       60 / step_s

In the async schedule the parts overlap (the engine samples while the trainer trains), so they may
add up to more than the step. --check exits 1 naming each step where a figure is inconsistent
(a part longer than the step, overhead < 0, no tokens, and with --disjoint the parts plus the
overhead longer than the step). Python is benchmark tooling here, never part of milesrt.

    rl_summary.py RUN_DIR [--warmup 1] [--label NAME] [--field KEY=VALUE ...] [--check] [--disjoint]

--field adds KEY to the line (a number when VALUE reads as one, else text).
"""
import argparse
import json
import os
import statistics
import sys

FIELDS = ["step_s", "rollout_s", "train_s", "publish_s", "reward_s", "overhead_s", "train_tokens",
          "train_tokens_per_s", "steps_per_min"]


def per_step(line, names):
    active = line.get("active_seconds", {})
    step_s = line["seconds"]
    tokens = line.get("metrics", {}).get("train_tokens", 0.0)
    row = {"step": line["step"], "step_s": step_s,
           "rollout_s": active.get(names.rollout, 0.0),
           "train_s": active.get(names.trainer, 0.0),
           "publish_s": active.get(names.publisher, 0.0),
           "reward_s": sum(active.get(a, 0.0) for a in names.reward.split(",")),
           "overhead_s": line.get("idle_seconds", float("nan")),
           "train_tokens": tokens,
           "train_tokens_per_s": tokens / step_s if step_s > 0 else 0.0,
           "steps_per_min": 60.0 / step_s if step_s > 0 else 0.0}
    return row


def problems_of(row, disjoint):
    out = []
    eps = 1e-6
    for part in ("rollout_s", "train_s", "publish_s", "reward_s", "overhead_s"):
        if row[part] > row["step_s"] + eps:
            out.append(f"{part} {row[part]:.6f} > step_s {row['step_s']:.6f}")
    if not row["overhead_s"] >= 0:
        out.append(f"overhead_s {row['overhead_s']} < 0 (or missing)")
    if row["rollout_s"] <= 0 or row["train_s"] <= 0:
        out.append(f"rollout_s {row['rollout_s']} / train_s {row['train_s']}: not positive")
    if not row["train_tokens_per_s"] > 0:
        out.append(f"train_tokens_per_s {row['train_tokens_per_s']}: not positive")
    if disjoint:
        parts = row["rollout_s"] + row["train_s"] + row["publish_s"] + row["overhead_s"]
        if parts > row["step_s"] + eps:
            out.append(f"rollout + train + publish + overhead {parts:.6f} > step_s {row['step_s']:.6f}")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("--warmup", type=int, default=1, help="steps left out first")
    p.add_argument("--label", default="")
    p.add_argument("--field", action="append", default=[], help="KEY=VALUE added to the line")
    p.add_argument("--check", action="store_true")
    p.add_argument("--disjoint", action="store_true",
                   help="with --check: the parts may not overlap (the sync schedule)")
    p.add_argument("--rollout", default="rollout")
    p.add_argument("--trainer", default="trainer")
    p.add_argument("--publisher", default="publisher")
    p.add_argument("--reward", default="reward,filter", help="comma-separated actor names")
    args = p.parse_args()
    path = os.path.join(args.run_dir, "metrics.jsonl")
    lines = [json.loads(l) for l in open(path) if l.strip()]
    timed = [per_step(l, args) for l in lines[args.warmup:]]
    if not timed:
        print(f"rl_summary: {path}: {len(lines)} steps, none after {args.warmup} warm-up steps",
              file=sys.stderr)
        sys.exit(1)
    out = {"run": args.label or os.path.basename(os.path.normpath(args.run_dir)),
           "side": "milesrt", "warmup_steps": args.warmup, "timed_steps": len(timed)}
    for kv in args.field:
        key, _, value = kv.partition("=")
        for parse in (int, float, str):
            try:
                out[key] = parse(value)
                break
            except ValueError:
                pass
    for f in FIELDS:
        out[f] = statistics.median(r[f] for r in timed)
    metrics = [l.get("metrics", {}) for l in lines[args.warmup:]]
    for name in ("reward_mean", "reward_std", "response_length_mean", "train_tokens_per_s", "mfu",
                 "publish_apply_seconds", "rollout_decode_tokens_per_s"):
        xs = [m[name] for m in metrics if name in m]
        if xs:
            out[("trainer_" if name in ("train_tokens_per_s", "mfu") else "") + name] = statistics.median(xs)
    for name in ("train_gpu_memory_peak_gib", "rollout_gpu_memory_peak_gib"):
        xs = [m[name] for m in metrics if name in m]
        if xs:
            out[name] = max(xs)
    print(json.dumps(out))
    if args.check:
        bad = [f"step {r['step']}: {msg}" for r in timed for msg in problems_of(r, args.disjoint)]
        if bad:
            print("\n".join(bad), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
