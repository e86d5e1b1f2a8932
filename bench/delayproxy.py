#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that delays every chunk sent towards the server by a fixed
latency (default 20 ms): each request/response round trip costs that much more, as over a
network. Bounded: it exits after --max-seconds.

usage: bench/delayproxy.py LISTEN_PORT UPSTREAM_HOST:PORT [--latency-ms 20] [--max-seconds 3600]
"""
import argparse
import asyncio


async def pipe(reader, writer, delay):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("upstream")
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--max-seconds", type=float, default=3600)
    a = ap.parse_args()
    host, port = a.upstream.rsplit(":", 1)
    assert host in ("127.0.0.1", "localhost", "::1"), "loopback only"

    async def handle(cr, cw):
        try:
            ur, uw = await asyncio.open_connection(host, int(port))
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, uw, a.latency_ms / 1000), pipe(ur, cw, 0))

    server = await asyncio.start_server(handle, "127.0.0.1", a.port)
    async with server:
        await asyncio.sleep(a.max_seconds)


if __name__ == "__main__":
    asyncio.run(main())
