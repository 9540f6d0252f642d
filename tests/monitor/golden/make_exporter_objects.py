"""Made tests/monitor/golden/exporter_objects.json from the exporter BEFORE its probe parser moved into
collector/probe-to-csv --stream (monitor/exporter.py at commit 9ac993f, its ProbeParser and
Exporter.row): every fixture's raw probe output, line by line, through ProbeParser(the
current probe source, ROWS_USED) and Exporter.row (--top 100000 so every object is exported
and row order cannot change which; --interval 1), then the last block (ProbeParser._flush: a
live stream waits for the next marker, a finished file has none). What is recorded per
fixture: each family's objects (counters, gauges, score), how many are exported, the "other"
series, and the namespaces seen. Fixtures whose rows older probes wrote without a column the
exporter reads (epoll without tid, time_wait without failures) raise KeyError and are left
out. Kept to show how the golden file was made; it needs git and that commit:

    python3 tests/monitor/golden/make_exporter_objects.py > tests/monitor/golden/exporter_objects.json
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "9ac993f"


def main() -> None:
    sys.path.insert(0, str(ROOT))
    old = Path(tempfile.mkdtemp()) / "old_exporter.py"
    old.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{COMMIT}:monitor/exporter.py"],
                                  capture_output=True, text=True, check=True).stdout)  # fmt: skip
    spec = importlib.util.spec_from_file_location("old_exporter", old)
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    sys.modules["old_exporter"] = ex
    spec.loader.exec_module(ex)
    out = {}
    for raw in sorted((ROOT / "tests" / "fixtures").glob("*/probe_*.out")):
        fam = raw.stem.removeprefix("probe_")
        e = ex.Exporter(ex.parse_args(["--prom-dir", "/nonexistent", "--state-dir", "/nonexistent",
                                       "--top", "100000", "--interval", "1"]))  # fmt: skip
        p = ex.ProbeParser((ROOT / "probes" / f"{fam}.bt").read_text(), ex.ROWS_USED)
        try:
            for line in raw.read_bytes().split(b"\n"):
                for rec, row in p.feed(line.decode("utf-8", "replace")):
                    e.row(rec, row)
            for rec, row in [*p.flush_pending(), *p._flush()]:
                e.row(rec, row)
        except KeyError:
            continue
        tables = {}
        for f, fm in e.fams.items():
            objs = {
                "\x1f".join(k): {"counters": o.counters, "gauges": o.gauges, "score": o.score}
                for k, o in sorted(fm.objs.items())
            }
            if objs or fm.other:
                tables[f] = {"objects": objs, "exported": len(fm.exported), "other": fm.other}
        out[f"{raw.parent.name}/{raw.name}"] = {"tables": tables, "netns_seen": sorted(e.ns_seen)}
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
