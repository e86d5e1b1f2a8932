#!/usr/bin/env python3
"""The exporter's reading cost at scale (issue 36): N channels of the BENCHMARKS.md mix
(bench/gen.py: 2:2:1 SQS with both alarms / RabbitMQ in a vhost of its own / Kafka) applied
once on the local stack (bench/status.py's `applied`), a few dead letters put in a handful of
channels of each backend (so the flow and depth paths read something), then, RUNS times:
`dlqctl exporter . --interval INTERVAL --listen 127.0.0.1:PORT` (no --peek: the exporter's
default) started fresh and scraped until its first reading of every target is served
(`dlq_exporter_reads_total` == the number of targets), then until its second. From the
scrapes: the calls per API of each reading (`dlq_exporter_api_calls_total`; the second
reading's are the difference), each target's reading time (`dlq_exporter_reading_seconds`),
and every channel up with the depths put in; from /proc: the exporter's peak RSS (VmHWM) and
each server's CPU (user + system of RabbitMQ's beam.smp, moto, Kafka's JVM; sampled every
0.25 s) over each reading: the window from the end of the longest target reading back to its
start, beside the server's idle CPU over the quiet part between the two readings.

Beside it, in the same run: `status --stats --no-peek --format json` and `plan --stats`, RUNS
times each (alternately), with their calls, wall time, peak RSS and the servers' CPU, and
plan's lower bound (bench/plan.py's `lower_bound`).

usage: bench/.tools/venv/bin/python bench/exporter_cost.py [--channels 1000] [--runs 3]
         [--interval 60] [--dead-letters 3] [--dlqctl PATH] [--cleanup]
Needs the stack up (`scripts/stack up`, then `eval "$(scripts/stack env)"`), a release build
and bench/.tools/venv (`python3 bench/redrive.py --setup`: boto3 and confluent-kafka put the
SQS and Kafka dead letters in, and delete the Kafka topics with --cleanup). Everything it
starts is stopped by PID. --cleanup deletes the RabbitMQ vhost `bench-exporter-N` and the
Kafka topics of the prefix at the end; moto keeps its queues (in memory: the stack's restart
clears them).
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan import ROOT, free_port, lower_bound, management  # noqa: E402
from status import applied, local_env, measured, mix, stats  # noqa: E402
from exporter_memory import scrape  # noqa: E402

STATE = os.path.join(os.environ.get("DLQCTL_CACHE", os.path.expanduser("~/.cache/dlqctl")), "state")
SERVERS = {"RabbitMQ": "rabbitmq.pid", "moto": "moto.pid", "Kafka": "kafka.pid"}
TARGETS = ("local-kafka", "local-rabbitmq", "local-sqs")
TICK = os.sysconf("SC_CLK_TCK")


def server_pids():
    pids = {}
    for name, f in SERVERS.items():
        with open(os.path.join(STATE, f)) as fh:
            pids[name] = int(fh.read().split()[0])
    return pids


def cpu(pids):
    """Each server's CPU seconds so far (user + system), from /proc/PID/stat."""
    out = {}
    for name, pid in pids.items():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[name] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def series(metrics, name):
    """{first label's value: sample} of a metric ({"": sample} when it has no label)."""
    out = {}
    for line in metrics.splitlines():
        m = re.match(rf"{name}(?:\{{(.*)\}})? (\S+)$", line)
        if m:
            first = re.match(r'\w+="((?:[^"\\]|\\.)*)"', m.group(1) or "")
            out[first.group(1) if first else ""] = float(m.group(2))
    return out


