#!/usr/bin/env python3
"""Plan, apply and status at scale on Apache Kafka alone (issue 33): N Kafka channels (bench/gen.py,
mix 0:0:1; three topics each: main, retry, dead-letter) applied once on the local stack's broker,
then `plan --stats` and `status --stats` (`--no-peek`, and the default read with samples)
alternately, RUNS times each. Reports for every command its wall time, peak RSS and calls per
API (`--stats`), and beside them the broker's own CPU time over the same command (utime + stime
of the broker's JVM from /proc, read before and after: the broker is idle otherwise).

usage: bench/kafka_scale.py [--channels 1000] [--runs 3] [--dlqctl PATH] [--cleanup]
Needs the stack up (`scripts/stack up`, then `eval "$(scripts/stack env)"`) and a release build.
--cleanup deletes the bench's topics at the end (with the confluent-kafka of bench/.tools/venv,
made by `python3 bench/redrive.py --setup`).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan import ROOT  # noqa: E402
from status import measured, stats  # noqa: E402

STATE = os.path.join(os.environ.get("DLQCTL_CACHE", os.path.expanduser("~/.cache/dlqctl")), "state")


def broker_cpu():
    """The broker JVM's CPU seconds so far (user + system), from /proc/PID/stat."""
    with open(os.path.join(STATE, "kafka.pid")) as f:
        pid = f.read().strip()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--cleanup", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ)
    kafka = env.get("DLQCTL_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    if urllib.parse.urlsplit("tcp://" + kafka).hostname not in ("127.0.0.1", "localhost"):
        sys.exit(f"refusing a non-local endpoint: {kafka}")
    n = a.channels
    prefix = f"ks{n}.{os.getpid()}."
    work = os.path.join(ROOT, "bench", ".work", f"kafka-scale-{n}")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n), work, "--mix", "0:0:1",
                    "--prefix", prefix, "--kafka", kafka], check=True)

    def run(label, cmd, progress=False):
        cpu0 = broker_cpu()
        code, out, err, wall, rss = measured(cmd, work, env, progress)
        return code, out, err, wall, rss, broker_cpu() - cpu0

    print(f"applying {n} Kafka channels ({3 * n} topics) ...", flush=True)
    code, out, err, wall, rss, bcpu = run("apply", [a.dlqctl, "apply", ".", "--auto-approve", "--stats",
                                                     "--color", "never"], progress=True)
    if code != 0:
        sys.exit(f"apply failed:\n{err[-3000:]}")
    applied = re.search(r"Apply complete: (\d+)", err)
    rows = {"apply": [(wall, rss, bcpu, stats(err))]}
    print(f"apply: {applied.group(1) if applied else 0} changes in {wall:.1f} s, peak RSS {rss:.0f} MiB, "
          f"broker CPU {bcpu:.1f} s, {sum(stats(err).values())} calls", flush=True)

    cmds = {
        "plan": [a.dlqctl, "plan", ".", "--stats", "--detailed-exitcode", "--color", "never"],
        "status --no-peek": [a.dlqctl, "status", ".", "--stats", "--no-peek", "--format", "json", "--color", "never"],
        "status": [a.dlqctl, "status", ".", "--stats", "--format", "json", "--color", "never"],
    }
    for k in cmds:
        rows[k] = []
    for i in range(a.runs):
        order = list(cmds) if i % 2 == 0 else list(reversed(cmds))
        for label in order:
            code, out, err, wall, rss, bcpu = run(label, cmds[label])
            if label == "plan" and code != 0:
                sys.exit(f"plan exit {code}; it must be empty after apply:\n{out[-2000:]}\n{err[-2000:]}")
            if label.startswith("status"):
                if code != 0:
                    sys.exit(f"{label} exit {code}:\n{out[-2000:]}\n{err[-2000:]}")
                chans = json.loads(out)["channels"]
                bad = [c["channel"] for c in chans if c.get("error") or c["deadLetter"].get("depth") != 0]
                if len(chans) != n or bad:
                    sys.exit(f"{label}: {len(chans)} channels, not {n}; errors or non-empty DLQs: {bad[:5]}")
            rows[label].append((wall, rss, bcpu, stats(err)))
            print(f"run {i + 1} {label:17}: {wall:6.2f} s, peak RSS {rss:5.0f} MiB, broker CPU {bcpu:5.2f} s, "
                  f"{sum(rows[label][-1][3].values())} calls", flush=True)

    print(f"\n{n} Kafka channels ({3 * n} topics of 1 partition), {a.runs} runs each\n")
    print("| command | median wall (s) | runs (s) | peak RSS (MiB) | broker CPU (s, median) | calls |")
    print("|---|---:|---|---:|---:|---|")
    for label, rs in rows.items():
        walls = [r[0] for r in rs]
        calls = ", ".join(f"{api} {c}" for api, c in sorted(rs[-1][3].items()))
        print(f"| `{label}` | {statistics.median(walls):.2f} | {', '.join(f'{w:.2f}' for w in walls)} | "
              f"{max(r[1] for r in rs):.0f} | {statistics.median(r[2] for r in rs):.2f} | {calls} |")

    if a.cleanup:
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": kafka})
        topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix)]
        for f in admin.delete_topics(topics, operation_timeout=60).values():
            f.result()
        print(f"deleted {len(topics)} topics")


if __name__ == "__main__":
    main()
