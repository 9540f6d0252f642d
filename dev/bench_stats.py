"""bench_stats: the Python half of dev/bench.

USAGE: bpftool prog show -j | bench_stats.py progs   # "id name run_cnt run_time_ns", one line per program
       bench_stats.py seconds RUN/metadata.json       # the capture's length in seconds
"""

from __future__ import annotations

import json
import sys


def progs() -> None:
    for p in json.load(sys.stdin):
        print(p["id"], p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0))


def seconds(metadata: str) -> None:
    with open(metadata) as f:
        m = json.load(f)
    print(m["ended_epoch"] - m["started_epoch"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["progs"]:
        progs()
    elif sys.argv[1:2] == ["seconds"] and len(sys.argv) == 3:
        seconds(sys.argv[2])
    else:
        sys.exit(__doc__)
