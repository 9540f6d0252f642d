"""collector/sample-netns.awk, the samplers' parsers, under every awk a user's host may have:
Debian's mawk, gawk (RHEL's awk, and the Debian 13 guest's), busybox. The inputs are the
verbatim ss tables of tests/collector/data (how each was taken: test_sample_netns.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

PARSER = ROOT / "collector" / "sample-netns.awk"
DATA = Path(__file__).parent / "data"


def _awks() -> dict[str, list[str]]:
    out = {name: [path] for name in ("mawk", "gawk") if (path := shutil.which(name))}
    if busybox := shutil.which("busybox"):
        out["busybox"] = [busybox, "awk"]
    return out


def _run(awk: list[str], tmp_path: Path, **variables: str) -> str:
    args = [a for k, v in variables.items() for a in ("-v", f"{k}={v}")]
    r = subprocess.run([*awk, *args, "-f", str(PARSER)], capture_output=True, text=True, check=True,
                       env={**os.environ, "LC_ALL": "C"}, cwd=tmp_path)  # fmt: skip
    return r.stdout


@pytest.mark.parametrize(
    ("job", "table", "extra"),
    [
        ("buffers", "ss-tinmH-established.txt", {"statef": "state"}),
        ("listeners", "ss-ltnpmH.txt", {"owners": "", "watchers": ""}),
    ],
)
def test_every_awk_gives_the_same_rows(tmp_path: Path, job: str, table: str, extra: dict[str, str]) -> None:
    awks = _awks()
    # setup installs busybox beside Debian's mawk: two awks at least, so the comparison is made.
    assert len(awks) >= 2, f"only {sorted(awks)}"
    inputs = {"buffers": "flows_in", "listeners": "listeners_in"}
    rows = {}
    for name, awk in awks.items():
        (tmp_path / "state").unlink(missing_ok=True)
        rows[name] = _run(awk, tmp_path, job=job, t="1", ns="4026531840", **{inputs[job]: str(DATA / table)}, **extra)
    first = next(iter(rows.values()))
    assert first.count("\n") >= 3
    assert ",::1," in first or job != "buffers"  # IPv6 addresses without ss's brackets
    assert all(r == first for r in rows.values()), {k: v.splitlines()[:4] for k, v in rows.items()}


def test_no_regex_is_made_from_a_string() -> None:
    """gawk compiles a dynamic regex again whenever its string differs from the last one at the
    same place: one match(s, re) fed ten strings cost 100 µs a flow against 23 with literals
    (docs/cost.md). Every regex of the parsers is a literal or a string constant."""
    code = ["" if ln.lstrip().startswith("#") else ln for ln in PARSER.read_text().splitlines()]
    dynamic = re.compile(r"\bmatch\([^,]+,(?!\s*[/\"])|\bg?sub\((?!\s*[/\"])|~(?!\s*[/\"])")
    found = [f"{PARSER.name}:{i}: {ln.strip()}" for i, ln in enumerate(code, 1) if dynamic.search(ln)]
    assert not found, "\n".join(found)
