"""Threads that come and go: each waits in epoll 40 times for 5 ms, then exits.

Usage: python3 thread_churn.py SECONDS. Prints the thread ids it made, one a line.
A host with cron jobs, builds or short-lived workers looks like this to epoll.bt.
"""

from __future__ import annotations

import select
import sys
import threading
import time


def worker(tids: list[int]) -> None:
    tids.append(threading.get_native_id())
    ep = select.epoll()
    for _ in range(40):
        ep.poll(0.005)
    ep.close()


def main(seconds: float) -> None:
    tids: list[int] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and len(tids) < 1000:  # bounded either way
        t = threading.Thread(target=worker, args=(tids,))
        t.start()
        t.join()
    print("\n".join(str(t) for t in tids))


if __name__ == "__main__":
    main(float(sys.argv[1]))
