"""Services that come and go: a listener on a new loopback port, a few connections to it
closed by the client (TIME_WAIT on its side), then it is gone.

Usage: python3 port_churn.py COUNT. Each of COUNT rounds uses a port the kernel picks,
so nearly every round is a destination the TIME_WAIT probe has not seen and will not
see again: a host whose short-lived services and jobs come and go looks like this.
"""

from __future__ import annotations

import socket
import sys


def one_round(connections: int = 5) -> None:
    lsn = socket.create_server(("127.0.0.1", 0))  # a port the kernel has free
    port = lsn.getsockname()[1]
    for _ in range(connections):
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
        a, _ = lsn.accept()
        c.close()  # the client closes first: its socket holds TIME_WAIT
        a.close()
    lsn.close()


def main(count: int) -> None:
    for _ in range(min(count, 1000)):  # bounded
        one_round()


if __name__ == "__main__":
    main(int(sys.argv[1]))
