"""dev/bench_profile.py: perf's samples of a window by task and class, and a case's profiled
windows paired base against with.

data/perf-script-churn.txt is real: on this project's CI machine (2026-12-01), `perf record -a -e
cpu-clock -c 1000000 -- python3 churn.py` (2 s of loopback connect/accept/close in one process)
while a bpftrace program counted sock:inet_sock_set_state, then `perf script -F comm,ip,sym,dso
--no-demangle`; kept: every line but the first 100 of qemu's and the first 300 of python3's that
are no BPF program's."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.conftest import script_module

DATA = Path(__file__).parent / "data" / "perf-script-churn.txt"


def _profile() -> ModuleType:
    return script_module("dev/bench_profile.py")


def test_every_sample_is_put_under_its_task_and_class() -> None:
    prof = _profile()
    lines = DATA.read_text(errors="replace").splitlines()
    got = prof.parse(lines)
    assert got["unparsed"] == 0
    assert got["samples"] == sum(1 for line in lines if line.strip())
    tasks = prof.per_task(got)
    # Counted apart from the parser, by the line's own words.
    bpf = sum(1 for line in lines if " bpf_prog_" in line)
    kernel_python = sum(1 for line in lines if line.split()[0] == "python3" and "[kernel.kallsyms]" in line)
    assert bpf > 0 and tasks["python3", "bpf"] == bpf
    assert tasks["python3", "kernel"] == kernel_python
    # A kernel thread's CPU and queue suffix goes; a comm with a space, or a dso path with
    # "(deleted)" in it, stays one sample.
    assert tasks["kworker", "kernel"] == sum(1 for line in lines if line.split()[0].startswith("kworker/"))
    assert not any(t.startswith("kworker/") for t, _ in tasks)
    assert tasks["memfd:sealed-91", "user"] == sum(1 for line in lines if "(deleted))" in line)


def test_a_line_that_is_no_sample_is_counted_not_guessed() -> None:
    got = _profile().parse(["  nginx  ffffffff81000000 tcp_v4_rcv ([kernel.kallsyms])", "garbage", ""])
    assert (got["samples"], got["unparsed"]) == (1, 1)


def _window(case: str, kind: str, pair: int, requests: int, tasks: list[list[object]]) -> dict[str, object]:
    syms = [[t, k, "f", n] for t, k, n in tasks]
    prof = {
        "samples": 0,
        "unparsed": 0,
        "by_task": tasks,
        "top_symbols": syms,
        "period_ns": 1_000_000,
        "requests": requests,
    }
    return {"case": case, "kind": kind, "pair": pair, "profile": prof}


def test_a_case_profile_is_instructions_a_connection_base_against_with() -> None:
    prof = _profile()
    runs = [
        _window("cheap", "base", 1, 1000, [["nginx", "kernel", 50], ["wrk", "user", 50]]),
        _window("cheap", "with", 1, 900, [["nginx", "kernel", 50], ["nginx", "bpf", 9], ["ss", "user", 27]]),
        _window("cheap", "base", 2, 1000, [["nginx", "kernel", 50], ["wrk", "user", 50]]),
        _window("cheap", "with", 2, 900, [["nginx", "kernel", 50], ["nginx", "bpf", 9], ["bash", "user", 18]]),
        _window("null", "base", 1, 5000, [["nginx", "kernel", 1]]),
    ]
    cp = prof.case_profile(runs, "cheap")
    assert cp["base"]["windows"] == cp["with"]["windows"] == 2
    assert cp["base"]["tasks"]["nginx/kernel"] == 100 * 1_000_000 / 2000
    assert cp["with"]["tasks"]["nginx/bpf"] == 18 * 1_000_000 / 1800
    rows = {name: more for name, _, _, more in prof.diff_rows(cp, "tasks", 10)}
    assert rows["ss/user"] == 27 * 1_000_000 / 1800
    assert rows["wrk/user"] == -100 * 1_000_000 / 2000
    assert prof.case_profile(runs, "samplers") is None  # no profiled window


def test_unnamed_code_in_the_module_area_is_jit_not_kernel_text() -> None:
    prof = _profile()
    got = prof.per_task(
        prof.parse(
            [
                "  nginx  ffffffffc0031a2c [unknown] ([unknown])",
                "  nginx  ffffffff8123abcd [unknown] ([unknown])",
                "  nginx  00007f0012345678 [unknown] (/usr/sbin/nginx)",
            ]
        )
    )
    assert (got["nginx", "jit"], got["nginx", "kernel"], got["nginx", "user"]) == (1, 1, 1)
