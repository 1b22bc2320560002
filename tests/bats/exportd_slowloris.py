#!/usr/bin/python3
"""Slowloris against exportd, bounded: --per connections from each --sources address
(loopback only) that send a request line and then one header line every --interval
seconds, never finishing the request. A connection the server closes is opened again
after a pause of a second. Prints "ready" once every connection was tried and two
intervals have passed, then "connects N closed M" when it stops: after --max-seconds,
when the --stop file appears, or after --max-connects connects in all.
"""
import argparse
import os
import select
import socket
import sys
import time


class Conn:
    def __init__(self, src):
        self.src = src
        self.sock = None
        self.lines = 0
        self.next_ns = 0  # when to send the next line, or to reconnect


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--sources", default="127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6")
    ap.add_argument("--per", type=int, default=16)
    ap.add_argument("--interval", type=float, default=4.0)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--max-connects", type=int, default=5000)
    ap.add_argument("--stop")
    args = ap.parse_args()
    srcs = args.sources.split(",")
    for s in srcs:
        if not s.startswith("127."):
            sys.exit("exportd_slowloris.py: %s: loopback addresses only" % s)
    conns = [Conn(s) for s in srcs for _ in range(args.per)]
    step = int(args.interval * 1e9)
    end = time.monotonic_ns() + int(args.max_seconds * 1e9)
    connects = closed = 0
    ready = False
    start = time.monotonic_ns()

    def drop(c):
        nonlocal closed
        c.sock.close()
        c.sock = None
        closed += 1
        c.next_ns = time.monotonic_ns() + 1_000_000_000

    while time.monotonic_ns() < end and connects < args.max_connects:
        if args.stop and os.path.exists(args.stop):
            break
        now = time.monotonic_ns()
        for c in conns:
            if c.sock is None and now >= c.next_ns and connects < args.max_connects:
                s = socket.socket()
                s.settimeout(2)
                try:
                    s.bind((c.src, 0))
                    s.connect(("127.0.0.1", args.port))
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: exportd\r\n")
                except OSError:
                    s.close()
                    c.next_ns = now + 1_000_000_000
                    continue
                finally:
                    connects += 1
                c.sock, c.lines, c.next_ns = s, 0, now + step
            elif c.sock is not None and now >= c.next_ns:
                try:
                    c.sock.sendall(b"X-Trickle-%d: 1\r\n" % c.lines)
                    c.lines += 1
                    c.next_ns = now + step
                except OSError:
                    drop(c)
        live = [c for c in conns if c.sock is not None]
        if live:
            r, _, _ = select.select([c.sock for c in live], [], [], 0.05)
            for c in live:
                if c.sock in r:
                    try:
                        data = c.sock.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        drop(c)
        else:
            time.sleep(0.05)
        if not ready and connects >= len(conns) and time.monotonic_ns() - start >= 2 * step:
            ready = True
            print("ready", flush=True)
    print("connects %d closed %d" % (connects, closed), flush=True)


if __name__ == "__main__":
    main()
