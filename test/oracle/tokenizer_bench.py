#!/usr/bin/env python3
"""Tokenizer speed, milesrt beside HF `tokenizers` (the peer; milesrt never uses Python), in one run:

    tokenizer_bench.py --milesrt build/milesrt --model build/test/tokenizer_data/qwen2 [--threads N]
                       [--corpus FILE] [--seconds S]

Without --corpus it writes one (BENCH_CORPUS, beside the model folder): Python's standard library
sources as English and code, and test/tokenizer_oracle.py's multilingual corpus (CJK, Arabic, Cyrillic,
emoji, digits, whitespace runs, special-token text), cut into documents of at most 8 KiB.
HF's single-thread figure is `Tokenizer.encode` in a Python loop, one document per call (what a caller
does); its batch figure is `encode_batch` with RAYON_RS_NUM_THREADS threads. Both sides must produce
the same ids (FNV-1a hash of all ids), or the script fails.
"""
import argparse
import json
import os
import subprocess
import sys
import sysconfig
import time

STDLIB_FILES = ["argparse.py", "typing.py", "inspect.py", "dataclasses.py", "subprocess.py", "pathlib.py",
                "json/encoder.py", "json/decoder.py", "email/message.py", "http/client.py", "unittest/case.py",
                "asyncio/base_events.py", "collections/__init__.py", "logging/__init__.py", "tarfile.py",
                "zipfile.py", "pydoc.py", "doctest.py", "difflib.py", "textwrap.py"]


def cut(text, limit=8192):
    docs, cur = [], []
    size = 0
    for line in text.splitlines(keepends=True):
        if size + len(line) > limit and cur:
            docs.append("".join(cur))
            cur, size = [], 0
        cur.append(line)
        size += len(line)
    if cur:
        docs.append("".join(cur))
    return docs


def write_corpus(path):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, ".."))
    import tokenizer_oracle  # the multilingual test corpus
    docs = []
    stdlib = sysconfig.get_paths()["stdlib"]
    for f in STDLIB_FILES:
        with open(os.path.join(stdlib, f), encoding="utf-8") as fh:
            docs += cut(fh.read())
    multi = "".join(b.decode("utf-8", errors="replace") + "\n" for b in tokenizer_oracle.corpus())
    docs += cut(multi) * 4
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")


def fnv1a(all_ids):
    h = 0xcbf29ce484222325
    mask = (1 << 64) - 1
    for ids in all_ids:
        for v in list(ids) + [0xFFFFFFFF]:
            v &= 0xFFFFFFFF
            for k in range(4):
                h ^= (v >> (8 * k)) & 0xFF
                h = (h * 0x100000001b3) & mask
    return "%016x" % h


def timed(seconds, fn):
    passes, t0 = 0, time.perf_counter()
    while True:
        fn()
        passes += 1
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return passes, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--milesrt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    os.environ["RAYON_RS_NUM_THREADS"] = str(a.threads)  # read when tokenizers starts its pool
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    from tokenizers import Tokenizer
    import tokenizers

    corpus = a.corpus or os.path.join(os.path.dirname(os.path.abspath(a.model)), "BENCH_CORPUS.jsonl")
    if not a.corpus:
        write_corpus(corpus)
    docs = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8") if line.strip()]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    mb = nbytes / 1e6

    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    ids = [tok.encode(d, add_special_tokens=False).ids for d in docs]  # warm-up and the reference ids
    hf_hash = fnv1a(ids)
    p1, t1 = timed(a.seconds, lambda: [tok.encode(d, add_special_tokens=False) for d in docs])
    tok.encode_batch(docs, add_special_tokens=False)
    pb, tb = timed(a.seconds, lambda: tok.encode_batch(docs, add_special_tokens=False))

    r = subprocess.run([a.milesrt, "bench", "tokenize", "--model", a.model, "--corpus", corpus,
                        "--threads", str(a.threads)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("milesrt bench tokenize failed: " + r.stderr)
    m = json.loads(r.stdout)
    out = {
        "corpus": corpus, "documents": len(docs), "bytes": nbytes, "tokens": sum(map(len, ids)),
        "threads": a.threads, "tokenizers_version": tokenizers.__version__,
        "hf_single_mb_per_s": round(mb * p1 / t1, 2), "hf_batch_mb_per_s": round(mb * pb / tb, 2),
        "milesrt_single_mb_per_s": round(m["single_thread"]["mb_per_s"], 2),
        "milesrt_batch_mb_per_s": round(m["batch"]["mb_per_s"], 2),
        "same_ids": m["ids_fnv1a"] == hf_hash and m["tokens"] == sum(map(len, ids)),
    }
    print(json.dumps(out))
    if not out["same_ids"]:
        sys.exit("milesrt and HF gave different ids on the corpus (hash %s vs %s)" % (m["ids_fnv1a"], hf_hash))


if __name__ == "__main__":
    main()
