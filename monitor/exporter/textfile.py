"""node_exporter textfiles: one tq_<file>.prom per file of METRICS, each written under a
temporary name and renamed (a scrape never sees half a file), without timestamps."""

from __future__ import annotations

import os
from pathlib import Path

from .metrics import FILES, METRICS, PREFIX


class Round:
    """The samples of one write, collected by metric (name without the prefix)."""

    def __init__(self) -> None:
        self.values: dict[str, list[tuple[dict[str, str], float]]] = {m: [] for m in METRICS}

    def put(self, metric: str, labels: dict[str, str], v: float) -> None:
        self.values[PREFIX + metric].append((labels, v))

    def render(self) -> tuple[dict[str, list[str]], int]:
        """Lines per file (HELP, TYPE, samples sorted by labels) and the number of series."""
        lines: dict[str, list[str]] = {f: [] for f in FILES}
        series = 0
        for name, m in METRICS.items():
            if not self.values[name]:
                continue
            out = lines[m.file]
            out.append(f"# HELP {name} {m.help}")
            out.append(f"# TYPE {name} {m.kind}")
            for lab, v in sorted(self.values[name], key=lambda x: sorted(x[0].items())):
                ls = ",".join(f'{k}="{_esc(lab[k])}"' for k in m.labels)
                out.append(f"{name}{{{ls}}} {_fmt(v)}" if ls else f"{name} {_fmt(v)}")
                series += 1
        return lines, series


# Readable by node_exporter whatever user it runs as, writable by the exporter alone (and the
# folder by it alone: docs/deploy.md); fixed here, not left to the umask of whoever starts it.
FILE_MODE = 0o644


def write(out: Path, lines: dict[str, list[str]]) -> None:
    for f, body in lines.items():
        path = out / f"{PREFIX}{f}.prom"
        tmp = out / f".{PREFIX}{f}.prom.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fd, FILE_MODE)
            fh.write("\n".join(body) + "\n" if body else "")
        os.replace(tmp, path)


def remove(out: Path) -> None:
    """Stale numbers are worse than none: node_exporter would serve them forever."""
    for f in FILES:
        (out / f"{PREFIX}{f}.prom").unlink(missing_ok=True)


def _esc(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(v: float) -> str:
    if isinstance(v, float) and not v.is_integer():
        return repr(round(v, 9))
    return str(int(v))
