#!/usr/bin/env python3
"""RabbitMQ: concurrent declarations (what dlqctl apply does) against one definitions import
(POST /api/definitions/{vhost}) for the same batch of new queues and policies (issue 19).

N RabbitMQ channels (bench/gen.py: 3 queues and 2 policies each) are planned by dlqctl; the
plan's changes are then written three ways, each into a fresh vhost of its own on the local
RabbitMQ: `dlqctl apply --parallelism 1`, `dlqctl apply --parallelism 8`, and one definitions
import built from the same plan (policies and queues as the plan gives them). Reports wall
time and the broker's CPU time (/proc/PID/stat of beam.smp) for each, and checks every queue
exists with its policy applied afterwards. The vhosts are deleted at the end.

usage: bench/rabbit_definitions.py [--channels 2000] [--dlqctl PATH]
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from apply import cpu_seconds  # noqa: E402
from plan import measured  # noqa: E402


def api(url, method, path, body=None, timeout=1800):
    auth = base64.b64encode(b"guest:guest").decode()
    req = urllib.request.Request(url.rstrip("/") + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Basic {auth}", "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read()
        return json.loads(text) if text else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=2000)
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    a = ap.parse_args()
    env = dict(os.environ, DLQCTL_RABBITMQ_USER="guest", DLQCTL_RABBITMQ_PASSWORD="guest")
    url = env.get("DLQCTL_RABBITMQ_URL", "http://127.0.0.1:15672")
    state = os.environ.get("DLQCTL_STATE", os.path.expanduser("~/.cache/dlqctl/state"))
    beam = int(open(os.path.join(state, "rabbitmq.pid")).read().strip())
    n = a.channels
    rows = []
    made = []
    try:
        for method in ("dlqctl --parallelism 1", "dlqctl --parallelism 8", "definitions import"):
            vhost = f"bench-defs-{n}-{len(made)}"
            vh = urllib.parse.quote(vhost, safe="")
            api(url, "PUT", f"/api/vhosts/{vh}", {})
            made.append(vh)
            api(url, "PUT", f"/api/permissions/{vh}/guest", {"configure": ".*", "write": ".*", "read": ".*"})
            work = os.path.join(ROOT, "bench", ".work", f"defs-{n}-{len(made)}")
            shutil.rmtree(work, ignore_errors=True)
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n), work, "--mix", f"0:{n}:0",
                            "--prefix", "d.", "--vhost", vhost, "--rabbit", url], check=True, stdout=subprocess.DEVNULL)
            before = cpu_seconds(beam)
            if method.startswith("dlqctl"):
                p = method.rsplit(" ", 1)[1]
                code, out, err, wall, rss = measured([a.dlqctl, "apply", ".", "--auto-approve", "--color", "never",
                                                      "--parallelism", p], work, env)
                if code != 0:
                    sys.exit(f"{method} failed:\n{err[-3000:]}")
            else:
                code, out, err, _, _ = measured([a.dlqctl, "plan", ".", "--format", "json"], work, env)
                if code != 0:
                    sys.exit(f"plan failed:\n{err[-3000:]}")
                plan = json.loads(out)
                policies, queues = [], []
                for c in plan["changes"]:
                    d, r = c["desired"], c["resource"]
                    if r["kind"] == "policy":
                        policies.append({
                            "vhost": vhost, "name": r["name"], "pattern": d["pattern"],
                            "apply-to": d["apply-to"], "priority": d["priority"],
                            "definition": {k.split(".", 1)[1]: v for k, v in d.items()
                                           if k.startswith("definition.") and v is not None},
                        })
                    elif r["kind"] == "queue":
                        queues.append({
                            "vhost": vhost, "name": r["name"], "durable": d["durable"],
                            "auto_delete": d["auto_delete"],
                            "arguments": {k.split(".", 1)[1]: v for k, v in d.items()
                                          if k.startswith("arguments.") and v is not None},
                        })
                start = time.perf_counter()
                api(url, "POST", f"/api/definitions/{vh}", {"policies": policies, "queues": queues})
                wall = time.perf_counter() - start
            cpu = cpu_seconds(beam) - before
            listed = api(url, "GET", f"/api/queues/{vh}?disable_stats=true&columns=name,policy&page=1&page_size=500")
            pages = listed["page_count"]
            total = listed["total_count"]
            with_policy = sum(1 for q in listed["items"] if q.get("policy"))
            for page in range(2, pages + 1):
                more = api(url, "GET", f"/api/queues/{vh}?disable_stats=true&columns=name,policy&page={page}&page_size=500")
                with_policy += sum(1 for q in more["items"] if q.get("policy"))
            if total != 3 * n or with_policy != 2 * n:
                sys.exit(f"{method}: {total} queues, {with_policy} with a policy; expected {3 * n} and {2 * n}")
            rows.append((method, wall, cpu))
            print(f"{method}: {wall:.1f} s, RabbitMQ CPU {cpu:.1f} s ({total} queues, {with_policy} with their policy)",
                  flush=True)
    finally:
        for vh in made:
            api(url, "DELETE", f"/api/vhosts/{vh}")
    print(f"\n{n} channels: {3 * n} queues, {2 * n} policies, each way into a fresh vhost\n")
    print("| method | wall (s) | RabbitMQ CPU (s) |")
    print("|---|---:|---:|")
    for method, wall, cpu in rows:
        print(f"| {method} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
