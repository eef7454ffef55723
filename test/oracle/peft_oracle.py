"""Test oracle for LoRA: PyPI's peft on transformers, never used by milesrt itself.

  peft_oracle.py make OUT          a random Qwen3 base (save_pretrained, fp32) in OUT/base and two
                                   peft LoRA adapters of it with non-zero B (OUT/adapter: every
                                   linear module, r 4; OUT/adapter_rslora: q_proj, v_proj with
                                   use_rslora), and OUT/reference.json: sequences and the log-probs
                                   of base + each adapter; likewise a random Qwen3-MoE base in
                                   OUT/moe_base with OUT/moe_adapter: target_parameters on the
                                   fused experts (mlp.experts.gate_up_proj, mlp.experts.down_proj)
                                   and q_proj, v_proj
  peft_oracle.py check BASE ADAPTER SEQS.json
                                   loads BASE with the peft adapter folder ADAPTER and prints
                                   {"logprobs": [...]} of the sequences in SEQS.json
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
import peft  # noqa: E402

torch.set_num_threads(2)


def logprobs(model, seqs):
    out = []
    for seq in seqs:
        ids = torch.tensor([seq])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float()
        lp = torch.log_softmax(logits[:-1], dim=-1)
        out.append(lp.gather(1, ids[0, 1:].unsqueeze(1)).squeeze(1).tolist())
    return out


def make(out):
    torch.manual_seed(3)
    cfg = transformers.Qwen3Config(vocab_size=151, hidden_size=48, intermediate_size=80,
                                   num_hidden_layers=2, num_attention_heads=6,
                                   num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                                   rms_norm_eps=1e-6, tie_word_embeddings=True,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    base = transformers.Qwen3ForCausalLM(cfg).float().eval()
    base.save_pretrained(os.path.join(out, "base"))
    g = torch.Generator().manual_seed(5)
    seqs = [torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist() for n in (3, 17, 60)]
    ref = {"sequences": seqs}
    variants = {
        "adapter": peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, init_lora_weights=False,
                                   target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"]),
        "adapter_rslora": peft.LoraConfig(r=2, lora_alpha=3, use_rslora=True,
                                          init_lora_weights=False,
                                          target_modules=["v_proj", "q_proj"]),
    }
    for name, lora in variants.items():
        model = transformers.Qwen3ForCausalLM.from_pretrained(os.path.join(out, "base")).eval()
        model = peft.get_peft_model(model, lora)
        # init_lora_weights=False gives B non-zero: the adapter changes the log-probs.
        model.save_pretrained(os.path.join(out, name))
        ref[name] = logprobs(model.eval(), seqs)
    ref["base"] = logprobs(base, seqs)
    make_moe(out, seqs, ref)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


def make_moe(out, seqs, ref):
    torch.manual_seed(4)
    # 2I != hidden_size, so a mix-up of a fused parameter's in and out would show in the shapes.
    cfg = transformers.Qwen3MoeConfig(vocab_size=151, hidden_size=48, intermediate_size=80,
                                      moe_intermediate_size=32, num_experts=4,
                                      num_experts_per_tok=2, decoder_sparse_step=1,
                                      norm_topk_prob=True, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, head_dim=16,
                                      max_position_embeddings=512, rms_norm_eps=1e-6,
                                      tie_word_embeddings=True,
                                      rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    base = transformers.Qwen3MoeForCausalLM(cfg).float().eval()
    base.save_pretrained(os.path.join(out, "moe_base"))
    ref["moe_base"] = logprobs(base, seqs)
    # peft's ParamWrapper requires lora_dropout 0.
    lora = peft.LoraConfig(r=3, lora_alpha=5, lora_dropout=0.0, init_lora_weights=False,
                           target_modules=["q_proj", "v_proj"],
                           target_parameters=["mlp.experts.gate_up_proj",
                                              "mlp.experts.down_proj"])
    model = transformers.Qwen3MoeForCausalLM.from_pretrained(os.path.join(out, "moe_base")).eval()
    model = peft.get_peft_model(model, lora)
    model.save_pretrained(os.path.join(out, "moe_adapter"))
    ref["moe_adapter"] = logprobs(model.eval(), seqs)


def check(base_dir, adapter_dir, seqs_file):
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(model, adapter_dir).eval()
    with open(seqs_file) as f:
        seqs = json.load(f)["sequences"]
    print(json.dumps({"logprobs": logprobs(model, seqs)}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
