#!/usr/bin/env python3
"""The exporter's memory while its targets are down (issue 31, finding 13): `dlqctl exporter
--interval 1s` over four channels on four targets, every one of them failing every reading,
for SECONDS (default 3600), sampling the exporter's RSS (VmRSS) and `dlq_exporter_reads_total`
every 10 s. Prints the samples and a summary: the anonymous resident memory (RssAnon: the
heap; VmRSS also counts the binary's own pages, which the kernel drops and reloads as other
processes need memory, so it moves by megabytes with no allocation at all) after the first
minute (warm-up: clients, TLS roots, allocator arenas), at the end, the range in between, and
the readings made.

The four targets: Kafka is a private tansu broker (the stack's binary, on a free port) that
the exporter reads once, up, before the broker is stopped: the case that leaked (a client
that knew a broker and keeps reconnecting to it). RabbitMQ, SQS and Pub/Sub point at closed
ports on 127.0.0.1 (refused at once; nothing of the shared stack is touched or stopped).

usage: bench/exporter_memory.py [--seconds 3600] [--dlqctl PATH] [--out samples.txt]
Runs under `nice -n 19`; everything it starts is stopped by PID when it ends.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("DLQCTL_CACHE", os.path.expanduser("~/.cache/dlqctl"))
TANSU = os.path.join(CACHE, "tansu-0.6.0", "bin", "tansu")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_tcp(port, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def scrape(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def value(metrics, prefix):
    for line in metrics.splitlines():
        if line.startswith(prefix):
            return line.rsplit(" ", 1)[-1]
    return "?"


def rss_kib(pid):
    """(RssAnon, VmRSS) in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out.get("RssAnon", 0), out.get("VmRSS", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if not os.path.exists(a.dlqctl):
        sys.exit(f"no binary at {a.dlqctl} (--dlqctl PATH)")
    if not os.path.exists(TANSU):
        sys.exit(f"no tansu at {TANSU} (scripts/stack up installs it)")
    work = tempfile.mkdtemp(prefix="dlqctl-bench-exporter-")
    children = []

    def stop():
        for p in children:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)

    try:
        kafka = free_port()
        tansu = subprocess.Popen(
            ["nice", "-n", "19", TANSU, "broker", "--listener-url", f"tcp://127.0.0.1:{kafka}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{kafka}", "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        children.append(tansu)
        if not wait_tcp(kafka, 30):
            sys.exit("the private tansu did not start")
        closed = free_port()  # nothing listens there
        for name in ["orders-rabbitmq.yaml", "payments-sqs.yaml", "inventory-kafka.yaml", "payments-pubsub.yaml"]:
            shutil.copy(os.path.join(ROOT, "examples", name), work)
        shutil.copy(os.path.join(ROOT, "examples", "dlqctl.yaml"), work)
        env = dict(os.environ,
                   DLQCTL_RABBITMQ_URL=f"http://127.0.0.1:{closed}",
                   DLQCTL_AWS_ENDPOINT=f"http://127.0.0.1:{closed}",
                   PUBSUB_EMULATOR_HOST=f"127.0.0.1:{closed}",
                   DLQCTL_KAFKA_BOOTSTRAP=f"127.0.0.1:{kafka}",
                   DLQCTL_RABBITMQ_USER="guest", DLQCTL_RABBITMQ_PASSWORD="guest",
                   AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1")
        port = free_port()
        exporter = subprocess.Popen(
            ["nice", "-n", "19", a.dlqctl, "exporter", ".", "--interval", "1s", "--listen", f"127.0.0.1:{port}"],
            cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        children.append(exporter)
        # Kafka up once, then down for the rest of the run.
        deadline = time.time() + 60
        while time.time() < deadline and value(scrape(port), 'dlq_up{target="local-kafka"') != "1":
            time.sleep(0.5)
        tansu.send_signal(signal.SIGTERM)
        tansu.wait(10)
        started = time.time()
        samples = []
        out = open(a.out, "w") if a.out else None
        print("seconds rss_anon_kib vm_rss_kib readings up(kafka,rabbitmq,sqs,pubsub)", flush=True)
        while time.time() - started < a.seconds and exporter.poll() is None:
            m = scrape(port)
            ups = ",".join(value(m, f'dlq_up{{target="local-{t}"') for t in ["kafka", "rabbitmq", "sqs", "pubsub"])
            anon, vm = rss_kib(exporter.pid)
            row = (int(time.time() - started), anon, vm, value(m, "dlq_exporter_reads_total"), ups)
            samples.append(row)
            line = " ".join(str(x) for x in row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()
            time.sleep(10)
        warm = [s for s in samples if s[0] >= 60] or samples
        rss = [s[1] for s in warm]
        print(f"\nRssAnon after warm-up (60 s): {rss[0]} KiB; at the end ({warm[-1][0]} s): {rss[-1]} KiB; "
              f"range {min(rss)}..{max(rss)} KiB ({(max(rss) - min(rss)) / 1024:.2f} MiB); "
              f"end - warm-up {(rss[-1] - rss[0]) / 1024:+.2f} MiB; readings {warm[0][3]} -> {warm[-1][3]}; "
              f"VmRSS {warm[0][2]} -> {warm[-1][2]} KiB", flush=True)
    finally:
        stop()


if __name__ == "__main__":
    main()
