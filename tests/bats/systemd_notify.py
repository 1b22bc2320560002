#!/usr/bin/python3
# A stand-in for systemd's notification socket: bind an AF_UNIX datagram socket
# at argv[1] and append every sd_notify message to argv[2], one per line
# (the message's own newlines shown as " | "), until killed.
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "a", buffering=1) as f:
    f.write("listening\n")
    while True:
        data = s.recv(4096)
        f.write(data.decode("utf-8", "replace").strip().replace("\n", " | ") + "\n")
