#!/usr/bin/env python3
"""Redrive speed and memory: `dlqctl redrive` vs what a user would otherwise use, on the
local stack, interleaved in one run.

- RabbitMQ: the broker's own shovel (`rabbitmq_shovel`, a dynamic shovel made through the
  management API with `src-delete-after: queue-length`, direct local connections, defaults
  otherwise: `ack-mode: on-confirm`, prefetch 1,000);
- SQS (moto): a hand-written boto3 loop: ReceiveMessage(10) → SendMessageBatch →
  DeleteMessageBatch of the entries sent;
- Kafka (tansu): a confluent-kafka script: consume (group, auto-commit off) → produce
  (idempotent, acks=all) → flush → commit, in batches of 500.

Each round fills the dead-letter queue with N messages of SIZE bytes (an 8-digit id, then
padding; envelope headers `dlq-error-class`, `dlq-source`, `dlq-attempts`), moves them with
one tool, then reads the destination with a third-party client: every id there exactly once,
the DLQ empty (SQS, RabbitMQ) or the group's offsets at its end (Kafka). Wall time is the
whole process (dlqctl, the Python peers) or, for the shovel, from the PUT that creates it until
the destination holds N messages (polled every 20 ms with an AMQP passive declare). Peak RSS
and CPU time from /usr/bin/time (not wait4: see measured()); for RabbitMQ also the broker's CPU
during the run (the shovel works inside it), from /proc of the stack's broker process. Tools alternate which goes first from round to round.

Kafka channels are new for every run of a tool (tansu keeps records; a DLT is never
emptied), filled one record per produce request: tansu 0.6 reports wrong high watermarks
when one request carries several records.

usage: bench/.tools/venv/bin/python bench/redrive.py [--messages 10000] [--size 1024]
           [--rounds 3] [--backends rabbitmq,sqs,kafka] [--dlqctl PATH] [--dlqctl-only]
           [--json OUT] [--keep]
       python3 bench/redrive.py --setup     # makes bench/.tools/venv (pika, boto3, confluent-kafka)
Needs the stack up (`scripts/stack up`, then `eval "$(scripts/stack env)"`), a release build,
and for RabbitMQ the shovel plugin enabled on the stack's node (see BENCHMARKS.md §5).
The RabbitMQ vhost `bench-redrive` is deleted at the end unless --keep.
"""
import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "bench", ".tools")
VENV_PY = os.path.join(TOOLS, "venv", "bin", "python")
PEERS = {"pika": "pika==1.4.4", "boto3": "boto3==1.44.8", "confluent_kafka": "confluent-kafka==2.16.1"}
VHOST = "bench-redrive"
PREFIX = "rd."


def env_defaults():
    env = dict(os.environ)
    env.setdefault("DLQCTL_RABBITMQ_USER", "guest")
    env.setdefault("DLQCTL_RABBITMQ_PASSWORD", "guest")
    env.setdefault("AWS_ACCESS_KEY_ID", "testing")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    env.setdefault("AWS_REGION", "us-east-1")
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return env


