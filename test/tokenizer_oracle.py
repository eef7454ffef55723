#!/usr/bin/env python3
"""Test oracle for milesrt's tokenizer: HF `tokenizers` and `transformers` (PyPI) produce the expected
ids, decoded text and chat text; the C++ tests compare against what this script writes.

    tokenizer_oracle.py make OUT TEMPLATES_DIR

trains one byte-level BPE (>= 32k merges, on the Qwen2 pre-tokenizer regex), and two smaller ones (about
8k merges) on DeepSeek-V3's Split sequence and on GPT-4o's o200k pattern, and writes, under OUT:
  <family>/tokenizer.json, tokenizer_config.json   families: qwen2, qwen3, llama3, gpt2, flags,
                                                   deepseek_v3, o200k, llama3_bos, llama3_bos_null,
                                                   llama3_off, deepseek_v3_bos, deepseek_v3_both
                                                   (+ config.json for the last five)
  corpus.jsonl          one test string per line, as hex of its bytes (some are invalid UTF-8)
  <family>/expected.jsonl   per corpus line: ids (with and without special tokens, and AutoTokenizer's
                        with them), decode of them, and the pre-tokenizer's pieces (pre_tokenize_str)
  chat_cases.jsonl      conversations; <family>/chat_expected.jsonl: apply_chat_template text and ids
  <family>/auto.json    what transformers' AutoTokenizer made of the folder: class, bos_token, eos_token

expected.jsonl's ids_auto are transformers' `AutoTokenizer.from_pretrained(dir)(text,
add_special_tokens=True)`, which reads tokenizer_config.json too (and config.json, written for the
families that mimic a real model's folder). The *_bos, *_both, *_off families vary tokenizer_config.json's
add_bos_token / add_eos_token and the form of bos_token / eos_token (string or AddedToken object) over a
TemplateProcessing or a null post_processor; see bos_eos_families.

Invalid UTF-8: HF's encode takes a str, so bytes must be decoded first; the oracle decodes them the way
Python does with errors="replace" (each maximal invalid subpart becomes one U+FFFD), which is what
milesrt's encode does with raw bytes.
"""
import json
import os
import random
import sys

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# DeepSeek-V3's tokenizer.json: a Sequence of three isolating Splits (digits in runs of up to three; CJK
# ideographs and kana, U+4E00-U+9FA5 and U+3040-U+30FF; then the main pattern), then ByteLevel without
# a regex.
DEEPSEEK_V3_SPLITS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+""",
]
# GPT-4o's o200k pattern (tiktoken's o200k_base): case-aware letter runs with optional contractions.
O200K_RE = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

SYLLABLES = ["ka", "to", "ri", "mu", "sen", "dra", "pol", "ve", "qui", "zy", "th", "ch", "ou", "ea", "ing",
             "er", "st", "pr", "bl", "gn", "Th", "The", "An", "def", "int", "self", "return", "    ", "\t",
             "当", "的", "是", "人", "中", "国", "语", "言", "日本", "語", "を", "は", "ка", "ро", "ва", "ст",
             "ни", "ال", "م", "ر", "ب", "س", "ت", "ي", "한", "국", "어", "é", "ü", "ß", "ñ"]

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN3_EXTRA = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
LLAMA_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"]


def train(pre_tokenizer, vocab_size, documents, min_merges):
    """A byte-level BPE trained by HF on `documents` synthetic lines, split by `pre_tokenizer`."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    rng = random.Random(1)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 5))) for _ in range(60000)]
    text = [" ".join(rng.choice(words) for _ in range(50)) + "\n12345 67890 3.14159" for _ in range(documents)]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        pre_tokenizer + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(text, trainer)
    base = json.loads(tok.to_str())
    assert len(base["model"]["merges"]) >= min_merges, len(base["model"]["merges"])
    return base


def train_base():
    from tokenizers import Regex, pre_tokenizers
    return train([pre_tokenizers.Split(Regex(QWEN2_RE), "isolated")], 33500, 4000, 32000)


def train_deepseek_v3():
    from tokenizers import Regex, pre_tokenizers
    return train([pre_tokenizers.Split(Regex(r), "isolated") for r in DEEPSEEK_V3_SPLITS], 8500, 1000, 8000)


