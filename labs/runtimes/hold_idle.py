"""hold_idle: what a server does with idle connections past its own connection limit.

Opens CONNS TCP connections to HOST:PORT one after another (each connect waits at most
--connect-timeout), sends nothing, holds them --hold seconds, then reads what each has
received without waiting: bytes the server sent, and whether it closed the connection
(EOF or reset) or keeps it open. Closes every connection and prints one JSON object:
connects tried and completed, how many the server closed and how many are still open,
the first bytes any closed connection received, and the window (epoch seconds).

USAGE: python3 hold_idle.py HOST PORT [--conns N] [--hold S] [--connect-timeout S]

A connect completes when the kernel answers the SYN, whether or not the application ever
accepts: what happened after is in the probe's record of the listener (its depth) and
in the server's reply or close, which this client reports.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

# Attempts that time out in a row before the rest are given up: a listener that stopped
# listening (backlog 0) drops every SYN, and 40 more timeouts would say nothing new.
GIVE_UP_AFTER = 3


def open_all(host: str, port: int, conns: int, timeout: float) -> tuple[list[socket.socket], int, int]:
    """The connections that completed, the attempts that did not, and those not tried."""
    held: list[socket.socket] = []
    failed = in_a_row = 0
    for i in range(conns):
        if in_a_row >= GIVE_UP_AFTER:
            return held, failed, conns - i
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect((host, port))
        except OSError:
            s.close()
            failed += 1
            in_a_row += 1
            continue
        held.append(s)
        in_a_row = 0
        # A short gap, as clients arrive: a server that accepts gets the chance to.
        time.sleep(0.02)
    return held, failed, 0


def fate(s: socket.socket) -> tuple[str, bytes]:
    """closed (EOF or reset) or open, and the bytes received so far."""
    s.setblocking(False)
    got = b""
    while len(got) < 4096:
        try:
            chunk = s.recv(4096)
        except BlockingIOError:
            return "open", got
        except OSError:
            return "closed", got
        if not chunk:
            return "closed", got
        got += chunk
    return "open", got


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="hold_idle.py", description=__doc__.split("\n\n")[1])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--conns", type=int, default=40)
    ap.add_argument("--hold", type=float, default=3.0)
    ap.add_argument("--connect-timeout", type=float, default=2.0)
    a = ap.parse_args(argv)
    start = time.time()
    held, failed, not_tried = open_all(a.host, a.port, a.conns, a.connect_timeout)
    time.sleep(a.hold)
    fates = [fate(s) for s in held]
    end = time.time()
    for s in held:
        s.close()
    said = next((b for f, b in fates if f == "closed" and b), b"")
    doc = {
        "conns": a.conns,
        "connected": len(held),
        "connect_failed": failed,
        "not_tried": not_tried,
        "closed_by_server": sum(f == "closed" for f, _ in fates),
        "open": sum(f == "open" for f, _ in fates),
        "said": said[:120].decode("utf-8", "backslashreplace").strip() or None,
        "start_epoch": round(start, 3),
        "end_epoch": round(end, 3),
    }
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