ENV = env_defaults()
RABBIT = ENV.get("DLQCTL_RABBITMQ_URL", "http://127.0.0.1:15672").rstrip("/")
AWS = ENV.get("DLQCTL_AWS_ENDPOINT", "http://127.0.0.1:5000")
KAFKA = ENV.get("DLQCTL_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
for _url in (RABBIT, AWS, "tcp://" + KAFKA):
    # Traffic goes to the local stack only.
    _host = urllib.parse.urlsplit(_url).hostname
    if _host not in ("127.0.0.1", "localhost"):
        sys.exit(f"refusing a non-local endpoint: {_url}")
AMQP_HOST = "127.0.0.1"
# The stack's broker process (scripts/stack's RABBITMQ_PID_FILE): its CPU during each RabbitMQ
# run is reported, the shovel's work being inside it (issue 39). Absent: not reported.
BROKER_PID_FILE = os.path.join(
    ENV.get("DLQCTL_STATE", os.path.expanduser("~/.cache/dlqctl/state")), "rabbitmq.pid")


def broker_cpu():
    """The broker's CPU seconds so far (user + system), or None."""
    try:
        with open(BROKER_PID_FILE) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
AMQP_PORT = int(os.environ.get("DLQCTL_RABBITMQ_AMQP_PORT", "5672"))


def setup():
    venv = os.path.join(TOOLS, "venv")
    if not os.path.exists(VENV_PY):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", *PEERS.values()], check=True)
    print(f"peers installed in {venv}")


def measured(cmd, env=None, timeout=1800, tty=False):
    """Runs cmd; returns exit code, stdout, stderr, wall seconds, the child's peak RSS (MiB) and
    its CPU seconds (user + system), from GNU time. With tty, stderr is a pseudo-terminal (dlqctl
    then prints its progress every second) and its lines come back with their times."""
    import pty
    import select
    # Peak RSS and CPU from GNU time, not from wait4 here: Python starts children with vfork,
    # and the child's ru_maxrss then includes this (large) parent's RSS at the exec.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as timing:
        cmd = ["/usr/bin/time", "-f", "%M %U %S", "-o", timing.name, *cmd]
        master = slave = None
        if tty:
            master, slave = pty.openpty()
        start = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=ROOT, env=env or ENV, stdout=out, stderr=slave if tty else err,
                             stdin=subprocess.DEVNULL)
        if tty:
            os.close(slave)
        deadline = start + timeout
        lines, buf = [], b""
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                break
            if tty:
                r, _, _ = select.select([master], [], [], 0.005)
                if r:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:
                        chunk = b""
                    now = time.perf_counter() - start
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        lines.append((now, line.decode(errors="replace").strip()))
            else:
                time.sleep(0.005)
        wall = time.perf_counter() - start
        if tty:
            try:
                while True:
                    r, _, _ = select.select([master], [], [], 0)
                    if not r:
                        break
                    chunk = os.read(master, 65536)
                    if not chunk:
                        break
                    buf += chunk
            except OSError:
                pass
            os.close(master)
            for line in buf.split(b"\n"):
                lines.append((wall, line.decode(errors="replace").strip()))
        out.seek(0)
        err.seek(0)
        errtext = "\n".join(l for _, l in lines) if tty else err.read().decode(errors="replace")
        fields = timing.read().split()[-3:]
        maxrss, cpu = int(fields[0]) / 1024, float(fields[1]) + float(fields[2])
        res = (os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"), errtext, wall, maxrss)
        return (*res, cpu, lines) if tty else (*res, cpu)


def steady(lines, n, wall):
    """The moving rate once moving started, from dlqctl's progress lines `moved M (R/s...)`:
    (n - M1) / (wall - t1) for the first line with M1 > 0 (None when no such line)."""
    import re
    for t, line in lines:
        m = re.match(r"moved (\d+) ", line)
        if m and int(m.group(1)) > 0 and wall > t:
            return (n - int(m.group(1))) / (wall - t), t
    return None, None


def body(i, size):
    head = f"{i:08d}".encode()
    return head + b"x" * max(0, size - len(head))


def headers(source):
    return {"dlq-error-class": "transient_exhausted", "dlq-source": source, "dlq-attempts": "4"}


# ------------------------------------------------------------------------------- RabbitMQ

def mgmt(method, path, body_=None, ok404=False):
    auth = base64.b64encode(f"{ENV['DLQCTL_RABBITMQ_USER']}:{ENV['DLQCTL_RABBITMQ_PASSWORD']}".encode()).decode()
    data = None if body_ is None else json.dumps(body_).encode()
    req = urllib.request.Request(RABBIT + path, method=method, data=data,
                                 headers={"Authorization": f"Basic {auth}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        if ok404 and e.code == 404:
            return None
        raise


class Rabbit:
    def __init__(self):
        import pika
        self.pika = pika
        creds = pika.PlainCredentials(ENV["DLQCTL_RABBITMQ_USER"], ENV["DLQCTL_RABBITMQ_PASSWORD"])
        self.params = pika.ConnectionParameters(AMQP_HOST, AMQP_PORT, VHOST, creds, heartbeat=0)
        self.conn = pika.BlockingConnection(self.params)
        self.ch = self.conn.channel()

    def count(self, queue):
        return self.ch.queue_declare(queue, passive=True).method.message_count

    def purge(self, queue):
        self.ch.queue_purge(queue)

    def fill(self, queue, n, size, source):
        props = self.pika.BasicProperties(delivery_mode=2, headers=headers(source), content_type="application/octet-stream")
        for i in range(n):
            self.ch.basic_publish("", queue, body(i, size), props)
            if i % 5000 == 4999:
                self.conn.process_data_events(0)
        deadline = time.time() + 120
        while self.count(queue) < n and time.time() < deadline:
            time.sleep(0.05)
        got = self.count(queue)
        if got != n:
            sys.exit(f"filling {queue}: {got} of {n}")

    def drain(self, queue, n):
        """Consumes everything in `queue` (auto-ack); returns (count, distinct ids, missing, redrive-count headers)."""
        self.ch.basic_qos(prefetch_count=2000)
        ids, count, counted = set(), 0, 0
        deadline = time.time() + 600
        for method, props, body_ in self.ch.consume(queue, auto_ack=True, inactivity_timeout=3):
            if method is None or time.time() > deadline:
                break
            count += 1
            ids.add(int(body_[:8]))
            if props.headers and "dlq-redrive-count" in props.headers:
                counted += 1
            if count >= n and self.count(queue) == 0:
                break
        self.ch.cancel()
        return count, len(ids), n - len(ids & set(range(n))), counted

    def close(self):
        self.conn.close()


def shovel(rb, src, dest_exchange, dest_key, dest_queue, n):
    """A dynamic shovel src → exchange/key, deleted by the broker when it has moved the queue's
    length at start. Returns the seconds from the PUT until dest_queue holds n messages."""
    vh = urllib.parse.quote(VHOST, safe="")
    name = f"bench-shovel-{int(time.time() * 1000)}"
    uri = f"amqp:///{vh}"  # direct connection inside the node, the UI's default
    value = {"src-protocol": "amqp091", "src-uri": uri, "src-queue": src,
             "src-delete-after": "queue-length",
             "dest-protocol": "amqp091", "dest-uri": uri,
             "dest-exchange": dest_exchange, "dest-exchange-key": dest_key}
    start = time.perf_counter()
    mgmt("PUT", f"/api/parameters/shovel/{vh}/{name}", {"value": value})
    deadline = start + 600
    while rb.count(dest_queue) < n and time.perf_counter() < deadline:
        time.sleep(0.02)
    wall = time.perf_counter() - start
    # It deletes itself after the queue length; wait (bounded) so the next run starts clean.
    end = time.time() + 30
    while time.time() < end and mgmt("GET", f"/api/parameters/shovel/{vh}/{name}", ok404=True):
        time.sleep(0.1)
    mgmt("DELETE", f"/api/parameters/shovel/{vh}/{name}", ok404=True)
    return wall


# ------------------------------------------------------------------------------------ SQS

def sqs_client():
    import boto3
    return boto3.client("sqs", endpoint_url=AWS, region_name=ENV["AWS_REGION"])


def sqs_url(c, name):
    return c.get_queue_url(QueueName=name)["QueueUrl"]


def sqs_count(c, url):
    a = c.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(int(a.get(k, 0)) for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                          "ApproximateNumberOfMessagesDelayed"))


def sqs_fill(c, url, n, size, source):
    attrs = {k: {"DataType": "String", "StringValue": v} for k, v in headers(source).items()}
    for start in range(0, n, 10):
        entries = [{"Id": str(i - start), "MessageBody": body(i, size).decode(), "MessageAttributes": attrs}
                   for i in range(start, min(n, start + 10))]
        r = c.send_message_batch(QueueUrl=url, Entries=entries)
        if r.get("Failed"):
            sys.exit(f"filling SQS: {r['Failed']}")
    if sqs_count(c, url) != n:
        sys.exit(f"filling SQS: {sqs_count(c, url)} of {n}")


def sqs_empty(c, url):
    """Empties a queue: receive + delete, then PurgeQueue for what is in flight (moto allows
    one purge a minute per queue: waits for it)."""
    if sqs_count(c, url):
        sqs_drain(c, url, 0)
    for _ in range(3):
        if not sqs_count(c, url):
            return
        try:
            c.purge_queue(QueueUrl=url)
        except c.exceptions.PurgeQueueInProgress:
            time.sleep(61)
    if sqs_count(c, url):
        sys.exit(f"cannot empty {url}")


def sqs_drain(c, url, n):
    """Receives and deletes everything (moto allows one PurgeQueue a minute)."""
    ids, count, counted, empty = set(), 0, 0, 0
    for _ in range(n // 10 * 3 + 20):
        r = c.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                              MessageAttributeNames=["All"], WaitTimeSeconds=0)
        msgs = r.get("Messages", [])
        if not msgs:
            empty += 1
            if empty >= 3:
                break
            continue
        empty = 0
        for m in msgs:
            count += 1
            ids.add(int(m["Body"][:8]))
            if "dlq-redrive-count" in m.get("MessageAttributes", {}):
                counted += 1
        c.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                      for i, m in enumerate(msgs)])
    return count, len(ids), n - len(ids & set(range(n))), counted


