#!/usr/bin/env python3
"""Test oracle for milesrt's Jinja engine: transformers' apply_chat_template (PyPI, test-only) renders
every real chat template in test/chat_templates/ (their sources: test/chat_templates/README.md) on a
fixed matrix of conversations, and the small templates of JINJA_CASES; the C++ test renders the same
with the engine and compares byte for byte.

    chat_template_oracle.py make OUT TEMPLATES_DIR TOKENIZER_DATA

writes OUT/chat_matrix.jsonl, one line per (template, case): the variables the template saw, the
text (or the error transformers raised) and its ids. strftime_now is pinned to 2024-07-26
(datetime.now patched), the date the C++ side injects.

Ids: no real tokenizer.json is committed, so each template gets a model folder OUT/<template>/: the
synthetic byte-level BPE that test/tokenizer_oracle.py trains (TOKENIZER_DATA/qwen2/tokenizer.json)
plus the family's special tokens (its bos/eos/... and every special-token-shaped literal of the
template) as added tokens, and a tokenizer_config.json with the template and those special tokens;
the ids are HF tokenizers' encode(text, add_special_tokens=False), as apply_chat_template(tokenize=True).
"""
import datetime as _dt
import json
import os
import re
import sys

FIXED_NOW = _dt.datetime(2024, 7, 26, 10, 30, 0)

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather \"now\" – für eine Stadt",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}

CONVERSATIONS = {
    "single_user": {"messages": [{"role": "user", "content": "Hello! 你好 👋"}]},
    "system_three_turns": {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "  And 3+3?  \n"}]},
    "tools": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call12345", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "It is 21 °C in Paris."}]},
    # The same exchange with the call's arguments as a JSON string (the OpenAI wire form), which
    # DeepSeek's templates concatenate as text and raise on a dict.
    "tools_string_arguments": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call12345", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "It is 21 °C in Paris."}]},
    "reasoning": {"messages": [
        {"role": "user", "content": "Solve x+1=2"},
        {"role": "assistant", "content": "x = 1", "reasoning_content": "Subtract 1 from both sides."},
        {"role": "user", "content": "And x+2=5?"}]},
    "thinking_off": {"messages": [{"role": "user", "content": "no thinking please"}], "enable_thinking": False},
}

# Templates and the special tokens their models' tokenizers carry (bos_token, eos_token, ...).
TEMPLATES = {
    "Qwen-Qwen2.5-7B-Instruct": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "Qwen-Qwen3-0.6B": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "Qwen-QwQ-32B": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "meta-llama-Meta-Llama-3-8B-Instruct": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "meta-llama-Llama-3.1-8B-Instruct": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "meta-llama-Llama-3.2-3B-Instruct": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "meta-llama-Llama-3.3-70B-Instruct": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": {"bos_token": "<｜begin▁of▁sentence｜>",
                                                 "eos_token": "<｜end▁of▁sentence｜>"},
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": {"bos_token": "<｜begin▁of▁sentence｜>",
                                                 "eos_token": "<｜end▁of▁sentence｜>"},
    "deepseek-ai-DeepSeek-V3": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "deepseek-ai-DeepSeek-V3.1": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "mistralai-Mistral-Nemo-Instruct-2407": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "Mistral-Small-3.2-24B-Instruct-2506": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "google-gemma-7b-it": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "google-gemma-2-2b-it": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "google-gemma-3-4b-it": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"},
    "microsoft-Phi-3-mini-4k-instruct": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "microsoft-Phi-3.5-mini-instruct": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "microsoft-phi-4": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"},
    "openai-gpt-oss-120b": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>"},
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"},
    "ibm-granite-granite-3.3-2B-Instruct": {"bos_token": "<|end_of_text|>", "eos_token": "<|end_of_text|>"},
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"},
    "moonshotai-Kimi-K2": {"bos_token": "[BOS]", "eos_token": "[EOS]"},
    "deepseek-ai-DeepSeek-R1": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "mistralai-Mistral-7B-Instruct-v0.3": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
}

# What a special token looks like in these templates' string literals.
SPECIAL_SHAPES = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>|\[/?[A-Z][A-Z_]{1,30}\]|<(?:start|end)_of_turn>"
                            r"|</?think>|</?tool_call>|</?tool_response>|</?s>|<(?:bos|eos|pad|unk)>")


def family_tokenizer(out_dir, name, template, specials, base_tokenizer):
    """OUT/<name>/: the synthetic BPE plus the family's special tokens, and its tokenizer_config.json."""
    from tokenizers import AddedToken, Tokenizer
    tok = Tokenizer.from_file(base_tokenizer)
    marks = sorted(set(SPECIAL_SHAPES.findall(template)) | set(specials.values()))
    tok.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in marks])
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(specials, chat_template=template), f, ensure_ascii=False, indent=1)
    return tok


