#!/usr/bin/env python3
"""Records of `logctl cat --json` (stdin) as journal export format (stdout),
for systemd-journal-remote to write a journal of the same records that
bench/read-spool.sh then reads with journalctl.

Each record becomes an entry: its receive time as __REALTIME_TIMESTAMP,
the payload as MESSAGE, the producer as SYSLOG_IDENTIFIER, and its pid,
uid and gid as _PID, _UID and _GID. The first and last receive times
(whole seconds) are written to the file named by the first argument.
"""
import json
import sys
from datetime import datetime


def field(out, name, value):
    data = value.encode()
    if b"\n" in data:  # the binary form: name, length (64-bit LE), data
        out.write(name + b"\n" + len(data).to_bytes(8, "little") + data + b"\n")
    else:
        out.write(name + b"=" + data + b"\n")


def main():
    out = sys.stdout.buffer
    first = last = None
    for n, line in enumerate(sys.stdin):
        r = json.loads(line)
        t = r["time"]  # RFC 3339 in UTC with nanoseconds: 2026-12-07T02:18:30.897617805Z
        us = int(datetime.fromisoformat(t[:19] + "+00:00").timestamp()) * 1000000 + int(t[20:26])
        field(out, b"__REALTIME_TIMESTAMP", str(us))
        field(out, b"__MONOTONIC_TIMESTAMP", str(n))
        field(out, b"_BOOT_ID", "6c6f67736861726462656e6368000001")
        field(out, b"_HOSTNAME", "bench")
        field(out, b"SYSLOG_IDENTIFIER", r["producer"])
        field(out, b"_PID", str(r["pid"]))
        field(out, b"_UID", str(r["uid"]))
        field(out, b"_GID", str(r["gid"]))
        field(out, b"MESSAGE", r["payload"])
        out.write(b"\n")
        first = us if first is None else first
        last = us
    with open(sys.argv[1], "w") as f:
        print(first // 1000000 if first else 0, last // 1000000 if last else 0, file=f)


if __name__ == "__main__":
    main()
