"""Test oracle for LoRA: PyPI's peft on transformers, never used by milesrt itself.

  peft_oracle.py make OUT          a random Qwen3 base (save_pretrained, fp32) in OUT/base and two
                                   peft LoRA adapters of it with non-zero B (OUT/adapter: every
                                   linear module, r 4; OUT/adapter_rslora: q_proj, v_proj with
                                   use_rslora), and OUT/reference.json: sequences and the log-probs
                                   of base + each adapter
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
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


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
