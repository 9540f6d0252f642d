"""Giving freed memory back to the system: after a large table is let go, pyarrow's pool and
glibc's malloc keep much of it (a day's run: 790 MB of RSS held with every table loaded, 649 MB
once given back)."""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

import pyarrow as pa


@cache
def _malloc_trim() -> ctypes._CFuncPtr | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


def give_back_memory() -> None:
    """Return the free pages of pyarrow's pool and of malloc."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
