"""analysis/render/atomic.py: outputs replaced whole or not at all."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from analysis.load import RunDataError
from analysis.render.atomic import Staged, check_target, write_text


def test_write_text_replaces_a_file_with_the_default_mode(tmp_path: Path) -> None:
    target = tmp_path / "fleet.md"
    target.write_text("old")
    write_text(target, "new\n", "fleet")
    assert target.read_text() == "new\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == ["fleet.md"]


def test_no_output_through_a_symlink_or_over_a_folder(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("keep")
    (tmp_path / "link.md").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "dir.md").mkdir()
    for name in ("link.md", "dir.md"):
        with pytest.raises(RunDataError, match="exists and is not a regular file; fleet will not replace it"):
            write_text(tmp_path / name, "x", "fleet")
    with pytest.raises(RunDataError, match="report will not replace it"):
        check_target(tmp_path / "link.md")
    assert (tmp_path / "elsewhere").read_text() == "keep"


def test_staged_outputs_appear_only_on_commit(tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    plots.mkdir()
    staged = Staged(plots)
    fig, _ = plt.subplots()
    assert staged.figure(fig, plots / "a.png") == plots / "a.png"
    again, _ = plt.subplots()
    assert staged.figure(again, plots / "a.png") == plots / "a.png"  # same file: drawn once
    assert not plt.fignum_exists(again.number)
    staged.text(tmp_path / "report.md", "text\n")
    assert not (plots / "a.png").exists() and not (tmp_path / "report.md").exists()
    staged.commit()
    staged.discard()
    assert (plots / "a.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "report.md").read_text() == "text\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.png", "plots", "report.md"]


def test_discarded_outputs_leave_nothing(tmp_path: Path) -> None:
    staged = Staged(tmp_path)
    fig, _ = plt.subplots()
    staged.figure(fig, tmp_path / "a.png")
    staged.text(tmp_path / "verdicts.json", "{}\n")
    staged.discard()
    assert list(tmp_path.iterdir()) == []
