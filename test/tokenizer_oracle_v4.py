#!/usr/bin/env python3
"""Test oracle for milesrt's --bos policies: transformers 4 (PyPI, `transformers<5`, test-only, its own
venv made by .ci/install), whose tokenizer classes still apply their BOS/EOS conventions
(LlamaTokenizerFast rebuilds the post-processor from add_bos_token / add_eos_token; transformers 5
ignores both), encodes the tokenizer oracle's corpus with add_special_tokens=True for every oracle
tokenizer folder that test/tokenizer_oracle.py wrote.

    tokenizer_oracle_v4.py make TOKENIZER_DATA

writes TOKENIZER_DATA/<family>/expected_v4.jsonl (one {"ids": [...]} per corpus line) and
TOKENIZER_DATA/<family>/auto_v4.json (the class AutoTokenizer picked and the transformers version).
"""
import json
import os
import sys


def make(data_dir):
    import transformers
    from transformers import AutoTokenizer
    if int(transformers.__version__.split(".")[0]) >= 5:
        sys.exit(f"tokenizer_oracle_v4.py: needs transformers<5, found {transformers.__version__}")
    with open(os.path.join(data_dir, "corpus.jsonl")) as f:
        texts = [bytes.fromhex(json.loads(line)["hex"]).decode("utf-8", errors="replace") for line in f]
    families = sorted(d for d in os.listdir(data_dir) if os.path.isfile(os.path.join(data_dir, d, "tokenizer.json")))
    if not families:
        sys.exit(f"tokenizer_oracle_v4.py: no tokenizer folders in {data_dir}")
    for name in families:
        d = os.path.join(data_dir, name)
        hf = AutoTokenizer.from_pretrained(d)
        with open(os.path.join(d, "auto_v4.json"), "w") as f:
            json.dump({"class": type(hf).__name__, "transformers": transformers.__version__}, f)
        with open(os.path.join(d, "expected_v4.jsonl"), "w") as f:
            for s in texts:
                f.write(json.dumps({"ids": hf(s, add_special_tokens=True)["input_ids"]}) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit("usage: tokenizer_oracle_v4.py make TOKENIZER_DATA")