def dead_letters(work, env, dlqctl, per_backend):
    """Puts `per_backend` dead letters (1 to per_backend messages) into the DLQs of the first
    `per_backend` channels of each backend whose DLQ is empty; returns {dlq name: depth} of
    every DLQ, as they should read afterwards."""
    code, out, err, _, _ = measured([dlqctl, "status", ".", "--no-peek", "--format", "json", "--color", "never"],
                                    work, env)
    if code not in (0, 2):
        sys.exit(f"status before the dead letters: exit {code}\n{err[-2000:]}")
    chans = json.loads(out)["channels"]
    depth = {c["deadLetter"]["name"]: c["deadLetter"]["depth"] for c in chans}
    chosen = {}
    for backend in ("sqs", "rabbitmq", "kafka"):
        of = [c for c in chans if c["backend"] == backend]
        chosen[backend] = [c["deadLetter"]["name"] for c in of[:per_backend]]
    _, rabbit, aws, kafka = local_env()
    with open(os.path.join(work, "dlqctl.yaml"), encoding="utf-8") as f:
        vhost = json.loads(re.search(r'vhost: ("[^"]*")', f.read()).group(1))
    import boto3
    from confluent_kafka import Producer
    sqs = boto3.client("sqs", endpoint_url=aws, region_name=env["AWS_REGION"],
                       aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    producer = Producer({"bootstrap.servers": kafka})
    vh = urllib.parse.quote(vhost, safe="")
    put = 0
    for backend, names in chosen.items():
        for i, name in enumerate(names):
            k = i + 1
            if depth.get(name):
                continue
            for j in range(k):
                body = json.dumps({"bench": "exporter_cost", "n": j})
                if backend == "sqs":
                    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
                    sqs.send_message(QueueUrl=url, MessageBody=body)
                elif backend == "rabbitmq":
                    management(rabbit, env, "POST", f"/api/exchanges/{vh}/amq.default/publish",
                               {"properties": {"headers": {"dlq-error-class": "poison"}}, "routing_key": name,
                                "payload": body, "payload_encoding": "string"})
                else:
                    producer.produce(name, body.encode(), headers={"dlq-error-class": "poison"})
            depth[name] = k
            put += k
    if producer.flush(30) != 0:
        sys.exit("Kafka: dead letters not delivered within 30 s")
    # RabbitMQ's listing counts a queue's messages from statistics emitted every 5 s: the
    # readings start once status reads every depth put in (at most 60 s).
    for _ in range(12):
        code, out, err, _, _ = measured([dlqctl, "status", ".", "--no-peek", "--format", "json", "--color", "never"],
                                        work, env)
        chans = json.loads(out)["channels"] if code == 0 else []
        if code == 0 and all(c["deadLetter"]["depth"] == depth.get(c["deadLetter"]["name"], 0) for c in chans):
            break
        time.sleep(5)
    checked(chans, depth, "status after the dead letters")
    print(f"dead letters: {put} put now; {sum(1 for v in depth.values() if v)} DLQs hold some "
          f"({per_backend} per backend); every other DLQ empty", flush=True)
    return depth


def checked(doc_channels, want, label):
    """Every channel read, no error, each DLQ at the depth put in."""
    bad = [c["channel"] for c in doc_channels
           if c.get("error") or c["deadLetter"].get("depth") != want.get(c["deadLetter"]["name"], 0)]
    if len(doc_channels) != len(want) or bad:
        sys.exit(f"{label}: {len(doc_channels)} channels, not {len(want)}; errors or unexpected depths: {bad[:5]}")


def exporter_run(a, work, env, pids, want, port):
    """One exporter, two readings; returns a dict of what they cost."""
    cmd = ["nice", "-n", "10", a.dlqctl, "exporter", ".", "--interval", f"{a.interval}s", "--listen",
           f"127.0.0.1:{port}"]
    samples = []  # (time, {server: cpu seconds})
    log = open(os.path.join(work, "exporter.log"), "w")
    p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=log)
    started = time.perf_counter()
    ends = {}
    try:
        deadline = started + a.interval + a.timeout
        scrapes = {}
        while time.perf_counter() < deadline and len(scrapes) < 2:
            samples.append((time.perf_counter(), cpu(pids)))
            m = scrape(port)
            reads = series(m, "dlq_exporter_reads_total").get("", 0)
            for k in (1, 2):
                if k not in scrapes and reads >= k * len(TARGETS):
                    ends[k] = time.perf_counter()
                    scrapes[k] = (m, vm_hwm_mib(p.pid))
            if p.poll() is not None:
                sys.exit(f"the exporter exited ({p.returncode}); see {log.name}")
            time.sleep(0.25)
        samples.append((time.perf_counter(), cpu(pids)))
        if len(scrapes) < 2:
            sys.exit(f"the exporter did not serve two readings of every target within {a.interval + a.timeout} s "
                     f"({len(scrapes)}); see {log.name}")
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()

    def at(t):
        """The servers' CPU at the last sample taken at or before t."""
        before = [s for s in samples if s[0] <= t]
        return (before[-1] if before else samples[0])[1]

    out = {"readings": []}
    prev_calls = {}
    for k in (1, 2):
        m, hwm = scrapes[k]
        ups = series(m, "dlq_up")
        errors = series(m, "dlq_read_errors")
        if any(v != 1 for v in ups.values()) or any(v != 0 for v in errors.values()) or len(ups) != len(TARGETS):
            sys.exit(f"reading {k}: not every target up: dlq_up {ups}, dlq_read_errors {errors}")
        depths = {}
        for line in m.splitlines():
            d = re.match(r'dlq_depth\{.*queue="([^"]*)".*\} (\S+)$', line)
            if d:
                depths[d.group(1)] = int(float(d.group(2)))
        wrong = {q: (depths.get(q), v) for q, v in want.items() if depths.get(q) != v}
        if wrong:
            sys.exit(f"reading {k}: depths (served, put in) differ: {list(wrong.items())[:5]}")
        calls = {api: int(v) for api, v in series(m, "dlq_exporter_api_calls_total").items()}
        took = series(m, "dlq_exporter_reading_seconds")
        this = {api: calls[api] - prev_calls.get(api, 0) for api in calls if calls[api] - prev_calls.get(api, 0)}
        prev_calls = calls
        window = max(took.values())
        end = ends[k]
        c0, c1 = at(end - window - 0.25), at(end)
        out["readings"].append({"calls": this, "took": took, "hwm": hwm, "window": window,
                                "cpu": {s: c1[s] - c0[s] for s in pids}})
    # Idle: from 1 s after the first reading was served to 1 s before the second began.
    i0, i1 = ends[1] + 1, ends[2] - out["readings"][1]["window"] - 1
    if i1 - i0 >= 5:
        c0, c1 = at(i0), at(i1)
        out["idle"] = {s: (c1[s] - c0[s]) / (i1 - i0) for s in pids}
    else:
        out["idle"] = None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval", type=int, default=60, help="seconds between the exporter's two readings")
    ap.add_argument("--timeout", type=int, default=600, help="seconds the readings may take beyond the interval")
    ap.add_argument("--dead-letters", type=int, default=3, help="channels of each backend given dead letters")
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--cleanup", action="store_true")
    a = ap.parse_args()
    a.dlqctl = os.path.abspath(a.dlqctl)
    n = a.channels
    n_sqs, n_rmq, n_kafka = mix(n)
    prefix = f"ex{n}."
    pids = server_pids()
    if a.cleanup:
        import atexit
        atexit.register(lambda: delete_topics(prefix))
    env, work = applied(n, a.dlqctl, prefix, f"bench-exporter-{n}", os.path.join(ROOT, "bench", ".work", f"exporter-{n}"),
                        a.cleanup)
    want = dead_letters(work, env, a.dlqctl, a.dead_letters)

    runs = []
    for i in range(a.runs):
        r = exporter_run(a, work, env, pids, want, free_port())
        runs.append(r)
        for k, rd in enumerate(r["readings"], 1):
            print(f"exporter run {i + 1} reading {k}: {sum(rd['calls'].values())} calls, "
                  f"{', '.join(f'{t} {s:.2f} s' for t, s in sorted(rd['took'].items()))}, VmHWM {rd['hwm']:.0f} MiB, "
                  f"CPU {', '.join(f'{s} {c:.2f} s' for s, c in rd['cpu'].items())}", flush=True)

    cmds = {
        "status": [a.dlqctl, "status", ".", "--stats", "--no-peek", "--format", "json", "--color", "never"],
        "plan": [a.dlqctl, "plan", ".", "--stats", "--detailed-exitcode", "--color", "never"],
    }
    rows = {k: [] for k in cmds}
    for i in range(a.runs):
        for label in (("status", "plan") if i % 2 == 0 else ("plan", "status")):
            c0 = cpu(pids)
            code, out, err, wall, rss = measured(["nice", "-n", "10", *cmds[label]], work, env)
            c1 = cpu(pids)
            if label == "plan" and code != 0:
                sys.exit(f"plan exit {code}; it must be empty:\n{out[-2000:]}\n{err[-2000:]}")
            if label == "status":
                if code != 0:
                    sys.exit(f"status exit {code}:\n{out[-2000:]}\n{err[-2000:]}")
                checked(json.loads(out)["channels"], want, "status")
            rows[label].append((wall, rss, stats(err), {s: c1[s] - c0[s] for s in pids}))
            print(f"run {i + 1} {label:6}: {wall:6.2f} s, peak RSS {rss:5.0f} MiB, {sum(rows[label][-1][2].values())} calls",
                  flush=True)

    bound = lower_bound(n_sqs, n_rmq)
    lower = sum(bound.values())
    first = runs[0]["readings"][0]["calls"]
    second = runs[0]["readings"][1]["calls"]
    sc, pc = rows["status"][0][2], rows["plan"][0][2]
    print(f"\nchannels: {n} ({n_sqs} SQS with 2 alarms, {n_rmq} RabbitMQ, {n_kafka} Kafka); "
          f"dead letters in {sum(1 for v in want.values() if v)} DLQs\n")
    print("| API | exporter, 1st reading | exporter, 2nd reading | `status --no-peek` | `plan` | plan's lower bound |")
    print("|---|---:|---:|---:|---:|---:|")
    for api in sorted(set(first) | set(second) | set(sc) | set(pc) | set(bound)):
        print(f"| `{api}` | {first.get(api, 0)} | {second.get(api, 0)} | {sc.get(api, 0)} | {pc.get(api, 0)} | "
              f"{bound.get(api, '—')} |")
    tot = [sum(x.values()) for x in (first, second, sc, pc)]
    print("| **total** | " + " | ".join(f"**{t}** ({100 * (t - lower) / lower:+.2f}%)" for t in tot) + f" | **{lower}** |")
    every = {"exporter": [sum(rd["calls"].values()) for r in runs for rd in r["readings"]],
             **{k: [sum(x[2].values()) for x in v] for k, v in rows.items()}}
    print(f"\n(calls of every run: {json.dumps(every)})")

    print("\n| target | exporter reading time, median (s) | readings (s) |")
    print("|---|---:|---|")
    for t in TARGETS:
        ts = [rd["took"][t] for r in runs for rd in r["readings"]]
        print(f"| `{t}` | {statistics.median(ts):.2f} | {', '.join(f'{x:.2f}' for x in ts)} |")

    print("\n| command | median wall (s) | runs (s) | peak RSS (MiB) |")
    print("|---|---:|---|---:|")
    hwms = [rd["hwm"] for r in runs for rd in r["readings"]]
    print(f"| exporter (VmHWM after the 1st / 2nd reading) | — | — | "
          f"{max(r['readings'][0]['hwm'] for r in runs):.0f} / {max(hwms):.0f} |")
    for label, rs in rows.items():
        print(f"| `{' '.join(cmds[label][1:])}` | {statistics.median(r[0] for r in rs):.2f} | "
              f"{', '.join(f'{r[0]:.2f}' for r in rs)} | {max(r[1] for r in rs):.0f} |")

    print("\n| servers' CPU (s, median of the runs) | " + " | ".join(SERVERS) + " |")
    print("|---|" + "---:|" * len(SERVERS))
    for k, name in ((0, "exporter, 1st reading"), (1, "exporter, 2nd reading")):
        win = statistics.median(r["readings"][k]["window"] for r in runs)
        print(f"| {name} (window {win:.1f} s) | " + " | ".join(
            f"{statistics.median(r['readings'][k]['cpu'][s] for r in runs):.2f}" for s in SERVERS) + " |")
    idle = [r["idle"] for r in runs if r["idle"]]
    if idle:
        print("| idle, per second between the readings | " + " | ".join(
            f"{statistics.median(i[s] for i in idle):.3f}" for s in SERVERS) + " |")
    for label, rs in rows.items():
        print(f"| `{label}` (wall {statistics.median(r[0] for r in rs):.1f} s) | " + " | ".join(
            f"{statistics.median(r[3][s] for r in rs):.2f}" for s in SERVERS) + " |")


def delete_topics(prefix):
    from confluent_kafka.admin import AdminClient
    _, _, _, kafka = local_env()
    admin = AdminClient({"bootstrap.servers": kafka})
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix)]
    if topics:
        for f in admin.delete_topics(topics, operation_timeout=120).values():
            f.result()
    print(f"deleted {len(topics)} Kafka topics of {prefix}")


if __name__ == "__main__":
    main()
