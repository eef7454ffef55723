"""Streams turns of a milesrt session with the unmodified `openai` package, then leaves a stream
midway with a raw socket.

    stream_client.py URL

URL is the server's http://HOST:PORT. One session: a streamed turn whose text must come in
several chunks as it is sampled and add up to the reply the server stored (the next turn, which
sends it back, must extend the session); then a raw client that reads the first chunk of a long
streamed turn and closes its connection: that turn must not be appended to the session, which
goes on serving. Prints "ok" and exits 0, or names what failed and exits 1.
"""
import json
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import openai

URL = sys.argv[1]


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


def streamed_turn(client, messages):
    content, reasoning, text_chunks, finish, calls = "", "", 0, None, {}
    for chunk in client.chat.completions.create(model="milesrt", messages=messages,
                                                max_tokens=48, stream=True):
        delta = chunk.choices[0].delta
        for c in delta.tool_calls or []:
            calls.setdefault(c.index, c.model_dump(exclude_none=True))
        piece = (delta.content or "") + (getattr(delta, "reasoning_content", None) or "")
        text_chunks += 1 if piece else 0
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        if chunk.choices[0].finish_reason:
            if finish is not None:
                fail("two chunks with a finish_reason")
            finish = chunk.choices[0].finish_reason
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                 for _, c in sorted(calls.items())]
    return message, reasoning, text_chunks, finish


def leave_midway(session_id, messages):
    """Sends a streamed turn, reads up to its first event, closes the connection."""
    host = urllib.parse.urlparse(URL)
    body = json.dumps({"messages": messages, "max_tokens": 256, "stream": True}).encode()
    head = (f"POST /sessions/{session_id}/v1/chat/completions HTTP/1.1\r\n"
            f"Host: {host.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((host.hostname, host.port), timeout=60) as s:
        s.sendall(head + body)
        got = b""
        while b"data:" not in got:
            part = s.recv(4096)
            if not part:
                fail(f"the stream ended before its first event: {got!r}")
            got += part
        if b" 200 " not in got.split(b"\r\n", 1)[0]:
            fail(f"the stream did not start: {got!r}")


def main():
    status, s = http("POST", "/sessions", {})
    if status != 200:
        fail(f"POST /sessions: {status} {s}")
    client = openai.OpenAI(base_url=s["base_url"], api_key="unused", max_retries=30)
    messages = [{"role": "user", "content": "Tell me about the sea."}]
    message, reasoning, text_chunks, finish = streamed_turn(client, messages)
    content = message["content"]
    if finish not in ("stop", "length", "tool_calls"):
        fail(f"finish_reason {finish}")
    if text_chunks < 2:
        fail(f"the reply came in {text_chunks} text chunk(s), not as it was sampled")
    status, info = http("GET", "/sessions/" + s["id"])
    stored = info["messages"][-1]
    if (stored.get("content") or "") != content or \
            stored.get("reasoning_content", "") != reasoning:
        fail(f"the chunks add up to {content!r} / {reasoning!r}, the server stored {stored}")
    # The reply as the client assembled it extends the session.
    messages.append(message)
    if message.get("tool_calls"):
        messages.append({"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                         "content": "calm"})
    else:
        messages.append({"role": "user", "content": "And about rivers?"})
    turns = info["turns"]
    leave_midway(s["id"], messages)
    # Once the engine is done with the turn it left, the session serves the same request again;
    # the turn that was left is not in it.
    for _ in range(600):
        reply = None
        try:
            reply = client.with_options(max_retries=0).chat.completions.create(
                model="milesrt", messages=messages, max_tokens=8)
            break
        except openai.ConflictError as e:
            if "in flight" not in str(e):
                fail(f"after the client left: {e}")
            time.sleep(0.05)
    if reply is None:
        fail("the session stayed busy")
    status, info = http("GET", "/sessions/" + s["id"])
    if info["turns"] != turns + 1:
        fail(f"turns {info['turns']}, expected {turns + 1}: the turn left midway was kept")
    status, body = http("POST", f"/sessions/{s['id']}/end", {"reward": 1.0})
    if status != 200:
        fail(f"end: {status} {body}")
    print("ok")


main()
