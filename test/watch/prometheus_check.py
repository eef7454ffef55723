"""Scrapes GET /metrics of a running milesrt graph with Prometheus' own parser, twice: the step must
advance between the scrapes, every actor must have its queue depth and requests in flight, the
named families must be there with their types, and the last step's values must equal that step's
line of metrics.jsonl.

usage: prometheus_check.py URL RUN_DIR ACTOR,ACTOR,... FAMILY,FAMILY,...; exit 0 when all hold."""
import json
import os
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

url, run_dir = sys.argv[1], sys.argv[2]
actors = sys.argv[3].split(",")
families_wanted = [f for f in sys.argv[4].split(",") if f]
problems = []


def scrape():
    text = urllib.request.urlopen(url + "metrics", timeout=10).read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    return text, fams


def value(fams, name, labels=None):
    f = fams.get(name)
    if f is None:
        return None
    for s in f.samples:
        if labels is None or s.labels == labels:
            return s.value
    return None


deadline = time.time() + 90
first = None
while time.time() < deadline:
    text, fams = scrape()
    if value(fams, "milesrt_running") == 1 and (value(fams, "milesrt_values_step") or 0) >= 1:
        first = (text, fams)
        break
    time.sleep(0.2)
if first is None:
    sys.exit("the run never reported a step while running")
step1 = value(first[1], "milesrt_step")

second = None
while time.time() < deadline:
    text, fams = scrape()
    if value(fams, "milesrt_step") > step1 and value(fams, "milesrt_running") == 1:
        second = (text, fams)
        break
    time.sleep(0.2)
if second is None:
    sys.exit(f"the step did not advance past {step1} while the run was running")
text, fams = second

for a in actors:
    for fam in ("milesrt_actor_queue_depth", "milesrt_actor_in_flight", "milesrt_actor_replicas"):
        if value(fams, fam, {"actor": a}) is None:
            problems.append(f"{fam} has no sample for actor {a}")
for name in families_wanted:
    if name not in fams:
        problems.append(f"family {name} is missing")
for name in ("milesrt_admitted", "milesrt_restarts", "milesrt_dropped_stale"):
    if name in fams and fams[name].type != "counter":
        problems.append(f"{name} is a {fams[name].type}, not a counter")

# The values of the last step against its line in metrics.jsonl.
at = int(value(fams, "milesrt_values_step"))
lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
line = next((l for l in lines if l["step"] == at), None)
checked = 0
if line is None:
    problems.append(f"metrics.jsonl has no step {at}")
else:
    for name, v in line["metrics"].items():
        got = value(fams, "milesrt_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name))
        if got != v:
            problems.append(f"step {at}: milesrt_{name} = {got}, metrics.jsonl has {v}")
        checked += 1
    for actor, v in line["busy_seconds"].items():
        if value(fams, "milesrt_busy_seconds", {"actor": actor}) != v:
            problems.append(f"step {at}: busy_seconds of {actor} differs")
        checked += 1
    for actor, v in line["active_seconds"].items():
        if value(fams, "milesrt_active_seconds", {"actor": actor}) != v:
            problems.append(f"step {at}: active_seconds of {actor} differs")
        checked += 1
    if value(fams, "milesrt_idle_seconds") != line["idle_seconds"]:
        problems.append(f"step {at}: idle_seconds differs")
    if value(fams, "milesrt_version") < line["version"]:
        problems.append(f"milesrt_version {value(fams, 'milesrt_version')} behind step {at}'s {line['version']}")
if problems:
    print(text)
    print("\n".join(problems))
    sys.exit(1)
print(f"prometheus: step {step1} -> {value(fams, 'milesrt_step')}, {len(fams)} families, "
      f"{checked} values of step {at} agree with metrics.jsonl")
