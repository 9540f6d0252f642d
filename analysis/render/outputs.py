"""What `report` writes into a run directory, and the check that it can write there."""

from __future__ import annotations

from pathlib import Path

from analysis.load import RunDataError

REPORT_OUTPUTS = ("verdicts.json", "report.md")
# plots/ may hold files of others: report writes, replaces and removes only the
# files listed here (the plots it wrote last time), never the folder.
PLOT_MANIFEST = ".report-plots.json"


def check_outputs(run_dir: Path) -> None:
    """report can write its outputs here: each is absent or a regular file, plots/ absent or a folder."""
    for name in (*REPORT_OUTPUTS, f"plots/{PLOT_MANIFEST}"):
        p = run_dir / name
        if (p.exists() or p.is_symlink()) and (p.is_symlink() or not p.is_file()):
            raise RunDataError(f"{p}: exists and is not a regular file; report will not replace it")
        if name == REPORT_OUTPUTS[0]:
            plots = run_dir / "plots"
            if plots.is_symlink() or (plots.exists() and not plots.is_dir()):
                raise RunDataError(f"{plots}: exists and is not a folder; report writes its plots there")
