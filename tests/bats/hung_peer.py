#!/usr/bin/env python3
"""A peer that accepts and never answers (a hung BMC, kubelet or model server):
it listens on a loopback TCP port (written to --port-file), reads what each
connection sends and holds it open without a byte back, until the client goes.
Each connection's first bytes go to --log as one line, so that a test knows the
request is in flight.

  hung_peer.py --port-file F --log F
"""
import argparse
import os
import socket
import threading

p = argparse.ArgumentParser()
p.add_argument("--port-file", required=True)
p.add_argument("--log", required=True)
a = p.parse_args()
lock = threading.Lock()


def hold(conn):
    first = True
    while True:
        try:
            data = conn.recv(4096)
        except OSError:
            break
        if not data:
            break
        if first:
            first = False
            line = data.split(b"\r\n", 1)[0].decode("ascii", "replace")
            with lock, open(a.log, "a") as f:
                f.write(line + "\n")
    conn.close()


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
with open(a.port_file + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(a.port_file + ".tmp", a.port_file)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=hold, args=(conn,), daemon=True).start()
