"""The bad-input corpus (tests/analysis/load/badinput.py) through `validate` and `report`.

Every damaged copy of a real run must give either a clean error that names the
file and the line (and column where one applies), or a report whose verdicts
match the undamaged run's unless the report says the input was damaged or
incomplete. validate and report must agree; no file of the run may be lost;
nothing may raise out of main(). Counts are printed (pytest -s) and written to
build/bad-input-summary.json for the closing note.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import time
import traceback
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from analysis.__main__ import main
from analysis.render import plots
from tests.analysis.load.badinput import SIZING, corpus
from tests.conftest import FIXTURES, ROOT

# CPU seconds of this process (the corpus runs in-process): a bound on the work, which the
# clock is not when the suite shares its core with the integration tests (96.5 s by the
# clock once in CI beside them).
BUDGET_S = 90
# An error line: "path:line: ..." or, for a whole file, "path: missing|is a directory|...".
LINE_RE = re.compile(r"^(?:error: )?(/\S+?):(\d+): (.+)$")
FILE_RE = re.compile(r"^(?:error: )?(/\S+?): (missing|is a directory|not a regular file|exists and is not a)")
# Damage that sits in one CSV cell or JSON syntax: the error must also give the column.
NEEDS_COLUMN = re.compile(r"\.csv:\d+: (?!header|empty file|the last line|malformed CSV|no row for)")


def _run(args: list[str]) -> tuple[int | None, str, str, str | None]:
    out, err = io.StringIO(), io.StringIO()
    tb = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(args)
        except KeyboardInterrupt:  # the suite is being stopped: not a case's failure
            raise
        except BaseException:  # anything else escaping main() is the failure we count
            rc, tb = None, traceback.format_exc()
    return rc, out.getvalue(), err.getvalue(), tb


def _listing(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def _signature(d: Path) -> list[tuple]:
    v = json.loads((d / "verdicts.json").read_text())
    return sorted((f["kind"], f["status"], f["cause_class"]) for f in v["findings"] + v["ruled_out"])


def _says_damaged(d: Path) -> bool:
    text = (d / "report.md").read_text()
    return "Input oddities" in text or "This run is incomplete" in text or "Missing tables" in text


def _prepare(tmp: Path, base: str, name: str) -> Path:
    d = tmp / re.sub(r"[^a-zA-Z0-9]+", "-", name).strip("-")
    shutil.copytree(FIXTURES / base, d)
    (d / "plots").mkdir()
    (d / "plots" / "keep-me.txt").write_text("not written by report\n")
    return d


def _has_keep_me(case_name: str, after: set[str]) -> bool:
    return "plots/keep-me.txt" in after or case_name == "file for plots/"


def _figures_built_not_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each figure is built from the (damaged) tables as in any report, and staged, committed
    and listed in the plots manifest, but not laid out or rasterised: matplotlib's layout and
    PNG took 60 % of a report's time, and this test is about the input, not the pixels
    (test_report.py and the notebooks draw real ones)."""

    def save(fig: Figure, path: Path) -> Path:
        path.write_bytes(b"a figure, not drawn (test_bad_input.py)\n")
        plots.plt.close(fig)
        return path

    monkeypatch.setattr(Figure, "tight_layout", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(plots, "save", save)


def test_bad_input_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _figures_built_not_drawn(monkeypatch)
    t0 = time.process_time()
    cases = corpus()
    assert len(cases) >= 100
    originals: dict[str, list[tuple]] = {}
    for base in sorted({c.base for c in cases}):
        d = _prepare(tmp_path / "orig", base, base)
        rc, _, err, tb = _run(["report", str(d)])
        assert rc == 0 and tb is None, err
        originals[base] = _signature(d)

    counts = {"cases": len(cases), "clean_errors": 0, "accepted_unchanged": 0, "accepted_damage_noted": 0}
    counts["tracebacks"] = 0
    problems: list[str] = []
    outcomes: dict[str, str] = {}
    for case in cases:
        d = _prepare(tmp_path / "cases", case.base, case.name)
        where = case.damage(d)
        before = _listing(d)
        v_rc, v_out, v_err, v_tb = _run(["validate", str(d)])
        r_rc, _, r_err, r_tb = _run(["report", str(d)])
        after = _listing(d) if d.is_dir() else set()
        label = f"[{case.name}]"
        for tb, err in ((v_tb, v_err), (r_tb, r_err)):
            if tb is not None or "Traceback" in err:
                counts["tracebacks"] += 1
                problems.append(f"{label} traceback:\n{tb or err}")
        if v_tb or r_tb:
            continue
        lost = before - after
        if lost:
            problems.append(f"{label} files lost: {sorted(lost)}")
        if (v_rc == 0) != (r_rc == 0):
            problems.append(f"{label} validate rc {v_rc} but report rc {r_rc}: {v_err or r_err}")
            continue
        if v_rc != 0:
            if v_rc != 2 or r_rc != 2:
                problems.append(f"{label} exit codes {v_rc}/{r_rc}, expected 2")
            msg = v_err.strip()
            ok = msg.startswith("error: ")
            for line in msg.splitlines():
                if line.startswith("... and "):
                    continue
                m = LINE_RE.match(line) or FILE_RE.match(line)
                if not m or not m.group(1).startswith(str(d)):
                    ok = False
                    problems.append(f"{label} error does not name a file of the run and a line: {line!r}")
                if NEEDS_COLUMN.search(line) and ": column " not in line:
                    ok = False
                    problems.append(f"{label} error names no column: {line!r}")
            if where and not re.search(where, msg, re.S):
                ok = False
                problems.append(f"{label} error {msg!r} does not match {where!r}")
            if r_err.strip() != msg:
                problems.append(f"{label} validate and report give different errors:\n{msg}\n{r_err.strip()}")
            if case.expect != "error":
                problems.append(f"{label} expected to load, got: {msg}")
            if not _has_keep_me(case.name, after):
                problems.append(f"{label} plots/keep-me.txt gone")
            counts["clean_errors"] += ok
            outcomes[case.name] = msg.splitlines()[0].replace(str(d) + "/", "")
            continue
        # Accepted: same verdicts as the undamaged run, or the report says what was wrong.
        if case.expect != "ok":
            problems.append(f"{label} expected an error, was accepted:\n{v_out}")
        changed = _signature(d) != originals[case.base]
        noted = _says_damaged(d)
        if changed and not noted:
            problems.append(f"{label} accepted with changed verdicts and no word of damage: {_signature(d)}")
        elif noted:
            counts["accepted_damage_noted"] += 1
        else:
            counts["accepted_unchanged"] += 1
        outcomes[case.name] = ("accepted, damage noted" if noted else "accepted") + (
            ", verdicts changed" if changed else ", same verdicts"
        )
        if not _has_keep_me(case.name, after):
            problems.append(f"{label} plots/keep-me.txt gone")

    counts["seconds"] = round(time.process_time() - t0, 1)
    summary = ROOT / "build" / "bad-input-summary.json"
    summary.parent.mkdir(exist_ok=True)
    summary.write_text(json.dumps({**counts, "problems": problems, "outcomes": outcomes}, indent=2) + "\n")
    print(f"\nbad-input corpus: {json.dumps(counts)}")
    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} problems)"
    assert counts["tracebacks"] == 0
    assert counts["clean_errors"] + counts["accepted_unchanged"] + counts["accepted_damage_noted"] == len(cases)
    assert counts["seconds"] <= BUDGET_S


