"""Drives milesrt's session server with the unmodified `openai` package, as an agent harness would.

    openai_client.py URL GROUPS

URL is the server's http://HOST:PORT. For each of GROUPS groups: two sessions opened in one group,
each a two-turn conversation (tools offered; a tool's answer, or the user's, between the turns;
the second turn streamed), then both ended with rewards 1 and 0 (one GRPO group). After the
first group, bad requests, each of which must get its 4xx JSON error while the server keeps
serving.
Prints "ok" and exits 0, or names what failed and exits 1.
"""
import json
import sys
import urllib.error
import urllib.request

import openai

URL = sys.argv[1]
GROUPS = int(sys.argv[2])
TOOLS = [{"type": "function",
          "function": {"name": "add", "description": "Adds two integers",
                       "parameters": {"type": "object",
                                      "properties": {"a": {"type": "integer"},
                                                     "b": {"type": "integer"}},
                                      "required": ["a", "b"]}}}]


def fail(what):
    print("FAILED:", what)
    sys.exit(1)


def http(method, path, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def expect_error(status, body, code, what):
    if status != code or not isinstance(body, dict) or "message" not in body.get("error", {}):
        fail(f"{what}: expected {code} with a JSON error, got {status} {body}")


def turn(client, messages, stream):
    # The schedule may admit no new group for a moment (429 with Retry-After): the client's own
    # retries wait it out.
    if not stream:
        r = client.chat.completions.create(model="milesrt", messages=messages, tools=TOOLS,
                                           max_tokens=12, temperature=1.0)
        return r.choices[0].message.model_dump(exclude_none=True), r.choices[0].finish_reason
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(model="milesrt", messages=messages, tools=TOOLS,
                                                max_tokens=12, stream=True):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for c in delta.tool_calls or []:
            calls.setdefault(c.index, c.model_dump(exclude_none=True))
        finish = chunk.choices[0].finish_reason or finish
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                 for _, c in sorted(calls.items())]
    return message, finish


def session(group):
    status, s = http("POST", "/sessions", {"group": group, "metadata": {"task": "add"}})
    if status != 200 or not s["base_url"].endswith("/sessions/" + s["id"] + "/v1"):
        fail(f"POST /sessions: {status} {s}")
    return s


def run_group(g):
    sessions = [session(f"group-{g}") for _ in range(2)]
    for s in sessions:
        client = openai.OpenAI(base_url=s["base_url"], api_key="unused", max_retries=30)
        if [m.id for m in client.models.list().data] != ["milesrt"]:
            fail("GET /models")
        messages = [{"role": "user", "content": "What is 2 + 3? Use the tool."}]
        reply, finish = turn(client, messages, stream=False)
        if finish not in ("stop", "length", "tool_calls"):
            fail(f"finish_reason {finish}")
        messages.append(reply)
        if reply.get("tool_calls"):
            messages.append({"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"],
                             "content": "5"})
        else:
            messages.append({"role": "user", "content": "Please answer with a number."})
        reply, finish = turn(client, messages, stream=True)
        if finish is None:
            fail("the stream ended without a finish_reason")
        status, info = http("GET", "/sessions/" + s["id"])
        if status != 200 or info["turns"] != 2 or info["sampled_tokens"] < 2:
            fail(f"GET /sessions/{s['id']}: {status} {info}")
    for s, reward in zip(sessions, (1.0, 0.0)):
        status, body = http("POST", f"/sessions/{s['id']}/end", {"reward": reward})
        if status != 200:
            fail(f"end: {status} {body}")
    return sessions


def bad_requests(ended):
    status, body = http("GET", "/health")
    if status != 200 or body["status"] != "ok":
        fail(f"health: {status} {body}")
    status, body = http("POST", "/sessions", raw=b"{not json")
    expect_error(status, body, 400, "malformed JSON")
    s = session("")
    status, body = http("POST", f"/sessions/{s['id']}/v1/chat/completions", raw=b"[1, 2")
    expect_error(status, body, 400, "malformed chat body")
    client = openai.OpenAI(base_url=s["base_url"], api_key="unused", max_retries=0)
    try:
        client.chat.completions.create(model="milesrt", n=2,
                                       messages=[{"role": "user", "content": "hi"}])
        fail("n = 2 was accepted")
    except openai.BadRequestError as e:
        if e.body.get("param") != "n":
            fail(f"n = 2: {e.body}")
    gone = openai.OpenAI(base_url=URL + "/sessions/nope/v1", api_key="unused", max_retries=0)
    try:
        gone.chat.completions.create(model="milesrt", messages=[{"role": "user", "content": "hi"}])
        fail("an unknown session was served")
    except openai.NotFoundError:
        pass
    late = openai.OpenAI(base_url=ended["base_url"], api_key="unused", max_retries=0)
    try:
        late.chat.completions.create(model="milesrt", messages=[{"role": "user", "content": "hi"}])
        fail("an ended session was served")
    except openai.ConflictError:
        pass
    status, body = http("DELETE", "/sessions/" + s["id"])
    if status != 200:
        fail(f"DELETE: {status} {body}")
    status, body = http("POST", f"/sessions/{s['id']}/end", {"reward": "high"})
    expect_error(status, body, 400, "a reward that is no number")


def main():
    for g in range(GROUPS):
        sessions = run_group(g)
        if g == 0:  # the last group's end is the run's last step: the server then stops
            bad_requests(sessions[0])
    print("ok")


main()
