"""monitor/exporter/sample.py: a namespace's socket table is read only when it holds enough
sockets for one destination to matter (sockstat first: one line instead of every socket)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from monitor.exporter import sample
from monitor.exporter.objects import Family


class _Ns:
    def __init__(self, rng: tuple[int, int]) -> None:
        self.pid = {1: os.getpid()}
        self.rng = rng

    def ports(self, ino: int) -> tuple[int, int]:
        return self.rng


@pytest.mark.parametrize(("sockets", "rng", "read"), [(40, (32768, 60999), False), (150, (32768, 60999), True),
                                                       (40, (40000, 40059), True)])  # fmt: skip
def test_the_table_is_read_only_when_a_destination_could_matter(
    monkeypatch: pytest.MonkeyPatch, sockets: int, rng: tuple[int, int], read: bool
) -> None:
    reads: list[int] = []
    monkeypatch.setattr(sample, "tcp_sockets", lambda pid: sockets)
    monkeypatch.setattr(sample, "socket_table", lambda pid, r: reads.append(pid) or {})
    sample.scan_sockets(Family("destination", 20, 600), _Ns(rng), [1], 100, 0.0)  # type: ignore[arg-type]
    assert bool(reads) is read


def test_sockstat_of_this_namespace_is_read(tmp_path: Path) -> None:
    n = sample.tcp_sockets(os.getpid())
    assert n is not None and n >= 0
    assert sample.tcp_sockets(2**31 - 1) is None  # no such process
