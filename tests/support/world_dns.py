#!/usr/bin/env python3
"""A tiny authoritative DNS server for the network tests' "outside world".

Run inside a network namespace the test created:
  world_dns.py ADDR NAME=IP [NAME=IP ...]
Answers A queries for the given names (TTL 60), NXDOMAIN for any other
name, and an empty NOERROR for other types of known names. UDP only.
Exits when its parent test kills it.
"""
import socket
import struct
import sys


def parse_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def answer(msg, table):
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack(">HHH", msg[:6])
    if flags & 0x8000 or qd != 1:
        return None
    name, off = parse_name(msg, 12)
    qtype, qclass = struct.unpack(">HH", msg[off:off + 4])
    question = msg[12:off + 4]
    rd = flags & 0x0100
    if name not in table:
        return struct.pack(">HHHHHH", qid, 0x8403 | rd, 1, 0, 0, 0) + question
    if qtype != 1:
        return struct.pack(">HHHHHH", qid, 0x8400 | rd, 1, 0, 0, 0) + question
    rr = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(table[name])
    return struct.pack(">HHHHHH", qid, 0x8400 | rd, 1, 1, 0, 0) + question + rr


def main():
    addr = sys.argv[1]
    table = dict(a.split("=", 1) for a in sys.argv[2:])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    print("ready", flush=True)
    while True:
        msg, peer = s.recvfrom(4096)
        try:
            out = answer(msg, table)
        except (IndexError, struct.error):
            out = None
        if out:
            s.sendto(out, peer)


if __name__ == "__main__":
    main()
