#!/usr/bin/env python3
"""Status at scale: N channels (the BENCHMARKS.md mix, bench/gen.py: 2:2:1 SQS with both
alarms / RabbitMQ in a vhost of its own / Kafka) applied once on the local stack, then
`dlqctl status --stats --no-peek --format json` and `dlqctl plan --stats` run alternately,
RUNS times each. Reports wall time, peak RSS (/usr/bin/time) and calls per API side by side against
plan's lower bound (the fewest reads possible, as bench/plan.py computes it), then the wall
time of `status --channel NAME` (samples on: the default read) for one channel of each backend.
Every DLQ is empty (nothing was ever dead-lettered), so status reads depth only either way.

usage: bench/status.py [--channels 1000] [--runs 3] [--one-runs 5] [--dlqctl PATH] [--cleanup]
Needs the stack up (`scripts/stack up`, then `eval "$(scripts/stack env)"`) and a release build.
--cleanup deletes the RabbitMQ vhost `bench-status-N` at the end (moto and tansu keep their
state in memory: `scripts/stack down --only moto,kafka` clears it).
"""
import argparse
import atexit
import json
import os
import re
import statistics
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan import ROOT, lower_bound, management  # noqa: E402
from plan import measured as _measured  # noqa: E402


def measured(cmd, cwd, env, progress=False):
    """plan.py's measured(), with the peak RSS from GNU time: Python starts children with
    vfork, so wait4's ru_maxrss is at least this parent's own RSS."""
    import tempfile
    with tempfile.NamedTemporaryFile("r") as t:
        code, out, err, wall, _ = _measured(["/usr/bin/time", "-f", "%M", "-o", t.name, *cmd], cwd, env, progress)
        return code, out, err, wall, int(t.read().split()[-1]) / 1024


def stats(stderr):
    """Calls per API from `--stats` on stderr (lines `   N  API`)."""
    calls = {}
    for line in stderr.splitlines():
        m = re.match(r"\s+(\d+)\s+(\S.*)$", line)
        if m:
            calls[m.group(2).strip()] = int(m.group(1))
    return calls


def mix(n):
    """The channels of each backend in N of the mix: 2:2:1 SQS, RabbitMQ, Kafka."""
    return 2 * n // 5, 2 * n // 5, n - 4 * n // 5


