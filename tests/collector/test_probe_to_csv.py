"""collector/probe-to-csv on real raw probe output (tests/fixtures/*/probe_*.out,
made by real captures): it reproduces the committed CSVs byte for byte, and
two interval markers stamped with the same second (timer jitter near a second
boundary) make one row per key for that second with the counts of both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from analysis.contract import TABLES
from tests.conftest import FIXTURES, ROOT

P2C = str(ROOT / "collector" / "probe-to-csv")
RAW = sorted(FIXTURES.glob("*/probe_*.out"))


def convert(raw: Path, out: Path) -> int:
    r = subprocess.run([P2C, str(raw), str(out)], capture_output=True, text=True, check=True)
    assert r.stderr == "", r.stderr
    return int(r.stdout)


@pytest.mark.parametrize("raw", RAW, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reproduces_committed_csvs(raw: Path, tmp_path: Path) -> None:
    convert(raw, tmp_path)
    for made in tmp_path.glob("*.csv"):
        assert made.read_bytes() == (raw.parent / made.name).read_bytes(), made.name


def test_two_markers_in_one_second_make_one_row(tmp_path: Path) -> None:
    raw = FIXTURES / "epoll-busy" / "probe_epoll.out"
    lines = raw.read_text().splitlines(keepends=True)
    markers = [i for i, line in enumerate(lines) if line.startswith("=== ")]
    # Stamp the 4th interval with the 3rd one's second, as a late tick would.
    i3, i4 = markers[2], markers[3]
    damaged = [*lines[:i4], lines[i3], *lines[i4 + 1 :]]
    src = tmp_path / "probe_epoll.out"
    src.write_text("".join(damaged))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    convert(raw, tmp_path / "a")
    convert(src, tmp_path / "b")
    a = pd.read_csv(tmp_path / "a" / "ep_loop.csv")
    b = pd.read_csv(tmp_path / "b" / "ep_loop.csv")
    assert not b.duplicated(["time_s", "pid", "comm"]).any()
    t3, t4 = int(lines[i3].split()[1]), int(lines[i4].split()[1])
    merged = a[a["time_s"].isin([t3, t4])].groupby(["pid", "comm"]).sum(numeric_only=True).drop(columns="time_s")
    got = b[b["time_s"] == t3].set_index(["pid", "comm"]).drop(columns="time_s")
    pd.testing.assert_frame_equal(got.sort_index(), merged.sort_index(), check_dtype=False)
    # Nothing else moved: the totals over the whole capture are the same.
    assert (a.drop(columns=["time_s", "pid", "comm"]).sum() == b.drop(columns=["time_s", "pid", "comm"]).sum()).all()


def _restart_totals(lines: list[str], at: int, same_second: bool) -> list[str]:
    """The probe's output as if it had cleared its totals after the block before marker
    number `at` ("fresh"): from there each total less what it was then, and a key whose
    total had not moved since not printed at all (as a cleared map does not print it)."""
    markers = [i for i, line in enumerate(lines) if line.startswith("=== ")]
    cut = markers[at]
    base: dict[str, int] = {}
    for line in lines[markers[at - 1] : cut]:
        if line.startswith("@"):
            key, val = line.rsplit(": ", 1)
            base[key] = int(val)
    out = lines[:cut]
    stamp = lines[markers[at - 1]].split()[1] if same_second else lines[cut].split()[1]
    out.append(f"=== {stamp} fresh\n")
    for line in lines[cut + 1 :]:
        if line.startswith("@"):
            key, val = line.rsplit(": ", 1)
            since = int(val) - base.get(key, 0)
            if since:
                out.append(f"{key}: {since}\n")
        else:
            out.append(line)
    return out


@pytest.mark.parametrize("same_second", [False, True])
@pytest.mark.parametrize("family", ["retransmits", "time_wait"])
def test_totals_that_start_again_from_zero_give_the_same_rows(tmp_path: Path, family: str, same_second: bool) -> None:
    """retransmits.bt and time_wait.bt clear their totals every 60th block and mark the next one
    "fresh" (so a key with no event since is not printed again): the rows must not change, also
    when the fresh block is stamped with the second before it (two ticks in one second)."""
    raw = FIXTURES / "accept-overflow-sizing-drift" / f"probe_{family}.out"
    if not raw.exists():
        raw = FIXTURES / "host-loop" / f"probe_{family}.out"
    lines = raw.read_text().splitlines(keepends=True)
    src = tmp_path / raw.name
    src.write_text("".join(_restart_totals(lines, 5, same_second)))
    assert src.read_text().count(" fresh\n") == 1
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    convert(raw, tmp_path / "a")
    convert(src, tmp_path / "b")
    for made in (tmp_path / "a").glob("*.csv"):
        a, b = pd.read_csv(made), pd.read_csv(tmp_path / "b" / made.name)
        if a.empty:
            assert b.empty, made.name
            continue
        keys = [c for c in TABLES[made.stem].key if c != "time_s"]
        if same_second:  # the fresh block's row joins the one before it: compare the totals
            assert (
                (a.drop(columns=["time_s"]).groupby(keys).sum() == b.drop(columns=["time_s"]).groupby(keys).sum())
                .all()
                .all()
            )
        else:
            pd.testing.assert_frame_equal(a, b)


# A helper warning as bpftrace 0.23 prints it into the probe's output (accept_queue.tracepoint.bt
# under the busy-host lab, 2026-11-28): four lines.
WARNING_BLOCK = (
    "/work/wt35/probes/accept_queue.tracepoint.bt:321:5-43: WARNING: Can't delete map element because it does "
    "not exist.\n"
    "Additional Info - helper: map_delete_elem, retcode: -2\n"
    "                delete(@aq_slot[(struct sock *)$skp]);\n"
    "                ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
)


@pytest.mark.parametrize(
    "raw",
    [
        FIXTURES / "accept-overflow-sizing" / "probe_accept_queue.out",
        FIXTURES / "epoll-busy" / "probe_epoll.out",
        FIXTURES / "time-wait-exhaust" / "probe_time_wait.out",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_bpftrace_warnings_are_counted_and_change_no_row(tmp_path: Path, raw: Path) -> None:
    """A warning after each line of a record with a comm (rows and totals), where the parser waits
    for the rest of a comm that may hold a newline: it took the warning for that rest, wrote it into
    the CSV (aq_accept.csv of a 0.23 run) or dropped the total it followed, and counted 28 of 44
    lines. Now the CSVs are the committed ones and every line of every warning is counted."""
    lines = raw.read_text().splitlines(keepends=True)
    with_comm = [ln.split(",")[0][1:] for ln in lines if ln.startswith("#") and ",comm," in ln]
    starts = tuple(f"{r}," for r in with_comm) + tuple(f"@{r}__" for r in with_comm)
    hit = {i for i, ln in enumerate(lines) if ln.startswith(starts)}
    assert hit, raw
    damaged = [ln + (WARNING_BLOCK if i in hit else "") for i, ln in enumerate(lines)]
    src = tmp_path / raw.name
    src.write_text("".join(damaged))
    r = subprocess.run([P2C, str(src), str(tmp_path)], capture_output=True, text=True, check=True)
    assert r.stderr == f"{4 * len(hit)} lines of unknown records were left in the raw output\n"
    for made in tmp_path.glob("*.csv"):
        assert made.read_bytes() == (raw.parent / made.name).read_bytes(), made.name
