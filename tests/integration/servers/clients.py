"""Clients that connect and send one line each, and hold their sockets.

Usage: python3 clients.py HOST PORT COUNT SECONDS. Non-blocking connects, all at once; each
socket that connects sends "hello\\n". Prints "connected N of COUNT" when SECONDS are up.
"""

from __future__ import annotations

import select
import socket
import sys
import time


def main(host: str, port: int, count: int, seconds: float) -> None:
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((host, port))
        socks.append(s)
    pending, sent = set(socks), 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _, ready, _ = select.select([], list(pending), [], 0.2) if pending else ([], [], time.sleep(0.2))
        for s in ready:
            pending.discard(s)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                s.send(b"hello\n")
                sent += 1
    print(f"connected {sent} of {count}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
