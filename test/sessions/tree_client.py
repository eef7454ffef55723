"""Drives a session server's trajectory trees and subagents with the unmodified `openai` package.

    tree_client.py URL

URL is the server's http://HOST:PORT; the server runs with maxBranches = 4 and
maxRollbackTurns = 3, and every session here is in group "t" (one GRPO group). Session A: a
tool-calling turn and its answer; the answer retried; the tool's result edited; two more turns
and a compaction (a summary replacing those 3 turns); then a fifth path, refused naming
maxBranches. Session B: 4 turns, then a compaction of all 4, refused naming maxRollbackTurns.
Subagents: C (opened with parent A, no reward of its own) and D (ended with its own reward); E
deleted with its subagent F. A ends with reward 0.5 and trajectory 1's own 1.0, which ends C.
Prints "ok" and exits 0, or names what failed and exits 1.
"""
import json
import sys
import urllib.error
import urllib.request

import openai

URL = sys.argv[1]
TOOLS = [{"type": "function",
          "function": {"name": "add", "description": "Adds two integers",
                       "parameters": {"type": "object",
                                      "properties": {"a": {"type": "integer"},
                                                     "b": {"type": "integer"}},
                                      "required": ["a", "b"]}}}]


def fail(what):
    print("FAILED:", what)
    sys.exit(1)


def http(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def open_session(**body):
    status, s = http("POST", "/sessions", {"group": "t", **body})
    if status != 200:
        fail(f"open {body}: {status} {s}")
    return s, openai.OpenAI(base_url=s["base_url"], api_key="unused", max_retries=30)


def turn(client, messages):
    """One turn; the reply as the client sends it back, then a tool's answer if it called."""
    r = client.chat.completions.create(model="milesrt", messages=messages, tools=TOOLS)
    message = r.choices[0].message.model_dump(exclude_none=True)
    out = messages + [message]
    for call in message.get("tool_calls") or []:
        out.append({"role": "tool", "tool_call_id": call["id"], "content": "3"})
    return out


def tree(sid):
    status, info = http("GET", f"/sessions/{sid}?tokens=1")
    if status != 200:
        fail(f"GET {sid}: {status} {info}")
    return info


def refused(client, messages, limit):
    try:
        client.chat.completions.create(model="milesrt", messages=messages, tools=TOOLS)
    except openai.ConflictError as e:
        body = e.body.get("error", e.body) if isinstance(e.body, dict) else {}
        if body.get("param") != limit or limit not in body.get("message", ""):
            fail(f"409 naming {limit} expected, got {e.body}")
        return
    fail(f"a request past {limit} was served")


a, ca = open_session(metadata={"label": "3"})
m = turn(ca, [{"role": "user", "content": "What is 1 + 2?"}])  # a call and its tool answer
if len(m) != 3:
    fail(f"the first turn was not a tool call: {m}")
answered = turn(ca, m)
turn(ca, m)                                            # the answer retried: trajectory 1
edited = m[:2] + [{**m[2], "content": "three"}]
edited = turn(ca, edited)                              # the tool's result edited: trajectory 2
edited = turn(ca, edited + [{"role": "user", "content": "And 2 + 1?"}])
if len(tree(a["id"])["tree"]["trajectories"]) != 3:
    fail(f"retry and edit should make 3 trajectories: {tree(a['id'])}")
if tree(a["id"])["turns"] != 3:
    fail(f"trajectory 2 should hold 3 turns: {tree(a['id'])}")
summary = [{"role": "user", "content": "Summary: 1 + 2 = 3 and 2 + 1 = 3 were added with the tool."},
           {"role": "user", "content": "Say the answer."}]
turn(ca, summary)                                      # the compaction: trajectory 3
info = tree(a["id"])
trajectories = info["tree"]["trajectories"]
if [t["id"] for t in trajectories] != [0, 1, 2, 3] or info["trajectory"] != 3:
    fail(f"4 trajectories expected, the compaction current: {info}")
if [t["parent"] for t in trajectories] != [None, 0, 1, 2]:
    fail(f"the branches' parents: {trajectories}")
nodes = info["tree"]["nodes"]
shared = [n for n in nodes if n["trajectories"] == [0, 1, 2]]
if len(shared) != 1 or 1 not in shared[0]["loss_mask"] or not shared[0]["token_ids"]:
    fail(f"trajectories 0-2 should share one node holding the sampled call: {nodes}")
if sum(n["tokens"] for n in nodes if 0 in n["trajectories"]) != trajectories[0]["tokens"] or \
        any(len(n["token_ids"]) != n["tokens"] for n in nodes):
    fail(f"trajectory 0's nodes should hold its tokens: {info}")
refused(ca, [{"role": "user", "content": "Something else."}], "maxBranches")

b, cb = open_session()
mb = [{"role": "user", "content": "What is 1 + 2?"}]
while tree(b["id"])["turns"] < 4:
    mb = turn(cb, mb if mb[-1]["role"] != "assistant" else mb + [{"role": "user", "content": "Again."}])
refused(cb, summary, "maxRollbackTurns")

c, cc = open_session(parent=a["id"])
if c["group"] != "t" or c.get("parent") != a["id"]:
    fail(f"a subagent joins its parent's group: {c}")
turn(cc, [{"role": "user", "content": "Subtask: what is 1 + 2?"}])
d, cd = open_session(parent=a["id"])
turn(cd, [{"role": "user", "content": "Subtask: what is 2 + 1?"}])
status, body = http("POST", f"/sessions/{d['id']}/end", {"reward": 0.25})
if status != 200:
    fail(f"end D: {status} {body}")
e, _ = open_session()
f, _ = open_session(parent=e["id"])
status, body = http("DELETE", f"/sessions/{e['id']}")
if status != 200 or tree(f["id"])["state"] != "dropped":
    fail(f"deleting a parent drops its subagents: {status} {body} {tree(f['id'])}")
status, body = http("POST", f"/sessions/{a['id']}/end", {"reward": 0.5, "rewards": {"9": 1.0}})
if status != 400 or body["error"]["param"] != "rewards":
    fail(f"a reward for a trajectory the session lacks: 400 naming rewards, got {status} {body}")
status, body = http("POST", f"/sessions/{b['id']}/end", {"reward": 0.0})
if status != 200:
    fail(f"end B: {status} {body}")
status, body = http("POST", f"/sessions/{a['id']}/end", {"reward": 0.5, "rewards": {"1": 1.0}})
if status != 200:
    fail(f"end A: {status} {body}")
if tree(c["id"])["state"] != "ended":
    fail(f"ending a parent ends its subagents: {tree(c['id'])}")
print("ok")
