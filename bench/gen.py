#!/usr/bin/env python3
"""Generates N channel specs (and a targets file) for benchmarks: a realistic mix of SQS,
RabbitMQ and Kafka channels, one file each, all lint-clean.

usage: bench/gen.py N OUT_DIR [--mix sqs:rabbitmq:kafka] [--prefix P] [--vhost V]
"""
import argparse
import json
import os

TARGETS = """apiVersion: dlqctl/v1
kind: Targets
targets:
  local-sqs:
    backend: sqs
    region: us-east-1
    endpoint: {aws}
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

SQS = """# yaml-language-server: $schema=../schemas/channel.v1.json
apiVersion: dlqctl/v1
kind: Channel
metadata:
  name: {prefix}sqs-{i:05d}
  labels: {{team: bench}}
spec:
  target: local-sqs
  retention: 4d
  retry:
    maxAttempts: 5
  deadLetter:
    retention: 14d
  alarms:
    depth: {{above: 0, period: 60s, evaluationPeriods: 1}}
    oldestMessageAge: {{above: 30m}}
    actions: ["arn:aws:sns:us-east-1:123456789012:bench-ops"]
  sqs:
    visibilityTimeout: 30s
"""

RABBIT = """apiVersion: dlqctl/v1
kind: Channel
metadata:
  name: {prefix}rmq-{i:05d}
spec:
  target: local-rabbitmq
  retry:
    maxAttempts: 4
    backoff: {{initial: 5s}}
  rabbitmq: {{queueType: classic, dlx: policy}}
  lint: {{allow: [alarms/missing]}}
"""

KAFKA = """apiVersion: dlqctl/v1
kind: Channel
metadata:
  name: {prefix}kafka-{i:05d}
spec:
  target: local-kafka
  retention: 7d
  retry:
    maxAttempts: 3
    backoff: {{initial: 1s}}
  deadLetter:
    discard: {{after: 14d, reason: generated benchmark records that nobody reads}}
  kafka: {{partitions: 1, replicationFactor: 1}}
  lint: {{allow: [alarms/missing]}}
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("n", type=int)
    p.add_argument("out")
    p.add_argument("--mix", default="2:2:1", help="sqs:rabbitmq:kafka weights")
    p.add_argument("--prefix", default="bench.")
    p.add_argument("--vhost", default="/", help="RabbitMQ vhost of the channels")
    p.add_argument("--aws", default=os.environ.get("DLQCTL_AWS_ENDPOINT", "http://127.0.0.1:5000"))
    p.add_argument("--rabbit", default=os.environ.get("DLQCTL_RABBITMQ_URL", "http://127.0.0.1:15672"))
    p.add_argument("--kafka", default=os.environ.get("DLQCTL_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    a = p.parse_args()
    weights = [int(w) for w in a.mix.split(":")]
    total = sum(weights)
    counts = [a.n * w // total for w in weights]
    counts[0] += a.n - sum(counts)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "dlqctl.yaml"), "w") as f:
        f.write(TARGETS.format(aws=a.aws, rabbit=a.rabbit, kafka=a.kafka, prefix=a.prefix, vhost=json.dumps(a.vhost)))
    # SQS names allow no dots: the SQS prefix uses dashes.
    sqs_prefix = a.prefix.replace(".", "-")
    i = 0
    for template, count, prefix in zip((SQS, RABBIT, KAFKA), counts, (sqs_prefix, a.prefix, a.prefix)):
        for _ in range(count):
            with open(os.path.join(a.out, f"channel-{i:05d}.yaml"), "w") as f:
                f.write(template.format(i=i, prefix=prefix))
            i += 1
    print(f"{a.out}: {counts[0]} SQS, {counts[1]} RabbitMQ, {counts[2]} Kafka channels")


if __name__ == "__main__":
    main()
