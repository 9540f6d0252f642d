"""Things real captures do that the loader must accept (found in review of the
issue-9 loader): a wall clock stepped back between two samples, and a lab
block without the requested backlog when the probe saw no listen() call.
Each case is a copy of a real capture (tests/fixtures) changed the way the
quirk changes it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis.__main__ import main
from analysis.load import Run


def test_clock_stepped_back_keeps_the_counter_chain(copy_fixture) -> None:
    run: Path = copy_fixture("accept-overflow-queue")
    f = run / "counters.csv"
    df = pd.read_csv(f, dtype=str, keep_default_na=False)
    times = sorted(df["time_s"].unique(), key=float)
    # NTP steps the clock back 0.5 s after the second sample: later samples
    # carry smaller times than earlier ones, in the order they were taken.
    later = df["time_s"].isin(times[2:])
    df.loc[later, "time_s"] = [f"{float(t) - 1.5:.3f}" for t in df.loc[later, "time_s"]]
    df.to_csv(f, index=False)
    counts = Run.open(run).validate_all()
    assert counts["counters"] == len(df)


def test_lab_block_without_backlog_requested_reports(copy_fixture, capsys) -> None:
    run: Path = copy_fixture("accept-overflow-queue")
    meta = json.loads((run / "metadata.json").read_text())
    del meta["lab"]["server"]["backlog_requested"]
    listen_lines = (run / "aq_listen.csv").read_text().splitlines(keepends=True)
    meta["probes"]["accept_queue"]["rows"] -= len(listen_lines) - 1
    (run / "metadata.json").write_text(json.dumps(meta))
    (run / "aq_listen.csv").write_text(listen_lines[0])
    assert main(["validate", str(run)]) == 0
    assert main(["report", str(run)]) == 0
    assert "Traceback" not in capsys.readouterr().err
