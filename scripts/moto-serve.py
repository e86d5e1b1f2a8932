#!/usr/bin/env python3
"""moto's server (what `moto_server -H HOST -p PORT` runs), served from one thread.

moto is not thread-safe: its SQS backend iterates the dict of queues while creating a queue
with a RedrivePolicy (`_setup_dlq`, to find the DLQ by ARN) and in ListQueues, and another
request thread inserting a queue meanwhile makes that iteration fail ("dictionary changed size
during iteration") with an HTTP 500. `moto_server` always serves each request in a thread of
its own, so concurrent clients (`dlqctl apply` at its default parallelism, tests running side
by side) hit it now and then. moto holds the GIL for nearly all of a request anyway, so one
thread costs no CPU: requests wait their turn in the listen queue (HTTP/1.0, one connection a
request). Measured in BENCHMARKS.md §8.

usage: scripts/moto-serve.py HOST PORT   (scripts/stack starts it)
"""
import os
import signal
import sys

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, app, threaded=False, use_reloader=False, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