def train_o200k():
    from tokenizers import Regex, pre_tokenizers
    return train([pre_tokenizers.Split(Regex(O200K_RE), "isolated")], 8500, 1000, 8000)


def added(content, id_, special=True, lstrip=False, rstrip=False, single_word=False, normalized=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


def split_pre(regex, trim_offsets):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": trim_offsets, "use_regex": False}]}


def families(base, templates):
    n = len(base["model"]["vocab"])
    legacy = [" ".join(m) for m in base["model"]["merges"]]
    out = {}

    def with_added(j, names, start, **flags):
        j["added_tokens"] = [added(s, start + i, **flags) for i, s in enumerate(names)]
        return j

    # Qwen2: NFC, the Qwen2 regex, merges as "a b" strings, a ByteLevel post-processor.
    q = json.loads(json.dumps(base))
    q["normalizer"] = {"type": "NFC"}
    q["pre_tokenizer"] = split_pre(QWEN2_RE, False)
    q["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False}
    q["model"]["merges"] = legacy
    with_added(q, QWEN_SPECIALS, n)
    out["qwen2"] = (q, {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
                        "pad_token": "<|endoftext|>", "bos_token": None,
                        "chat_template": open(os.path.join(templates, "qwen2_5.jinja")).read()})

    # Qwen3: as Qwen2 plus the think/tool tokens as non-special added tokens.
    q3 = json.loads(json.dumps(q))
    q3["added_tokens"] += [added(s, n + len(QWEN_SPECIALS) + i, special=False)
                           for i, s in enumerate(QWEN3_EXTRA)]
    out["qwen3"] = (q3, {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
                         "pad_token": "<|endoftext|>", "bos_token": None,
                         "chat_template": open(os.path.join(templates, "qwen3.jinja")).read()})

    # Llama-3: no normalizer, the Llama-3 regex, ignore_merges, merges as pairs, BOS by TemplateProcessing.
    l = json.loads(json.dumps(base))
    l["normalizer"] = None
    l["pre_tokenizer"] = split_pre(LLAMA3_RE, True)
    l["model"]["ignore_merges"] = True
    with_added(l, LLAMA_SPECIALS, n)
    bos = n
    l["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                  {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos],
                                                  "tokens": ["<|begin_of_text|>"]}}}]}
    out["llama3"] = (l, {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                         "eos_token": "<|eot_id|>",
                         "chat_template": open(os.path.join(templates, "llama3.jinja")).read()})

    # GPT-2 style: a ByteLevel pre-tokenizer with its own regex and a prefix space, no normalizer.
    g = json.loads(json.dumps(base))
    g["normalizer"] = None
    g["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    g["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    with_added(g, ["<|endoftext|>"], n)
    out["gpt2"] = (g, {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"})

    # Added-token flags: lstrip/rstrip/single_word/normalized, non-special added tokens, a Digits
    # pre-tokenizer in the sequence, a NFKC normalizer, and a Roberta-style post-processor.
    f = json.loads(json.dumps(base))
    f["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}]}
    f["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False},
        {"type": "Split", "pattern": {"String": "--"}, "behavior": "MergedWithNext", "invert": False},
        {"type": "Split", "pattern": {"Regex": LLAMA3_RE}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    f["added_tokens"] = [
        added("<s>", n, special=True),
        added("</s>", n + 1, special=True),
        added("<mask>", n + 2, special=True, lstrip=True),
        added("[R]", n + 3, special=True, rstrip=True),
        added("word", n + 4, special=False, single_word=True),
        added("ﬁx", n + 5, special=False, normalized=True),
        added("<sep>", n + 6, special=False, normalized=False),
        added("<sepx>", n + 7, special=True),
    ]
    f["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", n + 1], "cls": ["<s>", n],
                           "trim_offsets": True, "add_prefix_space": False}
    out["flags"] = (f, {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"})
    return out


def split_family(base, splits, specials, post_processor):
    """A tokenizer.json with the pre-tokenizer its BPE was trained on: `splits` (isolating Split regexes in
    a Sequence) then ByteLevel without a regex, no normalizer (an empty Sequence), ByteLevel decoder."""
    j = json.loads(json.dumps(base))
    j["normalizer"] = {"type": "Sequence", "normalizers": []}
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False} for r in splits] + [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    n = len(j["model"]["vocab"])
    j["added_tokens"] = [added(s, n + i) for i, s in enumerate(specials)]
    j["post_processor"] = post_processor(n)
    return j


def split_families():
    """DeepSeek-V3's and o200k's pre-tokenizers, each on a BPE trained with it (about 8k merges)."""
    ds_specials = ["<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
                   "<\uff5cUser\uff5c>", "<\uff5cAssistant\uff5c>"]

    def bos(n):  # BOS by TemplateProcessing, with a multi-byte special token
        return {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": ds_specials[0], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": ds_specials[0], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {ds_specials[0]: {"id": ds_specials[0], "ids": [n], "tokens": [ds_specials[0]]}}}

    def byte_level(n):
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}

    return {
        "deepseek_v3": (split_family(train_deepseek_v3(), DEEPSEEK_V3_SPLITS, ds_specials, bos),
                        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": ds_specials[0],
                         "eos_token": ds_specials[1]}),
        "o200k": (split_family(train_o200k(), [O200K_RE], ["<|endoftext|>", "<|endofprompt|>"], byte_level),
                  {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}),
    }


def bos_eos_families(fams):
    """tokenizer_config.json's add_bos_token / add_eos_token over Llama-3's and DeepSeek-V3's tokenizer.json,
    with the post_processor as shipped (TemplateProcessing adding BOS) or null. transformers 5 drops both flags
    whenever tokenizer.json exists (PreTrainedTokenizerBase._from_pretrained pops them), so the ids_auto
    of these families show whether milesrt ignores them as AutoTokenizer does."""
    def addedtok(content):  # the form transformers itself writes into tokenizer_config.json
        return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": True,
                "rstrip": False, "single_word": False, "special": True}

    def variant(src, cfg_update, null_post_processor, model_type):
        tj, cfg = json.loads(json.dumps(fams[src][0])), dict(fams[src][1])
        if null_post_processor:
            tj["post_processor"] = None
        cfg.update(cfg_update)
        return tj, cfg, {"model_type": model_type}

    ds_bos, ds_eos = fams["deepseek_v3"][1]["bos_token"], fams["deepseek_v3"][1]["eos_token"]
    return {
        # Llama-3: BOS by TemplateProcessing; the flags, as strings, say BOS and EOS.
        "llama3_bos": variant("llama3", {"add_bos_token": True, "add_eos_token": True}, False, "llama"),
        # Llama-3 without its post-processor: add_bos_token alone would have to supply the BOS.
        "llama3_bos_null": variant("llama3", {"add_bos_token": True, "add_eos_token": False}, True, "llama"),
        # Llama-3 with both flags false over the TemplateProcessing that adds BOS.
        "llama3_off": variant("llama3", {"add_bos_token": False, "add_eos_token": False}, False, "llama"),
        # DeepSeek-V3 as shipped: LlamaTokenizerFast, add_bos_token true, add_eos_token false, AddedToken objects.
        "deepseek_v3_bos": variant("deepseek_v3", {
            "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False,
            "bos_token": addedtok(ds_bos), "eos_token": addedtok(ds_eos)}, False, "deepseek_v3"),
        # DeepSeek-V3 with both flags true and no post-processor.
        "deepseek_v3_both": variant("deepseek_v3", {
            "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": True,
            "bos_token": addedtok(ds_bos), "eos_token": addedtok(ds_eos)}, True, "deepseek_v3"),
    }


def corpus():
    items = [
        "Hello, world! It's a test: we'll see what they've done, I'm sure they'd LIKE it. DON'T STOP.",
        "def f(x):\n\treturn x * 2\n\n\nclass A:\n    def __init__(self):\n        self.x = [1, 2, 3]  # ok\n",
        "if (a != b) {\r\n\t\tprintf(\"%d\\n\", a);\r\n}\r\n",
        "中文分词测试：我们的语言是中国人的语言。日本語のテキストを読む。한국어 텍스트입니다.",
        "مرحبا بالعالم، هذا اختبار للغة العربية.",
        "Привет, мир! Это проверка кириллицы: съешь ещё этих мягких французских булок.",
        "Family: 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 skin 👍🏽 heart ❤️ rainbow 🏳️‍🌈 zwj 🧑‍💻",
        "digits 1234567890123456789012345678901234567890 and 3.14159265358979 and 1,000,000",
        "spaces     between      words\n\n\n\n   \t \t  trailing    \n  ",
        "   leading spaces and a lone\ttab",
        "special inside: <|im_start|>user\nhi<|im_end|> and <|endoftext|> and <|begin_of_text|><|eot_id|>",
        "half specials: <|im_start <|im_end|| <|endoftext|>> <think>reason</think> <tool_call>{}</tool_call>",
        "flags: a <mask> b   <mask>c [R]   d word words aword word_ x ﬁx fix <sep><sepx> <s></s>",
        "NFC: e\u0301 vs \u00e9, A\u030a vs \u00c5, hangul \u1100\u1161\u11a8, ligature \ufb01 and \u2460 \uff21",
        "apostrophes: it's IT'S it\u2019s 'ſ 'S 'Ll 'LL",
        "mixed--dashes--here and -- lone",
        "",
        " ",
        "\n",
        "a",
        "x" * 300,
        "zero width\u200bspace\u200dnon\u00a0breaking\u2003em\u3000ideographic\u0085nel\u2028ls",
        "\u0000\u0001\u001f control \u007f del",
        "math 𝐀𝐁𝐂 ∑∫√ and astral 𠀀𠀁 and private \ue000",
        # Case-aware letter classes (o200k): camel case, acronyms, titlecase letters, contractions in both cases.
        "camelCase HTTPServer XMLHttpRequest iPhone McDONALD'S DON'T don't I'M I'm They'RE we'Ve ǅungla ǈJ Ǌ",
        "ÉCOLE école ΣΊΣΥΦΟΣ σίσυφος ΑθΗνΑ Straße STRASSE ﬁne ǱZ ᾈᾼ",
        # Combining marks and Lm/Lo letters: Devanagari, Thai, Hebrew points, spacing modifiers.
        "नमस्ते दुनिया, किताबें ภาษาไทยง่ายนิดเดียว שָׁלוֹם ʰʲ ˈhɛloʊ cafe\u0301 A\u0308\u0301",
        # Slashes after punctuation (o200k's [\r\n/]*), paths and URLs.
        "path/to/file.txt ./a//b/// https://example.com/x?y=1&z=2 ;/\n ../../ \"/\"/",
        # DeepSeek-V3: ASCII punctuation before letters, kana with voicing marks, CJK next to digits.
        "foo.bar .NET ,hello !Wow @user #tag $HOME a1b2c3 x=12345678 ひらがな カタカナ゛゜ゟ゠ヿ ー・",
        "漢字かな混じり文123漢字 2024年12月2日 第3章 価格¥1,980 ＡＢＣ１２３ 丿乀〇々〆",
        "symbols ±×÷ $100 €5 © ® ™ — «quotes» „Anführung“ 『括弧』 ・・・ ……",
    ]
    out = [s.encode("utf-8") for s in items]
    out += [b"invalid \xff\xfe bytes", b"truncated \xe4\xb8", b"surrogate \xed\xa0\x80 end",
            b"overlong \xc0\xaf and \xf8\x88\x80\x80\x80", b"\x80\x80lead", b"mixed \xe2\x82\xac\xe2\x82 ok"]
    rng = random.Random(7)
    pool = [s for s in items if s] + [" ", "  ", "\n", "\t", "'s", "12", "<|im_end|>", "<mask>", "word"]
    ranges = [(0x20, 0x7e), (0xa0, 0x17f), (0x300, 0x36f), (0x400, 0x4ff), (0x600, 0x6ff), (0x900, 0x97f),
              (0x2000, 0x206f), (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0x1f300, 0x1faff),
              (0x10000, 0x1000f)]
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.5:
                s = rng.choice(pool)
                a = rng.randint(0, len(s))
                parts.append(s[a:a + rng.randint(0, 40)])
            else:
                lo, hi = rng.choice(ranges)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts).encode("utf-8"))
    return out


CHAT_CASES = [
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
                  {"role": "user", "content": "  And 3+3?  \n"}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "一句中文 and emoji 👨‍👩‍👧"},
                  {"role": "assistant", "content": "Sure."}], "add_generation_prompt": False},
    {"messages": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                           "arguments": {"city": "Paris", "unit": "c"}}}]},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "It is 21 degrees."},
        {"role": "user", "content": "Thanks"}],
     "tools": [{"type": "function", "function": {
         "name": "get_weather", "description": "Get the weather \"now\" – für eine Stadt",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                         "unit": {"type": "string", "enum": ["c", "f"]}},
                        "required": ["city"]}}}],
     "add_generation_prompt": True},
    {"messages": [
        {"role": "user", "content": "Solve x+1=2"},
        {"role": "assistant", "content": "<think>\nx = 2 - 1\n</think>\n\nx = 1"},
        {"role": "user", "content": "And x+2=5?"},
        {"role": "assistant", "content": "<think>x=3</think>x = 3"}], "add_generation_prompt": False},
    {"messages": [
        {"role": "user", "content": "Call two tools"},
        {"role": "assistant", "content": "Calling.", "tool_calls": [
            {"type": "function", "function": {"name": "a", "arguments": {"n": 1}}}]},
        {"role": "tool", "content": "one"},
        {"role": "assistant", "content": "<think>\nkeep going\n</think>\n\nnow b",
         "tool_calls": [{"type": "function", "function": {"name": "b", "arguments": {"s": "x y", "l": [1, 2]}}}]},
        {"role": "tool", "content": "two"}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "no thinking please"}], "add_generation_prompt": True,
     "enable_thinking": False},
    {"messages": [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "final", "reasoning_content": "because"}],
     "add_generation_prompt": False},
]
# Which families can render which cases (Llama-3's template takes one tool call per message).
CHAT_FAMILIES = {"qwen2": range(len(CHAT_CASES)), "qwen3": range(len(CHAT_CASES)),
                 "llama3": [0, 1, 2, 3, 4, 6, 7]}


