"""Test oracle for the LLM core: Hugging Face transformers (PyPI), never used by milesrt itself.

  llm_oracle.py make OUT      random models of each family in OUT/<family>/ (save_pretrained, fp32)
                              with OUT/<family>/reference.json: sequences and transformers' log-probs
  llm_oracle.py check REF SAVED   loads both folders with transformers and prints
                              {"max_abs_diff": ...} of their logits on REF's sequences
"""
import json
import math
import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

torch.set_num_threads(2)


def configs():
    common = dict(vocab_size=151, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                  num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
                  rms_norm_eps=1e-6)
    return {
        "qwen3": transformers.Qwen3Config(**common, head_dim=16, tie_word_embeddings=True,
                                          rope_parameters={"rope_type": "default",
                                                           "rope_theta": 1000000.0}),
        "qwen2": transformers.Qwen2Config(**common, tie_word_embeddings=False,
                                          rope_parameters={"rope_type": "default",
                                                           "rope_theta": 10000.0}),
        "llama": transformers.LlamaConfig(**common, tie_word_embeddings=False,
                                          rope_parameters={"rope_type": "llama3",
                                                           "rope_theta": 500000.0, "factor": 8.0,
                                                           "low_freq_factor": 1.0,
                                                           "high_freq_factor": 4.0,
                                                           "original_max_position_embeddings": 64}),
        "qwen3_moe": transformers.Qwen3MoeConfig(
            **{**common, "num_hidden_layers": 3}, head_dim=16, num_experts=4,
            num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
            decoder_sparse_step=1, mlp_only_layers=[1],
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    }


def sequences(vocab):
    g = torch.Generator().manual_seed(11)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in (2, 7, 64, 150, 310)]


def logprobs(model, seq):
    ids = torch.tensor([seq])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    lp = torch.log_softmax(logits[:-1], dim=-1)
    return lp.gather(1, ids[0, 1:].unsqueeze(1)).squeeze(1).tolist(), logits


def make(out):
    for family, config in configs().items():
        torch.manual_seed(1234)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        # Random values everywhere (biases included), norms near one, so that every tensor matters.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
                else:
                    p.copy_(0.08 * torch.randn_like(p))
        model.eval()
        folder = os.path.join(out, family)
        model.save_pretrained(folder)
        seqs = sequences(config.vocab_size)
        ref = {"sequences": seqs, "logprobs": [logprobs(model, s)[0] for s in seqs]}
        with open(os.path.join(folder, "reference.json"), "w") as f:
            json.dump(ref, f)


def check(ref_dir, saved_dir):
    a = transformers.AutoModelForCausalLM.from_pretrained(ref_dir, dtype=torch.float32).eval()
    b = transformers.AutoModelForCausalLM.from_pretrained(saved_dir, dtype=torch.float32).eval()
    seqs = json.load(open(os.path.join(ref_dir, "reference.json")))["sequences"]
    worst = 0.0
    for s in seqs:
        _, la = logprobs(a, s)
        _, lb = logprobs(b, s)
        worst = max(worst, (la - lb).abs().max().item())
    print(json.dumps({"max_abs_diff": worst}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: llm_oracle.py make OUT | check REF SAVED")
