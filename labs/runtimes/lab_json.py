"""lab_json: the runtimes lab's JSON ("lab" in metadata.json), for labs/runtimes/lab.sh.

USAGE: lab_json.py RUNTIMES_TSV KEY=VALUE...

RUNTIMES_TSV is the lab's own account of each server it tried (name, port, pid, status,
version, executable; written by lab_run, absent before it ran); beside it, the limits
variant's <name>/at_limit.json for each server held past its limit. KEY=VALUE: variant,
summary, srv_ns, srv_inode, somaxconn. Prints one JSON object.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any


def runtimes(tsv: Path) -> list[dict[str, Any]]:
    """One object per server the lab tried; [] before the lab ran."""
    if not tsv.is_file():
        return []
    with tsv.open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [
        {
            "name": r["name"],
            "port": int(r["port"]),
            "pid": int(r["pid"]) if r["pid"] else None,
            "status": r["status"],
            "version": r["version"] or None,
            "exe": r["exe"] or None,
            **at_limit(tsv.parent / r["name"] / "at_limit.json"),
        }
        for r in rows
    ]


def at_limit(path: Path) -> dict[str, Any]:
    """{"at_limit": ...} from the limits variant's file for one server; {} without one."""
    if not path.is_file():
        return {}
    return {"at_limit": json.loads(path.read_text())}


def main(argv: list[str]) -> int:
    tsv, *pairs = argv
    kv = dict(p.split("=", 1) for p in pairs)
    doc = {
        "lab": "runtimes",
        "variant": kv["variant"],
        "summary": kv["summary"],
        "server": {"netns": kv["srv_ns"], "netns_inode": int(kv["srv_inode"])},
        "somaxconn": int(kv["somaxconn"]),
        "runtimes": runtimes(Path(tsv)),
        "command": f"make lab LAB=runtimes VARIANT={kv['variant']}",
    }
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
