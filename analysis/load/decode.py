"""A file's bytes, and its text by the contract's policy: invalid UTF-8 becomes the text \\xNN."""

from __future__ import annotations

import codecs
import stat
from pathlib import Path

from .errors import RunDataError


def _json_backslash(e: UnicodeDecodeError) -> tuple[str, int]:
    # Inside a JSON string "\\xNN" is the four characters \xNN: the CSV policy, kept valid JSON.
    bad = e.object[e.start : e.end]
    return "".join(f"\\\\x{b:02x}" for b in bad), e.end


# The error handler JSON files are decoded with (analysis/load/json_files.py).
JSON_ERRORS = "tq_json_backslash"
codecs.register_error(JSON_ERRORS, _json_backslash)


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, or a RunDataError saying why not."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            target = path.readlink()
            raise RunDataError(f"{path}: missing (a symbolic link to {target}, which does not exist)") from None
        raise RunDataError(f"{path}: missing") from None
    except OSError as e:
        raise RunDataError(f"{path}: cannot read: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise RunDataError(f"{path}: is a directory, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise RunDataError(f"{path}: not a regular file")
    try:
        return path.read_bytes()
    except OSError as e:
        raise RunDataError(f"{path}: cannot read: {e.strerror}") from None


def decode(data: bytes) -> tuple[str, int | None]:
    """Text by the contract's policy, and the line of the first invalid UTF-8 byte (None if all valid)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return data.decode("utf-8", errors="backslashreplace"), data.count(b"\n", 0, e.start) + 1
