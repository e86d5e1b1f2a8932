#!/usr/bin/env python3
"""Apply at scale: N channels (default 5,000: 2,000 SQS with both alarms, 2,000 RabbitMQ in
policy mode, 1,000 Kafka; 21,000 changes) applied from nothing at each --parallelism, each
run on a private, freshly started stack (its own state folder and ports, so the shared local
stack and the tests using it are not touched, and every run starts from the same empty
servers). Reports wall time, dlqctl's peak RSS and CPU time, each server's CPU time during the
apply (from /proc/PID/stat), the write calls dlqctl made (`apply --stats`), and checks that a
plan afterwards is empty; then plans the applied estate directly and through bench/delayproxy.py
(+20 ms a call), with the servers' CPU time beside plan's wall time.

usage: bench/apply.py [--channels 5000] [--parallelism 1,8] [--dlqctl PATH] [--keep] [--plans N]
       [--compare BIN,BIN,...]   (plan the applied estate with each binary instead: build profiles)
Needs the stack's servers installed (`scripts/stack up` once) and a release build.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from plan import free_port, measured, stats  # noqa: E402

# Ports of the private stack: none of them is the shared stack's, the cold-stack test's or
# the tests' proxies'.
PORTS = {
    "DLQCTL_EPMD_PORT": "4399",
    "DLQCTL_RABBITMQ_AMQP_PORT": "5662",
    "DLQCTL_RABBITMQ_HTTP_PORT": "15662",
    "DLQCTL_RABBITMQ_PROMETHEUS_PORT": "15652",
    "DLQCTL_MOTO_PORT": "5030",
    "DLQCTL_KAFKA_PORT": "9122",
    "DLQCTL_RABBITMQ_NODENAME": "dlqctl-bench@localhost",
}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU time of a process so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def stack(env, *args):
    subprocess.run([os.path.join(ROOT, "scripts", "stack"), *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def server_pids(state):
    pids = {}
    for name in ("rabbitmq", "moto", "kafka"):
        with open(os.path.join(state, f"{name}.pid")) as f:
            pids[name] = int(f.read().strip())
    return pids


def plan_once(dlqctl, cwd, env, pids, label, own_cpu=False):
    """One plan, which must be empty; its wall time and each server's CPU time meanwhile
    (with own_cpu, also dlqctl's own user + system CPU time and peak RSS)."""
    before = {k: cpu_seconds(v) for k, v in pids.items()}
    code, out, err, wall, rss, cpu = measured([dlqctl, "plan", ".", "--detailed-exitcode", "--color", "never"], cwd, env,
                                              cpu=True)
    after = {k: cpu_seconds(v) for k, v in pids.items()}
    if code != 0:
        sys.exit(f"plan ({label}) exit {code}; it must be empty:\n{out[-2000:]}\n{err[-2000:]}")
    server = {k: after[k] - before[k] for k in pids}
    print(f"  plan {label}: {wall:.2f} s (dlqctl CPU {cpu:.2f} s); servers' CPU: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in server.items()), flush=True)
    return (wall, server, cpu, rss) if own_cpu else (wall, server)


def compare(binaries, runs, cwd, env, pids):
    """Plans the applied estate with each binary in turn (round-robin, `runs` rounds, so a
    change in the machine's load falls on every binary alike): the build-profile table of
    BENCHMARKS.md, one row per binary."""
    results = {b: [] for b in binaries}
    for r in range(runs):
        for b in binaries:
            results[b].append(plan_once(b, cwd, env, pids, f"{b} (round {r + 1})", own_cpu=True))
    print("\n| binary | size (MB) | plan wall, median (s) | dlqctl CPU, median (s) | peak RSS (MiB) | wall ÷ busiest server, each run |")
    print("|---|---:|---:|---:|---:|---|")
    for b, rs in results.items():
        ratios = ", ".join(f"{w / max(s.values()):.2f}" for w, s, _, _ in rs)
        print(f"| `{b}` | {os.path.getsize(b) / 1e6:.1f} | {statistics.median(w for w, _, _, _ in rs):.2f} | "
              f"{statistics.median(c for _, _, c, _ in rs):.2f} | {max(m for _, _, _, m in rs):.0f} | {ratios} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=5000)
    ap.add_argument("--parallelism", default="1,8")
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--keep", action="store_true", help="leave the last run's private stack up")
    ap.add_argument("--plans", type=int, default=3, help="plans of the applied estate, direct and delayed")
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--compare", default="", help="comma-separated dlqctl binaries: after the apply, plan the estate "
                    "with each, round-robin, --plans rounds (the build-profile table); then stop")
    a = ap.parse_args()
    n = a.channels
    n_sqs, n_rmq, n_kafka = 2 * n // 5, 2 * n // 5, n - 4 * n // 5
    prefix = f"b{n}."
    state = tempfile.mkdtemp(prefix="dlqctl-bench-stack-")
    env = dict(os.environ, DLQCTL_STATE=state, DLQCTL_STACK_DRAW_TOOLS="0", **PORTS)
    for k in ("DLQCTL_RABBITMQ_URL", "DLQCTL_AWS_ENDPOINT", "DLQCTL_KAFKA_BOOTSTRAP", "DLQCTL_AMQP_URL"):
        env.pop(k, None)
    env.update(DLQCTL_RABBITMQ_USER="guest", DLQCTL_RABBITMQ_PASSWORD="guest", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1")
    rabbit = f"http://127.0.0.1:{PORTS['DLQCTL_RABBITMQ_HTTP_PORT']}"
    aws = f"http://127.0.0.1:{PORTS['DLQCTL_MOTO_PORT']}"
    kafka = f"127.0.0.1:{PORTS['DLQCTL_KAFKA_PORT']}"
    work = os.path.join(ROOT, "bench", ".work", f"apply-{n}")
    shutil.rmtree(work, ignore_errors=True)
    mix = ["--mix", f"{n_sqs}:{n_rmq}:{n_kafka}", "--prefix", prefix, "--vhost", "/"]
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n), work] + mix
                   + ["--aws", aws, "--rabbit", rabbit, "--kafka", kafka], check=True)
    rows = []
    try:
        for p in [int(x) for x in a.parallelism.split(",")]:
            # A fresh private stack: empty servers, the same for every run.
            stack(env, "down")
            shutil.rmtree(state, ignore_errors=True)
            os.makedirs(state)
            stack(env, "up", "--only", "rabbitmq,moto,kafka")
            pids = server_pids(state)
            before = {k: cpu_seconds(v) for k, v in pids.items()}
            print(f"parallelism {p}: applying {n} channels (progress every 30 s) ...", flush=True)
            code, out, err, wall, rss, cpu = measured(
                [a.dlqctl, "apply", ".", "--auto-approve", "--stats", "--color", "never", "--parallelism", str(p)],
                work, env, progress=True, cpu=True)
            after = {k: cpu_seconds(v) for k, v in pids.items()}
            with open(os.path.join(work, f"apply-p{p}.stderr"), "w") as f:
                f.write(err)
            if code != 0:
                failed = [l for l in err.splitlines() if "FAILED" in l or l.startswith(("  failed:", "Apply stopped", "error"))]
                sys.exit(f"apply failed (stderr in {work}/apply-p{p}.stderr):\n" + "\n".join(failed[:20]))
            applied = re.search(r"Apply complete: (\d+)", err)
            calls = stats(err)
            writes = sum(v for k, v in calls.items()
                         if k.split(" ")[0] in ("PUT", "POST", "DELETE")
                         or re.match(r"\w+:(Create|Set|Tag|Put|Delete|Alter|Incremental)", k))
            pwall, pserver = plan_once(a.dlqctl, work, env, pids, f"after apply at parallelism {p}")
            server = {k: after[k] - before[k] for k in pids}
            rows.append((p, int(applied.group(1)) if applied else 0, wall, rss, cpu, server, writes, calls, pwall))
            busiest = max(server, key=server.get)
            print(f"  {wall:.1f} s, peak RSS {rss:.0f} MiB, dlqctl CPU {cpu:.1f} s; servers' CPU: "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in server.items())
                  + f"; wall / busiest ({busiest}) = {wall / server[busiest]:.2f}; writes {writes}; plan after: empty ({pwall:.1f} s)",
                  flush=True)
        if a.compare:
            compare([b for b in a.compare.split(",") if b], a.plans, work, env, pids)
            return
        # Plan of the applied estate, direct and through a proxy adding latency to every call
        # towards RabbitMQ and moto (Kafka: only the bootstrap connection), with the servers'
        # CPU time: what is left of plan's wall time once the servers' own work is taken out.
        plans = {"direct": [plan_once(a.dlqctl, work, env, pids, "direct") for _ in range(a.plans)]}
        proxies = []
        try:
            rp, ap_ = free_port(), free_port()
            for port, up in ((rp, rabbit), (ap_, aws)):
                proxies.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "bench", "delayproxy.py"), str(port),
                                                 up.split("://", 1)[1], "--latency-ms", str(a.latency_ms),
                                                 "--max-seconds", "1800"]))
            time.sleep(0.5)
            slow = work + "-delayed"
            shutil.rmtree(slow, ignore_errors=True)
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n), slow] + mix
                           + ["--aws", f"http://127.0.0.1:{ap_}", "--rabbit", f"http://127.0.0.1:{rp}", "--kafka", kafka],
                           check=True, stdout=subprocess.DEVNULL)
            plans[f"+{a.latency_ms:.0f} ms"] = [plan_once(a.dlqctl, slow, env, pids, "delayed") for _ in range(a.plans)]
        finally:
            for pr in proxies:
                pr.kill()
    finally:
        if not a.keep:
            stack(env, "down")
            shutil.rmtree(state, ignore_errors=True)

    print(f"\nchannels: {n} ({n_sqs} SQS with 2 alarms, {n_rmq} RabbitMQ, {n_kafka} Kafka)\n")
    print("| parallelism | changes | wall (s) | peak RSS (MiB) | dlqctl CPU (s) | RabbitMQ CPU (s) | moto CPU (s) | tansu CPU (s) | wall ÷ busiest server | write calls |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p, changes, wall, rss, cpu, server, writes, _, _ in rows:
        busiest = max(server.values())
        print(f"| {p} | {changes} | {wall:.1f} | {rss:.0f} | {cpu:.1f} | {server['rabbitmq']:.1f} | {server['moto']:.1f} | "
              f"{server['kafka']:.1f} | {wall / busiest:.2f} | {writes} |")
    print("\nplan of the applied estate (no changes):\n")
    print("| plan | wall (s) | RabbitMQ CPU (s) | moto CPU (s) | tansu CPU (s) | wall ÷ busiest server |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, runs in plans.items():
        for wall, server in runs:
            print(f"| {label} | {wall:.2f} | {server['rabbitmq']:.1f} | {server['moto']:.1f} | {server['kafka']:.1f} | "
                  f"{wall / max(server.values()):.2f} |")
    print("\ncalls per API during apply (`apply --stats`: the plan's reads, the re-checks, the writes, the settle checks):")
    apis = sorted({k for r in rows for k in r[7]})
    print("| API | " + " | ".join(f"p={r[0]}" for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for api in apis:
        print(f"| `{api}` | " + " | ".join(str(r[7].get(api, 0)) for r in rows) + " |")
    json.dump([{"parallelism": r[0], "changes": r[1], "wall": r[2], "rss_mib": r[3], "dlqctl_cpu": r[4],
                "server_cpu": r[5], "writes": r[6], "calls": r[7]} for r in rows],
              open(os.path.join(work, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
