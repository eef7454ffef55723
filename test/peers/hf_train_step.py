#!/usr/bin/env python3
"""Benchmark peer of `milesrt bench train`: the plain PyTorch eager RL step on the same model folder,
the same sequence layout and the same GPU. transformers' model in bf16 with sdpa attention, a
[seqs, prompt + response] batch of random tokens, a GRPO-style clipped loss over the response
tokens' log-softmax (fp32), backward, and torch.optim.AdamW(fused=True) on the bf16 parameters.
Nothing is fused by hand or offloaded: the step a user writes first. One JSON line out.

    hf_train_step.py --model DIR [--seqs 8 --prompt 256 --response 256 --steps 5]
                     [--compile default|max-autotune] [--master fp32]

--compile wraps the forward and the loss in torch.compile with that mode (the warm-up steps, which
compile, are excluded from the timing) and compiles the optimizer step too. --master fp32 keeps
fp32 master weights beside the bf16 parameters as milesrt does: the bf16 gradients are copied into
fp32, fused AdamW steps the masters, and the bf16 parameters are copied back from them.

MFU as the whole project counts it: FLOPs per optimizer step = 6 N T + 6 L d_attn sum(s_i^2) (N all
parameters, T tokens, L layers, d_attn = heads x head_dim, s_i each sequence's length) over the step
time and 989 TFLOP/s (H100/H200 dense bf16). Python is a benchmark peer here, never part of milesrt.
"""
import argparse
import json
import time

import torch


def rl_loss(model, ids, prompt_len, adv):
    """The GRPO-style clipped loss of [seqs, prompt_len + response] token ids with advantages
    [seqs, 1]: the response tokens' log-softmax in fp32, mean over the response tokens.
    test/peers/hf_rl_loop.py trains with it too."""
    logits = model(input_ids=ids).logits[:, prompt_len - 1:-1].float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)
    ratio = torch.exp(logp - logp.detach())
    # The rollout's log-probs would enter a TIS weight; the loss uses the first forward's.
    return -torch.minimum(ratio * adv, ratio.clamp(0.8, 1.28) * adv).mean()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--seqs", type=int, default=8)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--response", type=int, default=256)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--profile", help="write the kernel time table of one step here (and its Chrome "
                   "trace beside it, PROFILE.json, for trace_table.py)")
    p.add_argument("--compile", choices=["none", "default", "max-autotune"], default="none")
    p.add_argument("--master", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (compiles)")
    args = p.parse_args()
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").cuda().train()
    model.config.use_cache = False
    params = [q for q in model.parameters()]
    masters = [q.detach().float() for q in params] if args.master == "fp32" else params
    opt = torch.optim.AdamW(masters, lr=args.lr, fused=True)
    cfg = model.config
    S, P, R = args.seqs, args.prompt, args.response
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (S, P + R), device="cuda", generator=g)
    adv = torch.randn(S, 1, device="cuda", generator=g)
    old = torch.full((S, R), -5.0, device="cuda")

    def loss_of(ids, adv):
        return rl_loss(model, ids, P, adv)

    def update():
        opt.step()
        opt.zero_grad(set_to_none=True)

    if args.compile != "none":
        loss_of = torch.compile(loss_of, mode=args.compile)
        update = torch.compile(update, mode=args.compile)
    _ = old

    def step():
        loss_of(ids, adv).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        if masters is not params:
            for m, q in zip(masters, params):
                m.grad = q.grad.float()
                q.grad = None
        update()
        if masters is not params:
            with torch.no_grad():
                torch._foreach_copy_(params, masters)

    t_warm = time.perf_counter()
    for _ in range(args.warmup):
        step()  # warm-up (and compilation)
    torch.cuda.synchronize()
    warm_secs = time.perf_counter() - t_warm
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    secs = (time.perf_counter() - t0) / args.steps
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        with open(args.profile, "w") as f:
            f.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=40))
        prof.export_chrome_trace(args.profile + ".json")
    n_params = sum(q.numel() for q in params)
    tokens = S * (P + R)
    heads_dim = cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    flops = 6 * n_params * tokens + 6 * cfg.num_hidden_layers * heads_dim * S * (P + R) ** 2
    name = "pytorch-eager-train-step" if args.compile == "none" else "pytorch-compiled-train-step"
    print(json.dumps({"peer": name, "compile": args.compile, "master": args.master,
                      "warmup_seconds": warm_secs, "model": args.model, "seqs": S, "prompt": P,
                      "response": R, "parameters": n_params, "tokens_per_step": tokens,
                      "seconds_per_step": secs, "train_tokens_per_s": tokens / secs,
                      "mfu": flops / secs / 989e12,
                      "peak_gib": torch.cuda.max_memory_allocated() / 2**30}))


if __name__ == "__main__":
    main()
