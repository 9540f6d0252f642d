"""A server with four named epoll threads, one of them never blocked (issue 18: its CPU
share read 79 % in the report while /proc gave 96 %).

Usage: python3 epoll_threads_server.py SECONDS. Listens on 127.0.0.1 (a free port), then
prints one line "PORT TID_OF_BUSY" and runs for SECONDS. The thread "busy-loop" waits in
epoll on a pipe that is always readable (never drained), so every call returns at once with
one event, and spends 10 ms of CPU on each (about 100 calls a second, a dozen of them sampled by
the probe: well above the rule's 10 events an interval); "idle-1".."idle-3" wait in epoll
on the listener, which no one connects to.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import sys
import threading
import time

PR_SET_NAME = 15
LIBC = ctypes.CDLL(None, use_errno=True)


def named(name: str) -> None:
    LIBC.prctl(PR_SET_NAME, name.encode(), 0, 0, 0)


def busy(end: float, tids: list[int]) -> None:
    named("busy-loop")
    tids.append(threading.get_native_id())
    r, w = os.pipe()
    os.write(w, b"x")  # readable until the end: every wait returns at once
    ep = select.epoll()
    ep.register(r, select.EPOLLIN)
    while time.monotonic() < end:
        ep.poll(-1)
        spin = time.thread_time() + 0.01
        while time.thread_time() < spin:
            pass


def idle(name: str, fd: int, end: float) -> None:
    named(name)
    ep = select.epoll()
    ep.register(fd, select.EPOLLIN)
    while time.monotonic() < end:
        ep.poll(1.0)


def main(seconds: float) -> None:
    end = time.monotonic() + seconds
    lsn = socket.create_server(("127.0.0.1", 0))
    tids: list[int] = []
    threads = [threading.Thread(target=busy, args=(end, tids))]
    threads += [threading.Thread(target=idle, args=(f"idle-{i}", lsn.fileno(), end)) for i in (1, 2, 3)]
    for t in threads:
        t.start()
    while not tids:
        time.sleep(0.01)
    print(lsn.getsockname()[1], tids[0], flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(float(sys.argv[1]))
