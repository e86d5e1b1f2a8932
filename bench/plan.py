#!/usr/bin/env python3
"""Plan at scale: N channels (default 5,000: 2,000 SQS with both alarms, 2,000 RabbitMQ,
1,000 Kafka) applied once on the local stack, then planned — directly, and through a proxy
that adds 20 ms of latency to every call. Reports wall time, peak RSS, calls per API from
`plan --stats` against the fewest reads possible, and a modelled naive one-call-at-a-time
strategy for comparison.

usage: bench/plan.py [--channels 5000] [--latency-ms 20] [--runs 3] [--dlqctl PATH]
Needs the stack up (`scripts/stack up`) and a release build (`cargo build --release`).
"""
import argparse
import atexit
import base64
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def measured(cmd, cwd, env, progress=False, cpu=False):
    """Runs cmd; returns exit code, stdout, stderr, wall time and the child's own peak RSS
    (from wait4), and with cpu its user + system CPU time. With progress, prints the child's
    latest progress line every 30 s."""
    # Output goes to files, not pipes: a full pipe would stall the child mid-run.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        shown = start
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG if progress else 0)
            if pid:
                break
            time.sleep(0.1)
            if time.perf_counter() - shown >= 30:
                shown = time.perf_counter()
                size = os.fstat(err.fileno()).st_size
                tail = os.pread(err.fileno(), 4096, max(0, size - 4096)).decode(errors="replace").splitlines()
                steps = [l for l in tail if l.startswith("[") or l.startswith("Applying:")]
                print(f"  {shown - start:6.0f} s  {steps[-1] if steps else '(reading)'}", flush=True)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        result = (os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode(), wall, usage.ru_maxrss / 1024)
        return result + (usage.ru_utime + usage.ru_stime,) if cpu else result


