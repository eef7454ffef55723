"""An external agent loop that milesrt trains on (docs/sessions.md, example b).

    agent.py SERVER_JSON [GROUPS] [GROUP_SIZE]

SERVER_JSON is the run's server.json ({"url": ...}; the script waits for it). For each of GROUPS
arithmetic questions (default: until the run ends) the agent opens GROUP_SIZE sessions in one
group (one GRPO group), labelled with the answer, and runs each as a tool-using conversation with
the unmodified `openai` package: the model may call `calculator`, the agent answers the call,
the model answers. It ends every session without a reward: the graph's reward actor scores the
last turn against the label. Prints one line per group and "done" at the end.
"""
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request

import openai

TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluates a + b, a - b or a * b",
    "parameters": {"type": "object", "required": ["a", "op", "b"], "properties": {
        "a": {"type": "integer"}, "op": {"type": "string", "enum": ["+", "-", "*"]},
        "b": {"type": "integer"}}}}}]
MAX_TURNS = 3


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def calculator(arguments):
    """The tool: the model's call in, its result (or why it cannot be run) out."""
    try:
        args = json.loads(arguments)
        a, b, op = int(args["a"]), int(args["b"]), args["op"]
        return str({"+": a + b, "-": a - b, "*": a * b}[op])
    except (ValueError, KeyError, TypeError) as e:
        return f"error: {e!r}"


def episode(s, question):
    """One session: turns until the model answers without a tool call; returns the tool calls."""
    client = openai.OpenAI(base_url=s["base_url"], api_key="unused", max_retries=100)
    messages = [{"role": "system", "content": "Use the calculator, then give the number."},
                {"role": "user", "content": question}]
    calls = 0
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model="milesrt", messages=messages, tools=TOOLS,
                                               max_tokens=48, temperature=1.0)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            calls += 1
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": calculator(call.function.arguments)})
    # No reward: the graph's reward actor scores the session.
    post(s["base_url"].rsplit("/v1", 1)[0], "/end", {})
    return calls


def main():
    server_json = sys.argv[1]
    groups = int(sys.argv[2]) if len(sys.argv) > 2 else None
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    while not os.path.exists(server_json):
        time.sleep(0.1)
    url = json.load(open(server_json))["url"]
    rng = random.Random(7)
    g = 0
    while groups is None or g < groups:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        try:
            # The group's sessions are all opened before any ends: a group is handed to the
            # trainer once every session opened in it has ended.
            sessions = [post(url, "/sessions", {"group": f"q{g}", "metadata": {"label": str(a + b)}})
                        for _ in range(size)]
            calls = sum(episode(s, f"What is {a} + {b}?") for s in sessions)
        except (openai.APIConnectionError, urllib.error.URLError):
            break  # the run has ended
        print(f"group q{g}: {a} + {b}, {calls} tool call(s)", flush=True)
        g += 1
    print("done")


main()
