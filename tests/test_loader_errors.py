"""Bad input gets a clear error naming the file and line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.run import Run, RunDataError
from tests.conftest import ROOT

RUN = "accept-overflow-sizing"


def _rewrite_line(path: Path, lineno: int, fn) -> None:
    lines = path.read_text().splitlines()
    lines[lineno - 1] = fn(lines[lineno - 1])
    path.write_text("\n".join(lines) + "\n")


def test_header_mismatch_names_file_line_and_columns(copy_fixture) -> None:
    run = copy_fixture(RUN)
    _rewrite_line(run / "aq_listener.csv", 1, lambda s: s.replace("depth_now,", ""))
    with pytest.raises(RunDataError, match=r"aq_listener\.csv:1: header .* missing \['depth_now'\]"):
        Run.open(run).table("aq_listener")


def test_bad_value_names_the_line(copy_fixture) -> None:
    run = copy_fixture(RUN)
    f = run / "aq_listener.csv"
    _rewrite_line(f, 3, lambda s: ",".join(["x" if i == 7 else v for i, v in enumerate(s.split(","))]))
    with pytest.raises(RunDataError) as e:
        Run.open(run).table("aq_listener")
    assert f"{f}:3: column 8 (depth_max): 'x' is not an integer" in str(e.value)


def test_negative_count_is_refused_with_its_line(copy_fixture) -> None:
    run = copy_fixture(RUN)
    sock = run / "sockstat.csv"
    _rewrite_line(sock, 4, lambda s: ",".join([*s.split(",")[:2], "-5", *s.split(",")[3:]]))
    with pytest.raises(RunDataError, match=r"sockstat\.csv:4: column 3 \(tcp_inuse\): -5 fails"):
        Run.open(run).table("sockstat")


def test_ragged_row_names_the_line(copy_fixture) -> None:
    run = copy_fixture(RUN)
    _rewrite_line(run / "aq_accept.csv", 4, lambda s: s + ",1,2")
    with pytest.raises(RunDataError, match=r"aq_accept\.csv:4: column 9: row has 10 fields, expected 8"):
        Run.open(run).table("aq_accept")


def test_missing_metadata_and_wrong_contract(copy_fixture, tmp_path: Path) -> None:
    with pytest.raises(RunDataError, match="not a run directory"):
        Run.open(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunDataError, match=r"metadata\.json: missing"):
        Run.open(empty)
    run = copy_fixture(RUN)
    meta = json.loads((run / "metadata.json").read_text())
    meta["data_contract"] = 99
    (run / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(RunDataError, match=r"metadata\.json:1: data_contract: data contract v99, this analysis reads"):
        Run.open(run)


def test_missing_probe_table_is_an_error_but_missing_optional_is_not(copy_fixture) -> None:
    run = copy_fixture(RUN)
    (run / "connects.csv").unlink()
    assert Run.open(run).table("connects").empty
    (run / "aq_listener.csv").unlink()
    with pytest.raises(RunDataError, match=r"aq_listener\.csv: missing"):
        Run.open(run).table("aq_listener")


def test_cli_prints_error_without_traceback(copy_fixture) -> None:
    run = copy_fixture(RUN)
    _rewrite_line(run / "counters.csv", 1, lambda s: s.replace("delta", "change"))
    r = subprocess.run([sys.executable, "-m", "analysis", "report", str(run)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and "counters.csv:1" in r.stderr
    assert "Traceback" not in r.stderr
    # Nothing already captured is lost: the CSVs are untouched and no report was half-written.
    assert (run / "aq_listener.csv").stat().st_size > 0
    assert not (run / "verdicts.json").exists()
