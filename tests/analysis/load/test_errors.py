"""Bad input gets a clear error naming the file and line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.load import Run, RunDataError, read_json
from tests.conftest import FIXTURES, ROOT

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


@pytest.mark.parametrize(
    "path,schema",
    [
        *[(p.relative_to(FIXTURES), "metadata") for p in sorted(FIXTURES.glob("*/metadata.json"))],
        *[(p.relative_to(FIXTURES), "doctor") for p in sorted(FIXTURES.glob("*/doctor.json"))],
        *[(p.relative_to(FIXTURES), "compare") for p in sorted(FIXTURES.glob("*/compare.json"))],
        *[(p.relative_to(FIXTURES), "compare_verdict") for p in sorted(FIXTURES.glob("*/verdict.json"))],
        *[(p.relative_to(FIXTURES), "sweep") for p in sorted(FIXTURES.glob("*/sweep.json"))],
    ],
    ids=str,
)
def test_json_schemas_accept_what_the_writers_wrote(path: Path, schema: str) -> None:
    read_json(FIXTURES / path, "", schema=schema, allow_nan=schema == "compare_verdict")


def test_json_error_names_line_and_key_path(copy_fixture) -> None:
    run = copy_fixture(RUN)
    meta = run / "metadata.json"
    text = meta.read_text().replace('"status": "ok", "rows": 83', '"status": "ok", "rows": "83"')
    meta.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if '"rows": "83"' in s)
    with pytest.raises(
        RunDataError, match=rf"metadata\.json:{line}: probes\.epoll\.rows: '83' is not of type 'integer'"
    ):
        Run.open(run)


def test_a_capture_that_has_not_ended_is_refused_with_how_to_reap(copy_fixture) -> None:
    run = copy_fixture(RUN)
    meta = json.loads((run / "metadata.json").read_text())
    meta.update(complete=False, stop_reason="running", ended_epoch=None, ended_at=None)
    (run / "metadata.json").write_text(json.dumps(meta, indent=2))
    with pytest.raises(RunDataError, match=r"metadata\.json:\d+: stop_reason: this capture has not ended.*--reap"):
        Run.open(run)


def test_csv_errors_count_physical_lines_inside_quoted_fields(copy_fixture) -> None:
    run = copy_fixture(RUN)
    f = run / "aq_accept.csv"
    rows = f.read_bytes().splitlines(keepends=True)
    rows[1] = rows[1].replace(b",aqserver,", b',"aq\nserver",')  # row 2 spans lines 2-3
    rows[2] += b"\n"  # a blank line 5
    rows[3] = rows[3].replace(b",aqserver,", b",aqserver,x")  # physical line 6
    f.write_bytes(b"".join(rows))
    with pytest.raises(RunDataError, match=r"aq_accept\.csv:6: column 4 \(netns\): 'x4026532177' is not an integer"):
        Run.open(run).table("aq_accept")


def test_loader_and_contract_import_nothing_above_them() -> None:
    """The layers read upward: contract <- load <- derived <- rules <- wording <- render; never the reverse.
    Below them all, the family registry's reader (analysis.families, standard library only)."""
    code = (
        "import sys, analysis.load\n"
        "above = ('analysis.derived', 'analysis.rules', 'analysis.wording', 'analysis.render')\n"
        "print(sorted(m for m in sys.modules if m.startswith(above)))\n"
        "print(sorted(m for m in sys.modules if m.startswith('analysis.') and m.split('.')[1] not in "
        "('load', 'contract', 'families')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out == "[]\n[]\n"


def test_validate_refuses_what_report_could_not_replace(copy_fixture) -> None:
    """A report output that is not a regular file fails validate as it fails report (analysis/render/outputs.py)."""
    run = copy_fixture(RUN)
    (run / "report.md").mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "analysis", "validate", str(run)], cwd=ROOT, capture_output=True, text=True
    )
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert f"{run / 'report.md'}: exists and is not a regular file; report will not replace it" in p.stderr
    Run.open(run).validate_all()  # the loader itself knows nothing of report's outputs
