"""analysis/derived/counters.py on real captures, against counters.csv itself: a delta is the
difference of two consecutive values of one counter in one namespace, so a total over the capture
is the last value minus the first."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.derived import counters
from tests.analysis.derived.conftest import lab_netns, raw, run

SIZING = "accept-overflow-sizing"
CASES = [
    (SIZING, "srv", "ListenOverflows"),
    (SIZING, "srv", "PassiveOpens"),
    (SIZING, "cli", "TCPSynRetrans"),
    ("retransmit-loss1", "cli", "RetransSegs"),
    ("time-wait-exhaust", "cli", "ActiveOpens"),
]


def values(name: str, netns: int, counter: str) -> pd.Series:
    """One counter's values by sample time, from counters.csv."""
    c = raw(name, "counters")
    return c[(c["netns"] == netns) & (c["counter"] == counter)].set_index("time_s")["value"].sort_index()


@pytest.mark.parametrize(("name", "side", "counter"), CASES)
def test_total_delta_is_last_minus_first(name: str, side: str, counter: str) -> None:
    ns = lab_netns(name, side)
    v = values(name, ns, counter)
    assert counters.total_delta(run(name), ns, counter) == int(v.iloc[-1] - v.iloc[0])
    assert counters.capture_total(run(name), counter, ns) == float(v.iloc[-1] - v.iloc[0])


def test_the_overflows_are_in_the_server_namespace() -> None:
    srv, cli = lab_netns(SIZING, "srv"), lab_netns(SIZING, "cli")
    s, c = values(SIZING, srv, "ListenOverflows"), values(SIZING, cli, "ListenOverflows")
    assert counters.total_delta(run(SIZING), srv, "ListenOverflows") == s.iloc[-1] - s.iloc[0] > 0
    assert counters.total_delta(run(SIZING), cli, "ListenOverflows") == c.iloc[-1] - c.iloc[0] == 0
    # Over every sampled namespace: the sum of both.
    assert counters.capture_total(run(SIZING), "ListenOverflows") == float(s.iloc[-1] - s.iloc[0])


@pytest.mark.parametrize(("name", "side", "counter"), CASES)
def test_total_delta_in_a_window(name: str, side: str, counter: str) -> None:
    ns = lab_netns(name, side)
    v = values(name, ns, counter)
    times = v.index.to_numpy()
    t0, t1 = float(times[2]), float(times[-3])
    # Samples stamped in [t0, t1]: each counts the change since the sample before it.
    assert counters.total_delta(run(name), ns, counter, t0, t1) == int(v.loc[t1] - v.iloc[1])
    assert counters.total_delta(run(name), ns, counter, t0=t0) == int(v.iloc[-1] - v.iloc[1])
    assert counters.total_delta(run(name), ns, counter, t1=t1) == int(v.loc[t1] - v.iloc[0])


def test_sampled_and_recorded() -> None:
    r = run(SIZING)
    c = raw(SIZING, "counters")
    for ns in {int(n["inode"]) for n in r.metadata["netns"]}:
        assert (c["netns"] == ns).any()
        assert counters.sampled(r, ns)
        assert counters.recorded(r, ns, "ListenOverflows")
    assert not counters.sampled(r, 1)
    assert not counters.recorded(r, lab_netns(SIZING, "srv"), "NoSuchCounter")
    # A host capture: no lab namespaces, only the host's.
    assert counters.sampled(run("host-healthy"), 4026531833)
    assert not counters.sampled(run("host-healthy"), lab_netns(SIZING, "srv"))


def test_per_sample() -> None:
    ns = lab_netns(SIZING, "srv")
    names = ["ListenOverflows", "PassiveOpens", "NoSuchCounter"]
    wide = counters.per_sample(run(SIZING), ns, names)
    assert list(wide.columns) == names
    c = raw(SIZING, "counters")
    assert wide.index.tolist() == pytest.approx(sorted(c.loc[c["netns"] == ns, "time_s"].unique()))
    for name in names[:2]:
        v = values(SIZING, ns, name)
        assert wide[name].tolist() == [0, *v.diff().iloc[1:].astype(int).tolist()]
    assert (wide["NoSuchCounter"] == 0).all()


def test_window_deltas() -> None:
    ns = lab_netns(SIZING, "srv")
    r = run(SIZING)
    v = values(SIZING, ns, "ListenOverflows")
    times = v.index.to_numpy()
    t0, t1 = float(times[1]) - 0.1, float(times[-2])
    got = counters.window_deltas(r, ns, t0, t1)
    assert got is not None
    deltas, seconds = got
    # Samples inside (t0, t1 + 0.5]: times[1] .. times[-2]; the first of them closes an interval
    # that began before t0, so the sum runs from times[1] on.
    assert deltas["ListenOverflows"] == float(v.loc[times[-2]] - v.loc[times[1]])
    assert seconds == pytest.approx(times[-2] - times[1])
    p = values(SIZING, ns, "PassiveOpens")
    assert deltas["PassiveOpens"] == float(p.loc[times[-2]] - p.loc[times[1]])
    # Fewer than two samples inside: None.
    assert counters.window_deltas(r, ns, float(times[-1]), float(times[-1]) + 0.4) is None
