#!/usr/bin/env python3
"""Benchmark peer of graphs/bench_rl_sync.capnp: the same GRPO loop written plainly, one model in
one process on the same GPU. Per step: the next 32 prompts of the same prompts file (token ids),
8 samples each with transformers' eager `generate` (sampling at temperature 1 over the full
vocabulary, exactly --new-tokens tokens: the milesrt side's model folder has no tokenizer, so no
end-of-sequence token stops it either), the same reward (the share of even token ids), GRPO
advantages per group ((r - mean) / (std + 1e-6)), and the eager training step of
test/peers/hf_train_step.py (its rl_loss, in micro-batches of --micro-seqs sequences, gradient
clipping at 1.0, torch.optim.AdamW(fused=True) on the bf16 parameters). Generation uses the module
that trains, so publishing costs nothing (publish_s = 0). One JSON line out, with the fields of
test/peers/rl_summary.py (medians over the timed steps); overhead_s is the step time less
generation, training and publishing (the reward, the advantages, moving tensors).

    hf_rl_loop.py --model DIR --prompts FILE [--prompts-per-step 32 --samples 8 --new-tokens 1024
                  --steps 1 --warmup 0 --micro-seqs 4]
    hf_rl_loop.py --make-prompts FILE [--count 256 --prompt-len 128 --vocab 151936 --seed 1]

--make-prompts writes the prompts file both sides read: one {"prompt_ids": [...]} per line, random
token ids. Python is a benchmark peer here, never part of milesrt.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_train_step import rl_loss  # noqa: E402  (the same training step's loss)


def make_prompts(path, count, prompt_len, vocab, seed):
    rng = random.Random(seed)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        for _ in range(count):
            f.write(json.dumps({"prompt_ids": [rng.randrange(vocab) for _ in range(prompt_len)]}) + "\n")
    print(json.dumps({"made": path, "prompts": count, "prompt_len": prompt_len, "vocab": vocab}))


def even_token_share(out):
    """The reward of each row of `out` (response token ids): the share of even ids."""
    return (out % 2 == 0).float().mean(dim=1)


def group_advantages(rewards, samples):
    r = rewards.view(-1, samples)
    adv = (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, unbiased=False, keepdim=True) + 1e-6)
    return adv.reshape(-1, 1)


def now():
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def loop_step(model, opt, params, prompts, args):
    """One GRPO step; the times of its parts."""
    t0 = now()
    ids = torch.tensor(prompts, device=args.device).repeat_interleave(args.samples, dim=0)
    model.eval()
    with torch.no_grad():
        # All ones: inferred from pad_token_id, the mask would hide prompt tokens that happen to be 0.
        seqs = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                              max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                              eos_token_id=None, pad_token_id=0, use_cache=True)
    t1 = now()
    P = ids.shape[1]
    rewards = even_token_share(seqs[:, P:])
    adv = group_advantages(rewards, args.samples)
    reward_mean = rewards.mean().item()
    t2 = now()
    model.train()
    n = seqs.shape[0]
    for i in range(0, n, args.micro_seqs):
        part = slice(i, min(n, i + args.micro_seqs))
        # Every response has the same length: the micro-batches' token means weighted by share.
        loss = rl_loss(model, seqs[part], P, adv[part]) * ((part.stop - part.start) / n)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    t3 = now()
    tokens = seqs.numel()
    step_s = t3 - t0
    return {"step_s": step_s, "rollout_s": t1 - t0, "train_s": t3 - t2, "publish_s": 0.0,
            "reward_s": t2 - t1, "overhead_s": step_s - (t1 - t0) - (t3 - t2),
            "train_tokens": float(tokens), "train_tokens_per_s": tokens / step_s,
            "steps_per_min": 60.0 / step_s, "reward_mean": reward_mean,
            "response_length_mean": float(seqs.shape[1] - P)}


def run(args):
    from transformers import AutoModelForCausalLM
    prompts = [json.loads(l)["prompt_ids"] for l in open(args.prompts) if l.strip()]
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").to(args.device)
    model.config.use_cache = False  # the training forward keeps no cache; generate still uses one
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-6, fused=args.device == "cuda")
    torch.manual_seed(1)
    # A short untimed warm-up of both parts (kernels, allocator), as the milesrt side's first step.
    short = argparse.Namespace(**dict(vars(args), new_tokens=4))
    loop_step(model, opt, params, prompts[: args.prompts_per_step], short)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    rows, at = [], 0
    for k in range(args.warmup + args.steps):
        batch = [prompts[(at + i) % len(prompts)] for i in range(args.prompts_per_step)]
        at += args.prompts_per_step
        row = loop_step(model, opt, params, batch, args)
        print(json.dumps(dict(row, step=k + 1)), file=sys.stderr)
        if k >= args.warmup:
            rows.append(row)
    out = {"run": args.label, "side": "transformers generate + eager PyTorch step",
           "model": args.model, "prompts_per_step": args.prompts_per_step,
           "samples": args.samples, "new_tokens": args.new_tokens, "warmup_steps": args.warmup,
           "timed_steps": len(rows)}
    for f in rows[0]:
        out[f] = statistics.median(r[f] for r in rows)
    if args.device == "cuda":
        out["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--prompts")
    p.add_argument("--prompts-per-step", type=int, default=32)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=1024)
    p.add_argument("--steps", type=int, default=1, help="timed steps")
    p.add_argument("--warmup", type=int, default=0, help="untimed full steps first")
    p.add_argument("--micro-seqs", type=int, default=4, help="sequences per forward/backward")
    p.add_argument("--label", default="peer")
    p.add_argument("--device", default="cuda", help="cuda; cpu only to try the script on a tiny model")
    p.add_argument("--make-prompts")
    p.add_argument("--count", type=int, default=256)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.make_prompts:
        make_prompts(args.make_prompts, args.count, args.prompt_len, args.vocab, args.seed)
    else:
        run(args)


if __name__ == "__main__":
    main()