def management(url, env, method, path, body):
    """One call to RabbitMQ's management API (only to create or delete the bench vhost)."""
    auth = base64.b64encode(f"{env['DLQCTL_RABBITMQ_USER']}:{env['DLQCTL_RABBITMQ_PASSWORD']}".encode()).decode()
    req = urllib.request.Request(url.rstrip("/") + path, method=method, data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Basic {auth}", "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        resp.read()


def stats(stderr):
    calls = {}
    for line in stderr.splitlines():
        m = re.match(r"\s+(\d+)\s+(.+)$", line)
        if m:
            calls[m.group(2).strip()] = int(m.group(1))
    return calls


def lower_bound(n_sqs, n_rmq):
    """The fewest reads plan could make for the mix of bench/gen.py, per API: each SQS channel
    has 2 queues and 2 alarms (ListQueues pages of 1,000, one GetQueueAttributes a queue,
    DescribeAlarms pages of 100), each RabbitMQ channel 3 queues (pages of 500) and one listing
    of policies, exchanges and bindings for the vhost, Kafka one Metadata and one DescribeConfigs."""
    q_sqs, alarms, q_rmq = 2 * n_sqs, 2 * n_sqs, 3 * n_rmq
    return {
        "sqs:ListQueues": math.ceil(q_sqs / 1000),
        "sqs:GetQueueAttributes": q_sqs,
        "cloudwatch:DescribeAlarms": math.ceil(alarms / 100),
        "GET /api/queues/{vhost}": math.ceil(q_rmq / 500),
        "GET /api/policies/{vhost}": 1,
        "GET /api/exchanges/{vhost}": 1,
        "GET /api/bindings/{vhost}": 1,
        "kafka:Metadata": 1,
        "kafka:DescribeConfigs": 1,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=5000)
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--cleanup", action="store_true", help="delete the benchmark's RabbitMQ vhost at the end "
                    "(moto and tansu keep their state in memory: `scripts/stack down --only moto,kafka` clears it)")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("DLQCTL_RABBITMQ_USER", "guest")
    env.setdefault("DLQCTL_RABBITMQ_PASSWORD", "guest")
    env.setdefault("AWS_ACCESS_KEY_ID", "testing")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    env.setdefault("AWS_REGION", "us-east-1")
    rabbit = env.get("DLQCTL_RABBITMQ_URL", "http://127.0.0.1:15672")
    aws = env.get("DLQCTL_AWS_ENDPOINT", "http://127.0.0.1:5000")
    kafka = env.get("DLQCTL_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    n = a.channels
    n_sqs, n_rmq, n_kafka = 2 * n // 5, 2 * n // 5, n - 4 * n // 5
    prefix = f"b{n}."
    # A vhost of its own: RabbitMQ matches policies per vhost, and thousands of benchmark
    # policies in `/` would slow every other user of the local stack.
    vhost = f"bench-{n}"
    vh = urllib.parse.quote(vhost, safe="")
    management(rabbit, env, "PUT", f"/api/vhosts/{vh}", {})
    management(rabbit, env, "PUT", f"/api/permissions/{vh}/{urllib.parse.quote(env['DLQCTL_RABBITMQ_USER'], safe='')}",
               {"configure": ".*", "write": ".*", "read": ".*"})
    work = os.path.join(ROOT, "bench", ".work", f"plan-{n}")
    direct, slow = os.path.join(work, "direct"), os.path.join(work, "delayed")
    gen = [sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n)]
    if a.cleanup:
        # Also when the run fails part-way (sys.exit): thousands of policies must not stay behind.
        atexit.register(lambda: (management(rabbit, env, "DELETE", f"/api/vhosts/{vh}", {}),
                                 print(f"deleted RabbitMQ vhost {vhost}")))
    mix = ["--mix", f"{n_sqs}:{n_rmq}:{n_kafka}", "--prefix", prefix, "--vhost", vhost]
    subprocess.run(gen + [direct] + mix + ["--aws", aws, "--rabbit", rabbit, "--kafka", kafka], check=True)

    # Apply once (idempotent: a second run of the benchmark finds nothing to do).
    print(f"applying {n} channels (progress every 30 s) ...", flush=True)
    code, out, err, wall, rss = measured([a.dlqctl, "apply", ".", "--auto-approve", "--color", "never"], direct, env, progress=True)
    if code != 0:
        sys.exit(f"apply failed:\n{err[-3000:]}")
    applied = re.search(r"Apply complete: (\d+)", err)
    print(f"apply: {applied.group(1) if applied else 0} changes in {wall:.1f} s (peak RSS {rss:.0f} MiB)\n")

    proxies = []
    try:
        rp, ap_ = free_port(), free_port()
        for port, up in ((rp, rabbit), (ap_, aws)):
            upstream = up.split("://", 1)[1].rstrip("/")
            proxies.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "delayproxy.py"), str(port), upstream, "--latency-ms", str(a.latency_ms), "--max-seconds", "1800"]))
        time.sleep(0.5)
        subprocess.run(gen + [slow] + mix + ["--aws", f"http://127.0.0.1:{ap_}", "--rabbit", f"http://127.0.0.1:{rp}", "--kafka", kafka], check=True, stdout=subprocess.DEVNULL)
        results = {}
        for label, cwd in (("direct", direct), (f"+{a.latency_ms:.0f} ms per call", slow)):
            rows = []
            for _ in range(a.runs):
                code, out, err, wall, rss = measured([a.dlqctl, "plan", ".", "--detailed-exitcode", "--stats", "--color", "never"], cwd, env)
                if code != 0:
                    sys.exit(f"plan ({label}) exit {code}; it must be empty:\n{out[-2000:]}\n{err[-2000:]}")
                rows.append((wall, rss, stats(err)))
            results[label] = rows
    finally:
        for p in proxies:
            p.kill()

    calls = results["direct"][0][2]
    total = sum(calls.values())
    writes = [k for k in calls if k.split(" ")[0] in ("PUT", "POST", "DELETE") or re.match(r"\w+:(Create|Set|Tag|Put|Delete|Alter)", k)]
    q_sqs, alarms, q_rmq = 2 * n_sqs, 2 * n_sqs, 3 * n_rmq
    bound = lower_bound(n_sqs, n_rmq)
    lower = sum(bound.values())
    print(f"channels: {n} ({n_sqs} SQS with 2 alarms, {n_rmq} RabbitMQ, {n_kafka} Kafka)\n")
    print("| API | calls | lower bound |")
    print("|---|---:|---:|")
    for api in sorted(set(calls) | set(bound)):
        print(f"| `{api}` | {calls.get(api, 0)} | {bound.get(api, '—')} |")
    print(f"| **total** | **{total}** | **{lower}** (+{100 * (total - lower) / lower:.2f}%) |")
    print(f"\nwrite calls during plan: {len(writes)} {writes if writes else ''}\n")
    print("| plan | median wall (s) | peak RSS (MiB) |")
    print("|---|---:|---:|")
    for label, rows in results.items():
        print(f"| {label} | {statistics.median(r[0] for r in rows):.2f} | {max(r[1] for r in rows):.0f} |")
    # A naive one-call-at-a-time reader: per SQS queue GetQueueUrl + GetQueueAttributes +
    # ListQueueTags, per alarm DescribeAlarms + ListTagsForResource, per RabbitMQ queue and
    # policy one GET, per Kafka topic one Metadata + one DescribeConfigs; sequential.
    topics = 3 * n_kafka
    naive = 3 * q_sqs + 2 * alarms + q_rmq + 2 * n_rmq + 2 * topics
    per_call = statistics.median(r[0] for r in results["direct"]) / max(total, 1)
    naive_wall = naive * (a.latency_ms / 1000 + per_call)
    slow_wall = statistics.median(r[0] for r in list(results.values())[1])
    print(f"\nnaive one-call-at-a-time (modelled): {naive} calls ({naive / total:.1f}× dlqctl's), "
          f"≈ {naive_wall:.0f} s with +{a.latency_ms:.0f} ms per call ({naive_wall / slow_wall:.0f}× dlqctl's measured {slow_wall:.1f} s)")
    per_channel = (calls.get("sqs:GetQueueAttributes", 0) + calls.get("sqs:ListQueues", 0) + calls.get("cloudwatch:DescribeAlarms", 0)) / max(n_sqs, 1)
    print(f"SQS reads per channel (2 queues, 2 alarms): dlqctl {per_channel:.2f}; Terraform's AWS provider ≈ 7")


if __name__ == "__main__":
    main()