@pytest.mark.parametrize(
    "comm",
    [b'a,"b"\nc\xff', b"x,y", b'say "hi"', b"two\r\nlines", b"\xc3\xa9t\xe9"],
    ids=["all", "comma", "quote", "crlf", "mixed-utf8"],
)
def test_odd_but_valid_comm_survives(copy_fixture, comm: bytes) -> None:
    """A comm with comma, quote, newline and a non-UTF-8 byte, properly quoted, loads; decoded per the policy."""
    from analysis.load import Run
    from tests.analysis.load.badinput import quoted_comm

    d = copy_fixture(SIZING)
    quoted_comm("aq_accept.csv", comm)(d)
    run = Run.open(d)
    run.validate_all()
    expected = comm.decode("utf-8", errors="backslashreplace")
    assert set(run.table("aq_accept")["comm"]) == {expected}
    assert any(n.startswith("aq_accept.csv: bytes that are not UTF-8") for n in run.notes) == (
        expected != comm.decode("utf-8", errors="ignore")
    )
    rc, _, err, tb = _run(["report", str(d)])
    assert rc == 0 and tb is None, err
    v = json.loads((d / "verdicts.json").read_text())
    (f,) = [f for f in v["findings"] if f["kind"] == "accept_queue_overflow"]
    assert f["subject"]["comm"] == expected


def test_report_keeps_files_it_did_not_write_and_removes_only_its_stale_plots(copy_fixture) -> None:
    d = copy_fixture(SIZING)
    (d / "plots").mkdir()
    (d / "plots" / "mine.png").write_bytes(b"user's own plot")
    assert _run(["report", str(d)])[0] == 0
    manifest = json.loads((d / "plots" / ".report-plots.json").read_text())
    assert manifest and all((d / "plots" / n).is_file() for n in manifest)
    # A plot the last report wrote but this one does not is stale: removed. Others stay.
    (d / "plots" / "event_loop_1.png").write_bytes(b"stale")
    (d / "plots" / ".report-plots.json").write_text(json.dumps([*manifest, "event_loop_1.png"]))
    assert _run(["report", str(d)])[0] == 0
    assert not (d / "plots" / "event_loop_1.png").exists()
    assert (d / "plots" / "mine.png").read_bytes() == b"user's own plot"
    assert not [p for p in d.rglob("*.tmp*")], "temporary files left"


def test_failed_report_leaves_previous_outputs_consistent(copy_fixture, monkeypatch) -> None:
    d = copy_fixture(SIZING)
    assert _run(["report", str(d)])[0] == 0
    before = {n: (d / n).read_bytes() for n in ("verdicts.json", "report.md")}
    from analysis.render import report

    def boom(*a, **k):
        raise OSError(28, "No space left on device", str(d / "report.md"))

    monkeypatch.setattr(report, "markdown", boom)
    rc, _, err, tb = _run(["report", str(d)])
    assert rc == 2 and tb is None and "No space left" in err
    assert {n: (d / n).read_bytes() for n in before} == before
    assert not [p for p in d.rglob("*.tmp*")], "temporary files left"