# Small templates for the corners of Jinja's semantics that chat templates lean on: scoping, loop
# variables, whitespace control, Python's str()/repr() of values, filters and their generators.
JINJA_CASES = [
    ("{% set y = 1 %}{% for x in xs %}{% set y = x %}{{ y }}{% endfor %}{{ y }}", {"xs": [1, 2]}),
    ("{% for x in xs %}{% if x > 1 %}{% set s = x %}{% endif %}[{{ s }}]{% endfor %}", {"xs": [1, 2, 3]}),
    ("{% for x in xs %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.previtem }}|{% endfor %}",
     {"xs": ["a", "b", "c"]}),
    ("{% for x in xs %}{% for y in x %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }};{% endfor %}",
     {"xs": [[1, 2], [3]]}),
    ("a\n  {% if t %}\n    x\n  {%- endif %}\n  b {# c #}\n  {#- d #} e\n", {"t": True}),
    ("{{- ' a ' -}}  \n  {%- if t -%}  b  {%- endif -%}\n c", {"t": True}),
    ("  {%+ if t %}x{% endif %}\n  {{ t }}\n\t{% if t %}\ny{% endif %}", {"t": True}),
    ("{{ x }}|{{ y }}|{{ z }}|{{ w }}|{{ v }}|{{ u }}", {"x": None, "y": True, "z": 1.0, "w": [1, "a'b", None],
                                                       "v": {"k": [True, 2.5]}, "u": 1e22}),
    ("{{ '%s' }} {{ 'é'|length }} {{ '日本語'[1:] }} {{ '日本語'[::-1] }} {{ [1,2,3][::2] }} {{ [1,2,3][-2:] }}", {}),
    ("{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(separators=(',', ':')) }}|{{ x|tojson(sort_keys=true) }}",
     {"x": {"b": "ü\n\"", "a": [1, 2.0, None, True], "c": {}}}),
    ("{{ xs|selectattr('role', 'eq', 'user')|map(attribute='content')|join(', ') }}|"
     "{{ xs|rejectattr('content')|list|length }}|{{ xs|map(attribute='role')|unique|list }}",
     {"xs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "b"}]}),
    ("{{ xs|selectattr('n', 'defined')|list }}|{{ xs|first }}|{{ xs|last }}|{{ xs|length }}",
     {"xs": [{"n": 1}, {}, {"n": None}]}),
    ("{% if xs|selectattr('x') %}gen-true{% endif %}|{{ (xs|selectattr('x')|list) is sequence }}", {"xs": []}),
    ("{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'x y  z'.split() }}|{{ 'a-b-c'.split('-', 1) }}|"
     "{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'Hello World'.lower() }}|"
     "{{ 'hello world'.title() }}|{{ '--x--'.strip('-') }}|{{ 'aaa'.replace('a', 'b', 2) }}", {}),
    ("{{ 'hello world-x'|title }}|{{ 'hELLO'|capitalize }}|{{ '  t  '|trim }}|{{ 'x'|upper }}|{{ 'a\nb\n'|indent(2, true) }}", {}),
    ("{{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ y is defined }}|{{ y is none }}",
     {"y": None}),
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 2 ** 3 }} {{ 1 + 2.5 }} {{ 10 - 0.1 }}", {}),
    ("{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'y' if x else 'n' }}|{{ 'z' if x }}|{{ x or 'o' }}|{{ x and 'a' }}", {"x": 0}),
    ("{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a * 2 %}"
     "{% set ns.b = ns.b + [i] %}{% endfor %}{{ ns.a }} {{ ns.b }}", {}),
    ("{% macro m(a, b='B', c=none) %}<{{ a }}{{ b }}{{ c }}>{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m('x', c=3) }}", {}),
    ("{% macro outer() %}[{{ caller('v') }}]{% endmacro %}{% call(p) outer() %}got {{ p }}{% endcall %}", {}),
    ("{% set b %}\n  block {{ 1 }}\n{% endset %}<{{ b }}>{% filter upper %}f{{ 'x' }}{% endfilter %}", {}),
    ("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}"
     "{% else %}none{% endfor %}", {"xs": [1, 2, 3, 4, 5]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}"
     "{{ d.get('a') }}{{ d.get('z', 'zz') }}{{ d.keys()|list }}", {"d": {"b": 1, "a": 2}}),
    ("{% for m in ms if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}{{ m.role }} {% endfor %}",
     {"ms": [{"role": "system"}, {"role": "user"}, {"role": "assistant"}]}),
    ("{{ x.y }}", {}),
    ("{{ x.y.z }}", {"x": {}}),
    ("{{ raise_exception('boom: ' ~ 1) }}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{{ none.x }}|{{ 'abc'.x }}|{{ [1][5] }}|{{ {'a': 1}['b'] }}", {}),
    ("{{ xs|map('upper')|list }} {{ xs|sort|list }} {{ xs|sort(reverse=true)|first }} {{ xs|reverse|list }}",
     {"xs": ["b", "a", "C"]}),
    ("{{ '3'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int }} {{ 3.7|int }} {{ '2.5'|float }} {{ 1|string ~ 2 }} {{ xs|sum }}",
     {"xs": [1, 2, 3.5]}),
    ("{{ x is string }}{{ x is mapping }}{{ x is iterable }}{{ x is sequence }}{{ n is number }}{{ n is integer }}"
     "{{ n is float }}{{ n is odd }}{{ n is divisibleby 3 }}{{ b is boolean }}{{ b is true }}{{ x is none }}",
     {"x": "s", "n": 3, "b": False}),
    ("{{ strftime_now('%Y-%m-%d %A %B %d %b %H:%M') }}", {}),
    ("{% raw %}{{ x }}{% endraw %} {{ '{{' }}", {}),
    ("{% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and not b %}!{% endif %}", {"a": False, "b": False}),
    ("{{ xs[0]['c'] }}{{ xs[0].c }}{{ xs[-1].c }}{{ xs|length > 1 }}", {"xs": [{"c": 1}, {"c": 2}]}),
    ("{{ [1, [2, 'x']]|tojson }} {{ 'a\tb'|tojson }} {{ '<&>'|e }} {{ 'x'|safe }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t|length }}{% with q = 3 %}{{ q }}{% endwith %}{{ q }}", {}),
]


