"""dev/bench_overhead.py record's parsers: the machine's CPU from /proc/stat (busy, idle, steal,
context switches) around a measurement."""

from __future__ import annotations

from types import ModuleType

from tests.conftest import script_module


def _bench() -> ModuleType:
    return script_module("dev/bench_overhead.py")


def test_machine_cpu_splits_busy_idle_and_steal(tmp_path) -> None:
    # /proc/stat's cpu line here, before and after a shell loop spun one of the 2 CPUs for 3 s
    # (2026-11-27): 300 ticks user, 2 system, 298 idle.
    stat = tmp_path / "wrk.out.cpu"
    stat.write_text(
        "cpu  4797869 0 1429670 5756380 29072 0 266059 112035 0 0\n"
        "cpu  4798169 0 1429672 5756678 29072 0 266059 112035 0 0\n"
    )
    hz = _bench().os.sysconf("SC_CLK_TCK")
    cpu = _bench().machine_cpu(str(stat))
    assert cpu == {"cpu_busy_s": 302 / hz, "cpu_idle_s": 298 / hz, "cpu_steal_s": 0.0}
    stat.write_text("cpu  4797869 0 1429670 5756380 29072 0 266059 112035 0 0\n")  # wrk died before the second
    assert _bench().machine_cpu(str(stat)) == {}


def test_machine_cpu_counts_context_switches_when_recorded(tmp_path) -> None:
    stat = tmp_path / "wrk.out.cpu"
    stat.write_text("cpu  100 0 50 1000 0 0 10 0 0 0\nctxt 5000\ncpu  400 0 150 1000 0 0 60 0 0 0\nctxt 12500\n")
    cpu = _bench().machine_cpu(str(stat))
    assert cpu["ctxt"] == 7500 and cpu["cpu_idle_s"] == 0.0
