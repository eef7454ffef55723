"""Python's own HTTP client (http.client, the standard library) against milesrt's HTTP server:
runtime/http/http_streams.test.cpp starts a server with the routes below and runs this with its
port. Prints one line per failed check and exits 1 if any failed.

  POST /echo/{id}      answers {"id": id, "body": <the body as JSON>}
  GET  /events?n=N     streams N server-sent events "tick i" (event name "tick"), then ends
"""
import http.client
import json
import sys

port = int(sys.argv[1])
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
conn.request("POST", "/echo/s%201", body=json.dumps({"a": [1, 2]}),
              headers={"Content-Type": "application/json"})
r = conn.getresponse()
body = json.loads(r.read())
check(r.status == 200, f"POST status {r.status}")
check(body == {"id": "s 1", "body": {"a": [1, 2]}}, f"POST body {body}")

# The same connection, kept alive: a stream read event by event as it arrives.
conn.request("GET", "/events?n=5")
r = conn.getresponse()
check(r.status == 200, f"stream status {r.status}")
check(r.getheader("Content-Type") == "text/event-stream", f"content type {r.getheader('Content-Type')}")
check(r.getheader("Transfer-Encoding") == "chunked", "not chunked")
events, name = [], None
while True:
    line = r.readline()
    if not line:
        break
    line = line.decode().rstrip("\n")
    if line.startswith("event: "):
        name = line[7:]
    elif line.startswith("data: "):
        events.append((name, line[6:]))
check(events == [("tick", f"tick {i}") for i in range(5)], f"events {events}")

conn.request("POST", "/echo/x", body=b"x" * 5000)  # over the test's limit of 4096
r = conn.getresponse()
check(r.status == 413, f"over the limit: {r.status}")
r.read()
conn.close()

conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
conn.request("GET", "/nowhere")
r = conn.getresponse()
check(r.status == 404, f"unknown path: {r.status}")
r.read()
conn.request("POST", "/echo/x", body=b"not json")
r = conn.getresponse()
check(r.status == 400 and b"body" in r.read(), f"bad JSON: {r.status}")

for f in failures:
    print(f)
print("ok" if not failures else f"{len(failures)} failed")
sys.exit(1 if failures else 0)
