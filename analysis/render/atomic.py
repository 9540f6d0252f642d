"""Outputs replaced whole or not at all.

Each file is written under a temporary name beside its target (same folder, so the
rename cannot cross a file system) and renamed into place only once it, or every
file of a Staged set, is written: a failure leaves the previous outputs as they were.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from matplotlib.figure import Figure

from analysis.load import RunDataError
from analysis.render import plots


def check_target(p: Path, writer: str = "report") -> None:
    """An output is only ever written over a regular file: never through a symlink, never over a folder."""
    if (p.exists() or p.is_symlink()) and (p.is_symlink() or not p.is_file()):
        raise RunDataError(f"{p}: exists and is not a regular file; {writer} will not replace it")


def default_mode(path: str | Path) -> None:
    """mkstemp makes 0600 files; outputs get the mode a plain open() would give them."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def temp_text(final: Path, text: str) -> Path:
    """text in a new temporary file beside final (removed again if it cannot be written)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            default_mode(tmp)
            f.write(text)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def write_text(final: Path, text: str, writer: str) -> None:
    """One text file replaced atomically."""
    check_target(final, writer)
    tmp = temp_text(final, text)
    try:
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


class Staged:
    """Figures and texts written under temporary names; commit() renames them into place.

    Figures are committed first, then the texts in the order they were staged.
    """

    def __init__(self, plot_dir: Path) -> None:
        self.plot_dir = plot_dir
        self.figures: dict[Path, Path] = {}  # final -> temporary
        self.texts: list[tuple[Path, Path]] = []  # (final, temporary)

    def figure(self, fig: Figure, final: Path) -> Path:
        """Save fig for final (in plot_dir); a second figure for the same file is dropped."""
        if final in self.figures:
            plots.plt.close(fig)
            return final
        fd, tmp = tempfile.mkstemp(prefix=f".{final.stem}.", suffix=".tmp.png", dir=self.plot_dir)
        os.close(fd)
        default_mode(tmp)
        self.figures[final] = Path(tmp)
        plots.save(fig, Path(tmp))
        return final

    def text(self, final: Path, text: str) -> None:
        self.texts.append((final, temp_text(final, text)))

    def commit(self) -> None:
        for final, tmp in [*self.figures.items(), *self.texts]:
            os.replace(tmp, final)

    def discard(self) -> None:
        """Remove every temporary file still there (all of them unless committed)."""
        for tmp in [*self.figures.values(), *(t for _, t in self.texts)]:
            with contextlib.suppress(OSError):
                tmp.unlink()