def peer_sqs(src, dest):
    """The hand-written boto3 loop (run as its own process: `redrive.py peer-sqs SRC DEST`)."""
    c = sqs_client()
    su, du = sqs_url(c, src), sqs_url(c, dest)
    moved, empty, timeline = 0, 0, []
    for _ in range(1_000_000):
        r = c.receive_message(QueueUrl=su, MaxNumberOfMessages=10, VisibilityTimeout=300,
                              MessageAttributeNames=["All"], AttributeNames=["All"], WaitTimeSeconds=0)
        msgs = r.get("Messages", [])
        if not msgs:
            empty += 1
            if empty >= 2:
                break
            continue
        empty = 0
        entries = [{"Id": str(i), "MessageBody": m["Body"], "MessageAttributes": m.get("MessageAttributes", {})}
                   for i, m in enumerate(msgs)]
        sent = c.send_message_batch(QueueUrl=du, Entries=entries)
        ok = {s["Id"] for s in sent.get("Successful", [])}
        dels = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs) if str(i) in ok]
        if dels:
            c.delete_message_batch(QueueUrl=su, Entries=dels)
        moved += len(dels)
        timeline.append((time.time(), moved))
        if sent.get("Failed"):
            sys.exit(f"send failed: {sent['Failed']}")
    print(json.dumps({"moved": moved, "timeline": timeline[:5]}))