def cases():
    for name, conv in CONVERSATIONS.items():
        for agp in (True, False):
            yield f"{name}/agp={'true' if agp else 'false'}", dict(conv, add_generation_prompt=agp)


def render(template, specials, case):
    """transformers' apply_chat_template(tokenize=False), on a tokenizer whose special tokens are `specials`."""
    from transformers.utils import chat_template_utils
    kw = {k: v for k, v in case.items() if k not in ("messages", "tools", "add_generation_prompt")}
    variables = dict(specials, **kw)
    text, _ = chat_template_utils.render_jinja_template(
        conversations=[case["messages"]], tools=case.get("tools"), documents=None, chat_template=template,
        add_generation_prompt=case["add_generation_prompt"], **variables)
    return text[0], variables


def make(out_dir, templates_dir, tokenizer_data):
    from transformers.utils import chat_template_utils

    class FixedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_NOW

    chat_template_utils.datetime = FixedDatetime
    os.makedirs(out_dir, exist_ok=True)
    env_template = chat_template_utils._compile_jinja_template
    with open(os.path.join(out_dir, "jinja_cases.jsonl"), "w") as f:
        for source, variables in JINJA_CASES:
            line = {"source": source, "variables": variables}
            try:
                line["text"] = env_template(source).render(**variables)
            except Exception as e:
                line["error"] = f"{type(e).__name__}: {e}"
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    with open(os.path.join(out_dir, "chat_matrix.jsonl"), "w") as f:
        for name, specials in TEMPLATES.items():
            with open(os.path.join(templates_dir, name + ".jinja"), encoding="utf-8") as tf:
                template = tf.read()
            tok = family_tokenizer(out_dir, name, template, specials,
                                   os.path.join(tokenizer_data, "qwen2", "tokenizer.json"))
            for case_name, case in cases():
                line = {"template": name, "case": case_name, "messages": case["messages"],
                        "tools": case.get("tools"), "add_generation_prompt": case["add_generation_prompt"],
                        "kwargs": {k: v for k, v in case.items()
                                   if k not in ("messages", "tools", "add_generation_prompt")}}
                try:
                    text, variables = render(template, specials, case)
                    line.update(variables=variables, text=text, ids=tok.encode(text, add_special_tokens=False).ids)
                except Exception as e:  # the template raised: the engine must raise too
                    line.update(variables=dict(specials, **{k: v for k, v in case.items() if k not in (
                        "messages", "tools", "add_generation_prompt")}), error=f"{type(e).__name__}: {e}")
                f.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: chat_template_oracle.py make OUT TEMPLATES_DIR TOKENIZER_DATA")