def make(out_dir, templates):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    os.makedirs(out_dir, exist_ok=True)
    texts = corpus()
    with open(os.path.join(out_dir, "corpus.jsonl"), "w") as f:
        for b in texts:
            f.write(json.dumps({"hex": b.hex()}) + "\n")
    with open(os.path.join(out_dir, "chat_cases.jsonl"), "w") as f:
        for c in CHAT_CASES:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    all_families = families(train_base(), templates)
    all_families.update(split_families())
    all_families.update(bos_eos_families(all_families))
    for name, (tj, cfg, *model_cfg) in all_families.items():
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(tj, f, ensure_ascii=False)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=1)
        if model_cfg:  # config.json: AutoTokenizer picks the class by model_type as for a real model folder
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(model_cfg[0], f)
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        hf = AutoTokenizer.from_pretrained(d)
        with open(os.path.join(d, "auto.json"), "w") as f:
            json.dump({"class": type(hf).__name__, "bos_token": hf.bos_token, "eos_token": hf.eos_token}, f,
                      ensure_ascii=False)
        with open(os.path.join(d, "expected.jsonl"), "w") as f:
            for b in texts:
                s = b.decode("utf-8", errors="replace")
                plain = tok.encode(s, add_special_tokens=False).ids
                special = tok.encode(s, add_special_tokens=True).ids
                auto = hf(s, add_special_tokens=True)["input_ids"]
                # The pre-tokenizer alone (no normalizer, no added tokens): the pieces BPE would see.
                pre = [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(s)]
                f.write(json.dumps({"ids": plain, "ids_special": special, "ids_auto": auto,
                                    "text": tok.decode(special, skip_special_tokens=False),
                                    "text_skip": tok.decode(special, skip_special_tokens=True),
                                    "pre_tokens": pre},
                                   ensure_ascii=False) + "\n")
        if name in CHAT_FAMILIES:
            with open(os.path.join(d, "chat_expected.jsonl"), "w") as f:
                for i in CHAT_FAMILIES[name]:
                    c = CHAT_CASES[i]
                    kw = {k: v for k, v in c.items() if k not in ("messages", "tools")}
                    text = hf.apply_chat_template(c["messages"], tools=c.get("tools"), tokenize=False, **kw)
                    ids = tok.encode(text, add_special_tokens=False).ids
                    f.write(json.dumps({"case": i, "text": text, "ids": ids}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: tokenizer_oracle.py make OUT TEMPLATES_DIR")