# ---------------------------------------------------------------------------------- Kafka

def kafka_fill(topic, n, size, source):
    from confluent_kafka import Producer
    # One record per produce request: tansu 0.6's watermarks are wrong otherwise.
    p = Producer({"bootstrap.servers": KAFKA, "linger.ms": 0, "batch.num.messages": 1,
                  "enable.idempotence": False, "acks": "all"})
    hs = [(k, v.encode()) for k, v in headers(source).items()]
    errors = []
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=body(i, size), key=f"k{i}".encode(), headers=hs,
                          on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(120)
    if left or errors:
        sys.exit(f"filling {topic}: {left} not delivered, errors {errors[:3]}")
    low, high = kafka_marks(topic)
    if high - low != n:
        sys.exit(f"filling {topic}: watermarks {low}..{high}, expected {n}")


def kafka_marks(topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": "bench-redrive-marks", "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        c.close()


def kafka_drain(topic, n):
    """Reads the topic from its start (assigned, no group), until idle for 5 s."""
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": "bench-redrive-verify", "enable.auto.commit": False,
                  "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    ids, count, counted = set(), 0, 0
    idle, deadline = time.time(), time.time() + 600
    while time.time() - idle < 5 and time.time() < deadline:
        msgs = c.consume(1000, timeout=0.5)
        for m in msgs:
            if m.error():
                continue
            idle = time.time()
            count += 1
            ids.add(int(m.value()[:8]))
            if any(k == "dlq-redrive-count" for k, _ in (m.headers() or [])):
                counted += 1
        if count >= n and len(ids) >= n:
            # Everything is there; wait a little for extras (duplicates) before stopping.
            if time.time() - idle > 1:
                break
    c.close()
    return count, len(ids), n - len(ids & set(range(n))), counted


def kafka_group_lag(topic, group):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=30)
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        return high - max(tp.offset, low)
    finally:
        c.close()


