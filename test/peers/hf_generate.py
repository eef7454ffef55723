#!/usr/bin/env python3
"""Benchmark peer of `milesrt bench rollout`: transformers' plain `generate` (eager, sdpa, bf16) on
the same model folder, the same prompts (the JSON lines `milesrt bench rollout --save-prompts`
wrote) and the same GPU. Every sequence generates exactly --new-tokens tokens (no EOS), sampling
at temperature 1 over the full vocabulary, as the milesrt side does. One JSON line out.

    hf_generate.py --model DIR --prompts FILE --batch B --new-tokens N [--static-compile]
    hf_generate.py --make-model DIR --shape qwen3-0.6b|qwen3-1.7b|qwen3-8b|qwen3-30b-a3b

--make-model writes a Qwen3-shaped model with random weights (initialised on the GPU, saved as
safetensors) for both sides to load. Python is a benchmark peer here, never part of milesrt.
"""
import argparse
import json
import time

import torch

SHAPES = {
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-1.7b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
    "qwen3-30b-a3b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=48,
                          num_attention_heads=32, num_key_value_heads=4, head_dim=128, tie_word_embeddings=False,
                          num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                          decoder_sparse_step=1, norm_topk_prob=True),
}


def make_model(path, shape, layers):
    from transformers import AutoConfig, AutoModelForCausalLM
    spec = dict(SHAPES[shape])
    if layers:
        spec["num_hidden_layers"] = layers
    model_type = "qwen3_moe" if "num_experts" in spec else "qwen3"
    cfg = AutoConfig.for_model(model_type, rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu",
                               max_position_embeddings=40960, torch_dtype="bfloat16", **spec)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.save_pretrained(path, safe_serialization=True)
    print(json.dumps({"made": path, "shape": shape, "parameters": sum(p.numel() for p in model.parameters())}))


def run(args):
    from transformers import AutoModelForCausalLM
    prompts = [json.loads(line)["prompt_ids"] for line in open(args.prompts)]
    prompts = (prompts * ((args.batch + len(prompts) - 1) // len(prompts)))[: args.batch]
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").cuda().eval()
    ids = torch.tensor(prompts, device="cuda")
    kw = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=args.new_tokens,
              min_new_tokens=args.new_tokens, eos_token_id=None, pad_token_id=0)
    if args.static_compile:
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        model.generate(ids[: min(args.batch, 4)], **dict(kw, max_new_tokens=4, min_new_tokens=4))  # warm-up
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = model.generate(ids, **kw)
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
    generated = (out.shape[1] - ids.shape[1]) * out.shape[0]
    print(json.dumps({"peer": "transformers generate" + (" static+compile" if args.static_compile else " eager"),
                      "batch": args.batch, "prompt_len": ids.shape[1], "new_tokens": args.new_tokens,
                      "seconds": secs, "generated_tokens": generated, "tokens_per_s": generated / secs,
                      "ms_per_step": secs / args.new_tokens * 1e3,
                      "peak_gpu_allocated_mib": torch.cuda.max_memory_allocated() / 2**20}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--prompts")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--static-compile", action="store_true")
    p.add_argument("--make-model")
    p.add_argument("--shape", default="qwen3-0.6b", choices=sorted(SHAPES))
    p.add_argument("--layers", type=int, default=0)
    args = p.parse_args()
    if args.make_model:
        make_model(args.make_model, args.shape, args.layers)
    else:
        run(args)


if __name__ == "__main__":
    main()
