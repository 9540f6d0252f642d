"""Giving freed memory back to the system: after a large table is let go, pyarrow's pool and
glibc's malloc keep much of it (a day's run: 790 MB of RSS held with every table loaded, 649 MB
once given back). pyarrow allocates from its jemalloc pool where the build has one, which returns
freed pages at once (decay 0): its default, mimalloc, kept up to 100 MB of freed blocks while a
day's tw_sockets.csv was read (the report of a day peaked 40 MB lower with jemalloc)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from functools import cache

import pyarrow as pa


def _pool_that_gives_back() -> None:
    with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc: its default
        pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(0)


_pool_that_gives_back()


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