def peer_kafka(src, dest, group):
    """The confluent-kafka consume/produce script (`redrive.py peer-kafka SRC DEST GROUP`)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    # The group settings dlqctl uses: tansu answers a join after roughly 55-65% of the session timeout
    # (45 s by default: a 24 s join), so the peer gets dlqctl's 10 s too.
    c = Consumer({"bootstrap.servers": KAFKA, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    p = Producer({"bootstrap.servers": KAFKA, "enable.idempotence": True, "acks": "all"})
    low, high = c.get_watermark_offsets(TopicPartition(src, 0), timeout=30)
    c.subscribe([src])
    moved, last, idle = 0, low - 1, time.time()
    failed, timeline = [], []
    while last + 1 < high and time.time() - idle < 30:
        msgs = c.consume(500, timeout=1.0)
        if not msgs:
            continue
        idle = time.time()
        for m in msgs:
            if m.error():
                continue
            p.produce(dest, value=m.value(), key=m.key(), headers=m.headers(),
                      on_delivery=lambda e, _m: e and failed.append(e))
            last = max(last, m.offset())
            moved += 1
        p.flush(60)
        if failed:
            sys.exit(f"produce failed: {failed[:3]}")
        c.commit(asynchronous=False)
        timeline.append((time.time(), moved))
    c.close()
    print(json.dumps({"moved": moved, "timeline": timeline[:5]}))


# ------------------------------------------------------------------------------- the spec

TARGETS = """apiVersion: dlqctl/v1
kind: Targets
targets:
  local-sqs: {{backend: sqs, region: us-east-1, endpoint: "{aws}"}}
  local-rabbitmq:
    backend: rabbitmq
    url: {rabbit}
    vhost: {vhost}
    usernameEnv: DLQCTL_RABBITMQ_USER
    passwordEnv: DLQCTL_RABBITMQ_PASSWORD
    ownership: {{prefixes: ["{prefix}"]}}
  local-kafka:
    backend: kafka
    bootstrapServers: {kafka}
    ownership: {{prefixes: ["{prefix}"]}}
"""
RMQ = """apiVersion: dlqctl/v1
kind: Channel
metadata: {{name: {name}}}
spec:
  target: local-rabbitmq
  name: "{{channel}}.process"
  retry: {{maxAttempts: 4, backoff: {{initial: 5s}}}}
  deadLetter: {{name: "{{channel}}.dlq"}}
  rabbitmq:
    queueType: classic
    dlx: policy
    exchange: {{name: "{{channel}}.exchange", type: direct, routingKeys: [process]}}
  lint: {{allow: [alarms/missing]}}
---
"""
SQS = """apiVersion: dlqctl/v1
kind: Channel
metadata: {{name: {name}}}
spec:
  target: local-sqs
  retention: 4d
  retry: {{maxAttempts: 5}}
  deadLetter: {{retention: 14d}}
  sqs: {{visibilityTimeout: 30s}}
  lint: {{allow: [alarms/missing]}}
---
"""
KAFKA_CH = """apiVersion: dlqctl/v1
kind: Channel
metadata: {{name: {name}}}
spec:
  target: local-kafka
  retention: 7d
  retry: {{maxAttempts: 3, backoff: {{initial: 1s}}}}
  kafka: {{partitions: 1, replicationFactor: 1}}
  lint: {{allow: [alarms/missing]}}
