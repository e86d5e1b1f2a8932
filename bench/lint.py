#!/usr/bin/env python3
"""Lint benchmark: dlqctl lint vs check-jsonschema (PyPI) vs ajv-cli (npm), interleaved.

For 1, 500 and 5,000 generated spec files, each round runs every tool once in a shuffled
order; the table reports medians over the rounds and each tool's peak RSS (from wait4).
Also times a 342-byte YAML alias bomb. The peers are installed into bench/.tools (not the
system). Results go to stdout as markdown; BENCHMARKS.md holds a recorded run.

usage: bench/lint.py [--rounds N] [--sizes 1,500,5000] [--bomb-timeout S] [--smoke]
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "bench", ".tools")
CHECK_JSONSCHEMA_VERSION = "0.39.0"
AJV_CLI_VERSION = "5.0.0"

# 342 bytes: nine levels of nine aliases each, 9^9 ≈ 387 million strings when expanded.
BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
    "i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n"
)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def install_peers():
    os.makedirs(TOOLS, exist_ok=True)
    venv = os.path.join(TOOLS, "venv")
    cj = os.path.join(venv, "bin", "check-jsonschema")
    if not os.path.exists(cj):
        sh([sys.executable, "-m", "venv", venv])
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", f"check-jsonschema=={CHECK_JSONSCHEMA_VERSION}"])
    node = os.path.join(TOOLS, "node")
    ajv = os.path.join(node, "node_modules", ".bin", "ajv")
    if not os.path.exists(ajv):
        os.makedirs(node, exist_ok=True)
        sh(["npm", "install", "--silent", "--prefix", node, f"ajv-cli@{AJV_CLI_VERSION}"])
    return cj, ajv


def measure(cmd, timeout):
    """Wall seconds, peak RSS in MiB and exit code of one run; (None, ...) on timeout."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            wall = time.perf_counter() - start
            return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)
        if time.perf_counter() > deadline:
            p.kill()
            _, _, usage = os.wait4(p.pid, 0)
            return None, usage.ru_maxrss / 1024, None
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--sizes", default="1,500,5000")
    ap.add_argument("--bomb-timeout", type=float, default=120)
    ap.add_argument("--smoke", action="store_true", help="dlqctl only, 1 and 500 files, 3 rounds")
    ap.add_argument("--dlqctl", default=os.path.join(ROOT, "target", "release", "dlqctl"))
    a = ap.parse_args()
    if a.smoke:
        a.rounds, a.sizes = 3, "1,500"
    schema = os.path.join(ROOT, "schemas", "channel.v1.json")
    tools = {"dlqctl lint": None}
    if not a.smoke:
        cj, ajv = install_peers()
    work = tempfile.mkdtemp(prefix="dlqctl-bench-")
    rows = []
    try:
        for n in [int(s) for s in a.sizes.split(",")]:
            d = os.path.join(work, f"specs-{n}")
            sh([sys.executable, os.path.join(ROOT, "bench", "gen.py"), str(n), d], stdout=subprocess.DEVNULL)
            files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("channel-"))
            cmds = {"dlqctl lint": [a.dlqctl, "lint", "--quiet", d]}
            if not a.smoke:
                cmds["check-jsonschema"] = [cj, "--schemafile", schema, *files]
                # ajv-cli reads YAML data files; draft 2020-12 schema.
                cmds["ajv-cli"] = [ajv, "validate", "--spec=draft2020", "--strict=false", "-s", schema, *sum((["-d", f] for f in files), [])]
            results = {k: [] for k in cmds}
            for _ in range(a.rounds):
                order = list(cmds)
                random.shuffle(order)
                for k in order:
                    wall, rss, code = measure(cmds[k], 600)
                    if code != 0:
                        raise SystemExit(f"{k} failed on {n} files (exit {code}): {' '.join(cmds[k][:6])} ...")
                    results[k].append((wall, rss))
            for k, v in results.items():
                med = statistics.median(w for w, _ in v) * 1000
                rows.append((n, k, med, max(r for _, r in v)))
        bomb = os.path.join(work, "bomb.yaml")
        with open(bomb, "w") as f:
            f.write(BOMB)
        bomb_rows = []
        bomb_cmds = {"dlqctl lint": [a.dlqctl, "lint", bomb]}
        if not a.smoke:
            bomb_cmds["check-jsonschema"] = [cj, "--schemafile", schema, bomb]
        for k, cmd in bomb_cmds.items():
            wall, rss, code = measure(cmd, a.bomb_timeout)
            bomb_rows.append((k, wall, rss, code))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"bytes of the alias bomb: {len(BOMB.encode())}\n")
    print("| files | tool | median wall (ms) | peak RSS (MiB) | vs dlqctl |")
    print("|---:|---|---:|---:|---:|")
    base = {n: m for n, k, m, _ in rows if k == "dlqctl lint"}
    for n, k, med, rss in rows:
        print(f"| {n} | {k} | {med:.1f} | {rss:.1f} | {med / base[n]:.1f}× |")
    print("\n| alias bomb | wall | peak RSS (MiB) | exit |")
    print("|---|---:|---:|---:|")
    for k, wall, rss, code in bomb_rows:
        w = f"{wall * 1000:.1f} ms" if wall is not None else f"> {a.bomb_timeout:.0f} s (killed)"
        print(f"| {k} | {w} | {rss:.1f} | {code} |")
    print("\n" + json.dumps({"rows": rows, "bomb": bomb_rows}))


if __name__ == "__main__":
    main()