def local_env():
    """The environment for dlqctl, with the stack's defaults; the endpoints (RabbitMQ's, AWS's,
    Kafka's), refusing any that is not on 127.0.0.1."""
    env = dict(os.environ)
    for k, v in (("DLQCTL_RABBITMQ_USER", "guest"), ("DLQCTL_RABBITMQ_PASSWORD", "guest"),
                 ("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_REGION", "us-east-1")):
        env.setdefault(k, v)
    rabbit = env.get("DLQCTL_RABBITMQ_URL", "http://127.0.0.1:15672")
    aws = env.get("DLQCTL_AWS_ENDPOINT", "http://127.0.0.1:5000")
    kafka = env.get("DLQCTL_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    for u in (rabbit, aws, "tcp://" + kafka):
        if urllib.parse.urlsplit(u).hostname not in ("127.0.0.1", "localhost"):
            sys.exit(f"refusing a non-local endpoint: {u}")
    return env, rabbit, aws, kafka


def applied(n, dlqctl, prefix, vhost, work, cleanup):
    """N channels of the mix (bench/gen.py) written to WORK and applied once, RabbitMQ's in a
    vhost of their own (made here, deleted at exit with CLEANUP); returns (env, work)."""
    env, rabbit, aws, kafka = local_env()
    n_sqs, n_rmq, n_kafka = mix(n)
    vh = urllib.parse.quote(vhost, safe="")
    management(rabbit, env, "PUT", f"/api/vhosts/{vh}", {})
    management(rabbit, env, "PUT", f"/api/permissions/{vh}/{urllib.parse.quote(env['DLQCTL_RABBITMQ_USER'], safe='')}",
               {"configure": ".*", "write": ".*", "read": ".*"})
    if cleanup:
        atexit.register(lambda: (management(rabbit, env, "DELETE", f"/api/vhosts/{vh}", {}),
                                 print(f"deleted RabbitMQ vhost {vhost}")))
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n), work, "--mix",
                    f"{n_sqs}:{n_rmq}:{n_kafka}", "--prefix", prefix, "--vhost", vhost,
                    "--aws", aws, "--rabbit", rabbit, "--kafka", kafka], check=True)
    print(f"applying {n} channels (progress every 30 s) ...", flush=True)
    code, out, err, wall, rss = measured([dlqctl, "apply", ".", "--auto-approve", "--color", "never"], work, env,
                                         progress=True)
    if code != 0:
        sys.exit(f"apply failed:\n{err[-3000:]}")
    done = re.search(r"Apply complete: (\d+)", err)
    print(f"apply: {done.group(1) if done else 0} changes in {wall:.1f} s (peak RSS {rss:.0f} MiB)\n", flush=True)
    return env, work


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--one-runs", type=int, default=5)
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--cleanup", action="store_true")
    a = ap.parse_args()
    n = a.channels
    n_sqs, n_rmq, n_kafka = mix(n)
    prefix = f"st{n}."
    env, work = applied(n, a.dlqctl, prefix, f"bench-status-{n}", os.path.join(ROOT, "bench", ".work", f"status-{n}"),
                        a.cleanup)

    cmds = {
        "status": [a.dlqctl, "status", ".", "--stats", "--no-peek", "--format", "json", "--color", "never"],
        "plan": [a.dlqctl, "plan", ".", "--stats", "--detailed-exitcode", "--color", "never"],
    }
    rows = {k: [] for k in cmds}
    for i in range(a.runs):
        for label in (("status", "plan") if i % 2 == 0 else ("plan", "status")):
            code, out, err, wall, rss = measured(cmds[label], work, env)
            if label == "plan" and code != 0:
                sys.exit(f"plan exit {code}; it must be empty:\n{out[-2000:]}\n{err[-2000:]}")
            if label == "status":
                if code != 0:
                    sys.exit(f"status exit {code}:\n{out[-2000:]}\n{err[-2000:]}")
                doc = json.loads(out)
                chans = doc["channels"]
                bad = [c["channel"] for c in chans if c.get("error") or c["deadLetter"].get("depth") != 0]
                if len(chans) != n or bad:
                    sys.exit(f"status: {len(chans)} channels, not {n}; errors or non-empty DLQs: {bad[:5]}")
            rows[label].append((wall, rss, stats(err)))
            print(f"run {i + 1} {label:6}: {wall:6.2f} s, peak RSS {rss:5.0f} MiB, {sum(rows[label][-1][2].values())} calls",
                  flush=True)

    bound = lower_bound(n_sqs, n_rmq)
    lower = sum(bound.values())
    sc, pc = rows["status"][0][2], rows["plan"][0][2]
    print(f"\nchannels: {n} ({n_sqs} SQS with 2 alarms, {n_rmq} RabbitMQ, {n_kafka} Kafka)\n")
    print("| API | status --no-peek | plan | plan's lower bound |")
    print("|---|---:|---:|---:|")
    for api in sorted(set(sc) | set(pc) | set(bound)):
        print(f"| `{api}` | {sc.get(api, 0)} | {pc.get(api, 0)} | {bound.get(api, '—')} |")
    st, pt = sum(sc.values()), sum(pc.values())
    print(f"| **total** | **{st}** ({100 * (st - lower) / lower:+.2f}% of the bound) | **{pt}** "
          f"({100 * (pt - lower) / lower:+.2f}%) | **{lower}** |")
    if any(r[2] != sc for r in rows["status"]) or any(r[2] != pc for r in rows["plan"]):
        print("(calls differed between runs: " + json.dumps({k: [sum(r[2].values()) for r in v] for k, v in rows.items()}) + ")")
    print("\n| command | median wall (s) | runs (s) | peak RSS (MiB) |")
    print("|---|---:|---|---:|")
    for label, rs in rows.items():
        print(f"| `{' '.join(cmds[label][1:])}` | {statistics.median(r[0] for r in rs):.2f} | "
              f"{', '.join(f'{r[0]:.2f}' for r in rs)} | {max(r[1] for r in rs):.0f} |")

    # One channel of each backend, the default read (samples on).
    names = {"SQS": f"{prefix.replace('.', '-')}sqs-00000", "RabbitMQ": f"{prefix}rmq-{n_sqs:05d}",
             "Kafka": f"{prefix}kafka-{n_sqs + n_rmq:05d}"}
    print("\n| one channel: `status . --channel NAME` | median wall (s) | runs (s) | peak RSS (MiB) | calls |")
    print("|---|---:|---|---:|---:|")
    for backend, name in names.items():
        rs = []
        for _ in range(a.one_runs):
            code, out, err, wall, rss = measured([a.dlqctl, "status", ".", "--channel", name, "--stats", "--format", "json",
                                                  "--color", "never"], work, env)
            if code != 0:
                sys.exit(f"status --channel {name}: exit {code}\n{out[-1000:]}\n{err[-1000:]}")
            rs.append((wall, rss, sum(stats(err).values())))
        print(f"| {backend} (`{name}`) | {statistics.median(r[0] for r in rs):.3f} | "
              f"{', '.join(f'{r[0]:.3f}' for r in rs)} | {max(r[1] for r in rs):.0f} | {rs[0][2]} |", flush=True)


if __name__ == "__main__":
    main()