---
"""


def summary(rows, n):
    walls = [r["wall"] for r in rows]
    return {"runs": len(rows), "median_wall": statistics.median(walls),
            "median_rate": n / statistics.median(walls), "walls": walls,
            "max_rss": max((r["rss"] for r in rows if r["rss"] is not None), default=None)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", nargs="?", default="bench")
    ap.add_argument("args", nargs="*")
    ap.add_argument("--setup", action="store_true")
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="rabbitmq,sqs,kafka")
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    ap.add_argument("--dlqctl-only", action="store_true", help="no peers (the memory runs)")
    ap.add_argument("--json", help="also write every run's figures here")
    ap.add_argument("--keep", action="store_true", help="keep the RabbitMQ vhost")
    a = ap.parse_args()
    if a.setup:
        return setup()
    if a.cmd == "peer-sqs":
        return peer_sqs(*a.args)
    if a.cmd == "peer-kafka":
        return peer_kafka(*a.args)
    try:
        import pika, boto3, confluent_kafka  # noqa: F401
    except ImportError:
        sys.exit(f"run with {VENV_PY} (make it with `python3 bench/redrive.py --setup`)")

    n, backends = a.messages, a.backends.split(",")
    tag = time.strftime("%H%M%S")
    work = os.path.join(ROOT, "bench", ".work", f"redrive-{tag}")
    os.makedirs(work, exist_ok=True)
    vh = urllib.parse.quote(VHOST, safe="")
    tools = ["dlqctl"] if a.dlqctl_only else ["dlqctl", "peer"]
    rmq_ch, sqs_ch = f"{PREFIX}rmq", "rd-sqs"
    kafka_ch = {(r, t): f"{PREFIX}{tag}.k{r}{t[0]}" for r in range(a.rounds) for t in tools}
    with open(os.path.join(work, "dlqctl.yaml"), "w") as f:
        f.write(TARGETS.format(aws=AWS, rabbit=RABBIT, vhost=VHOST, prefix=PREFIX, kafka=KAFKA))
    with open(os.path.join(work, "channels.yaml"), "w") as f:
        if "rabbitmq" in backends:
            f.write(RMQ.format(name=rmq_ch))
        if "sqs" in backends:
            f.write(SQS.format(name=sqs_ch))
        if "kafka" in backends:
            for name in kafka_ch.values():
                f.write(KAFKA_CH.format(name=name))
    if "rabbitmq" in backends:
        mgmt("PUT", f"/api/vhosts/{vh}", {})
        mgmt("PUT", f"/api/permissions/{vh}/{urllib.parse.quote(ENV['DLQCTL_RABBITMQ_USER'], safe='')}",
             {"configure": ".*", "write": ".*", "read": ".*"})
        if not a.dlqctl_only:
            try:
                mgmt("GET", "/api/shovels")
            except urllib.error.HTTPError:
                sys.exit("the shovel plugin is not enabled on the stack's node (see BENCHMARKS.md §5)")
    code, out, err, wall, rss, _ = measured([a.dlqctl, "apply", work, "--auto-approve", "--color", "never"])
    if code != 0:
        sys.exit(f"apply failed:\n{err[-3000:]}")
    print(f"applied the bench channels in {wall:.1f} s ({work})", flush=True)

    rb = Rabbit() if "rabbitmq" in backends else None
    sq = sqs_client() if "sqs" in backends else None
    results = {b: {t: [] for t in tools} for b in backends}
    try:
        for r in range(a.rounds):
            order = tools if r % 2 == 0 else list(reversed(tools))
            for b in backends:
                for t in order:
                    row = one(a, b, t, r, n, rb, sq, rmq_ch, sqs_ch, kafka_ch, work)
                    results[b][t].append(row)
                    print(f"round {r + 1} {b:8} {t:6}: {row['wall']:7.2f} s  {n / row['wall']:7.0f} msg/s  "
                          f"(moving {row['steady_rate']} msg/s from {row['first_move']} s)  "
                          f"RSS {row['rss'] if row['rss'] is not None else '-':>6} MiB  CPU {row['cpu']} s  "
                          f"broker CPU {row['broker_cpu'] if row['broker_cpu'] is not None else '-'} s  "
                          f"dest {row['dest']} ({row['distinct']} distinct, {row['missing']} missing)  "
                          f"left {row['left']}", flush=True)
    finally:
        if rb:
            rb.close()
        if "rabbitmq" in backends and not a.keep:
            mgmt("DELETE", f"/api/vhosts/{vh}", ok404=True)
            print(f"deleted RabbitMQ vhost {VHOST}")

    peer_name = {"rabbitmq": "shovel (rabbitmq_shovel)", "sqs": "boto3 loop", "kafka": "confluent-kafka script"}
    print(f"\n{n:,} messages of {a.size} B, {a.rounds} rounds\n")
    print("| backend | tool | median wall (s) | median msg/s (whole run) | median msg/s once moving | runs (s) "
          "| peak RSS (MiB) | CPU (s, median) | broker CPU (s, median) | verified |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---|")
    for b in backends:
        for t in tools:
            rows = results[b][t]
            s = summary(rows, n)
            ok = all(x["distinct"] == n and x["dest"] == n and x["missing"] == 0 and x["left"] == 0 for x in rows)
            rates = [x["steady_rate"] for x in rows if x["steady_rate"]]
            cpus = [x["cpu"] for x in rows if x["cpu"] is not None]
            brokers = [x["broker_cpu"] for x in rows if x.get("broker_cpu") is not None]
            print(f"| {b} | {'dlqctl redrive' if t == 'dlqctl' else peer_name[b]} | {s['median_wall']:.2f} | "
                  f"{s['median_rate']:,.0f} | {f'{statistics.median(rates):,.0f}' if rates else '—'} | "
                  f"{', '.join(f'{w:.2f}' for w in s['walls'])} | "
                  f"{s['max_rss'] if s['max_rss'] is not None else '—'} | "
                  f"{f'{statistics.median(cpus):.2f}' if cpus else '—'} | "
                  f"{f'{statistics.median(brokers):.2f}' if brokers else '—'} | "
                  f"{'every id once, DLQ empty' if ok else 'NO: ' + json.dumps(rows)} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"messages": n, "size": a.size, "rounds": a.rounds, "results": results}, f, indent=1)


def run_dlqctl(a, channel, work, n):
    t0 = time.time()
    code, out, err, wall, rss, cpu, lines = measured(
        [a.dlqctl, "redrive", channel, work, "--yes", "--format", "json", "--color", "never"], tty=True)
    if code != 0:
        sys.exit(f"dlqctl redrive {channel}: exit {code}\n{out[-2000:]}\n{err[-2000:]}")
    rate, first = steady(lines, n, wall)
    return wall, rss, cpu, rate, first, json.loads(out).get("moved")


def run_peer(cmd, n):
    t0 = time.time()
    code, out, err, wall, rss, cpu = measured([sys.executable, __file__, *cmd])
    if code != 0:
        sys.exit(f"{cmd[0]}: exit {code}\n{err[-2000:]}")
    doc = json.loads(out.strip().splitlines()[-1])
    rate = first = None
    for t, moved in doc.get("timeline", []):
        if moved > 0 and t0 + wall > t:
            rate, first = (n - moved) / (t0 + wall - t), t - t0
            break
    return wall, rss, cpu, rate, first, doc.get("moved")


def one(a, b, t, r, n, rb, sq, rmq_ch, sqs_ch, kafka_ch, work):
    """Fills, moves with tool t, verifies. Returns the figures of the run."""
    rss = cpu = rate = first = reported = broker = None
    if b == "rabbitmq":
        dlq, main = f"{rmq_ch}.dlq", f"{rmq_ch}.process"
        rb.purge(dlq)
        rb.purge(main)
        rb.fill(dlq, n, a.size, main)
        time.sleep(1)
        b0 = broker_cpu()
        if t == "dlqctl":
            wall, rss, cpu, rate, first, reported = run_dlqctl(a, rmq_ch, work, n)
        else:
            wall = shovel(rb, dlq, f"{rmq_ch}.exchange", "process", main, n)
        b1 = broker_cpu()
        broker = None if b0 is None or b1 is None else b1 - b0
        left = rb.count(dlq)
        dest, distinct, missing, counted = rb.drain(main, n)
    elif b == "sqs":
        du, mu = sqs_url(sq, f"{sqs_ch}-dlq"), sqs_url(sq, sqs_ch)
        for u in (du, mu):
            sqs_empty(sq, u)
        sqs_fill(sq, du, n, a.size, sqs_ch)
        if t == "dlqctl":
            wall, rss, cpu, rate, first, reported = run_dlqctl(a, sqs_ch, work, n)
        else:
            wall, rss, cpu, rate, first, reported = run_peer(["peer-sqs", f"{sqs_ch}-dlq", sqs_ch], n)
        left = sqs_count(sq, du)
        dest, distinct, missing, counted = sqs_drain(sq, mu, n)
    else:
        ch = kafka_ch[(r, t)]
        dlt, main = f"{ch}-dlt", ch
        kafka_fill(dlt, n, a.size, main)
        if t == "dlqctl":
            wall, rss, cpu, rate, first, reported = run_dlqctl(a, ch, work, n)
            group = f"dlqctl-redrive.{ch}"
        else:
            group = f"peer-redrive.{ch}"
            wall, rss, cpu, rate, first, reported = run_peer(["peer-kafka", dlt, main, group], n)
        left = kafka_group_lag(dlt, group)
        dest, distinct, missing, counted = kafka_drain(main, n)
    rnd = lambda x, d=2: None if x is None else round(x, d)  # noqa: E731
    return {"wall": wall, "rss": rnd(rss, 1), "cpu": rnd(cpu), "steady_rate": rnd(rate, 0), "first_move": rnd(first),
            "dest": dest, "distinct": distinct, "missing": missing, "left": left,
            "redrive_count_headers": counted, "reported_moved": reported, "broker_cpu": rnd(broker)}


if __name__ == "__main__":
    main()
