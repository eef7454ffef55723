"""Drives the live page in headless Chromium (Selenium, Debian's chromium-driver) and checks the
DOM: every actor's name is drawn, each chart's last value equals that step's value in
metrics.jsonl, and (with --running) the step shown advances between two reads. Saves a screenshot.

usage: page_check.py URL RUN_DIR ACTOR,ACTOR,... [--running] [--screenshot PNG] [--state STATE]"""
import argparse
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

p = argparse.ArgumentParser()
p.add_argument("url")
p.add_argument("run_dir")
p.add_argument("actors")
p.add_argument("--running", action="store_true")
p.add_argument("--screenshot")
p.add_argument("--state")
p.add_argument("--screenshot-at-step", type=int, default=0)
args = p.parse_args()

opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
          "--window-size=1400,1000"):
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
problems = []


def wait_for(what, cond, limit=60):
    until = time.time() + limit
    while time.time() < until:
        try:
            v = cond()
            if v:
                return v
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}; page text:\n" +
                     driver.find_element(By.TAG_NAME, "body").text[:3000])


def shown_step():
    return int(driver.find_element(By.ID, "step").text)


try:
    driver.get(args.url)
    names = wait_for("the actors", lambda: [e.text for e in driver.find_elements(By.CSS_SELECTOR, "g.actor .actor-name")])
    for a in args.actors.split(","):
        if a not in names:
            problems.append(f"actor {a} is not on the page (drawn: {names})")
    if args.running:
        s1 = wait_for("a first step", lambda: shown_step() >= 1 and shown_step())
        s2 = wait_for(f"the step to pass {s1}", lambda: shown_step() > s1 and shown_step())
        print(f"page: step {s1} -> {s2} while running")
    if args.state:
        wait_for(f"state {args.state}", lambda: driver.find_element(By.ID, "run-state").text.lower() == args.state)
    # Each chart's last value (data-value holds every digit) against that step in metrics.jsonl,
    # read in one script so that a redraw between two reads cannot pair one step with another's value.
    read_charts = """return Array.from(document.querySelectorAll('#charts .chart')).map(c => {
        const l = c.querySelector('.last');
        return [c.dataset.metric, l.dataset.step || '', l.dataset.value || ''];
      });"""
    charts = wait_for("charts with values", lambda: [c for c in driver.execute_script(read_charts) if c[2]])
    lines = {l["step"]: l for l in (json.loads(x) for x in open(os.path.join(args.run_dir, "metrics.jsonl")) if x.strip())}
    checked = 0
    for metric, step, value in charts:
        step, got = int(step), float(value)
        want = lines.get(step, {}).get("metrics", {}).get(metric)
        if want is None or got != want:
            problems.append(f"chart {metric}: last value {got} at step {step}, metrics.jsonl has {want}")
        checked += 1
    if not args.running:  # a finished run: the last charted step is the last line
        last_step = max(lines)
        for metric, step, _ in charts:
            if int(step) != last_step and metric in lines[last_step]["metrics"]:
                problems.append(f"chart {metric} ends at step {step}, the run at {last_step}")
    if args.screenshot:
        if args.screenshot_at_step:
            wait_for(f"step {args.screenshot_at_step}", lambda: shown_step() >= args.screenshot_at_step)
        time.sleep(0.6)
        driver.save_screenshot(args.screenshot)
finally:
    driver.quit()
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"page: {len(names)} actors drawn, {checked} charts agree with metrics.jsonl")
