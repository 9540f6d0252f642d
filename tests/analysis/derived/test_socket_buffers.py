"""analysis/derived/socket_buffers.py's sides() on real captures: every socket's figures are its own
rows' (sock_buffers.csv read with pandas, one flow at a time), however many flows the table holds."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.derived import socket_buffers as sbd
from tests.analysis.derived.conftest import raw, run
from tests.conftest import FIXTURES

RUNS = sorted(p.name for p in FIXTURES.iterdir() if (p / "sock_buffers.csv").exists())


def _last(v: pd.Series) -> int | None:
    v = v.dropna()
    return int(v.iloc[-1]) if len(v) else None


@pytest.mark.parametrize("name", RUNS)
def test_each_socket_is_made_from_its_own_rows(name: str) -> None:
    rows = raw(name, "sock_buffers")
    got = sbd.sides(run(name), probe=False)
    assert len(got) == len(rows.groupby(sbd.KEY)) > 0
    first_listing = rows["time_s"].min()
    for key, flow in rows.groupby(sbd.KEY):
        flow = flow.sort_values("time_s")
        s = got[(int(key[0]), str(key[1]), int(key[2]), str(key[3]), int(key[4]))]
        assert (s.rows, s.t1) == (len(flow), float(flow["time_s"].iloc[-1]))
        assert (s.recv_q_max, s.send_q_max) == (flow["recv_q"].max(), flow["send_q"].max())
        assert (s.rcvbuf, s.sndbuf) == (_last(flow["rcvbuf"]), _last(flow["sndbuf"]))
        assert s.minrtt_ms == (flow["minrtt_ms"].min() if flow["minrtt_ms"].notna().any() else None)
        if flow["time_s"].iloc[0] > first_listing + 0.5:
            # A flow first listed after its namespace's first sample began then: its clocks are its deltas.
            assert s.deltas["bytes_acked"] == flow["bytes_acked"].iloc[-1]
            assert s.deltas["busy_ms"] == flow["busy_ms"].iloc[-1]


def test_a_table_of_many_flows_in_any_row_order_gives_the_same_sockets() -> None:
    """The busy-host capture's rows shuffled: each flow's rows are found and put in time order."""
    r = run("busy-host-flow-dsack")
    want = sbd.sides(r, probe=False)

    class Shuffled:
        def __getattr__(self, attr: str):  # the run's metadata and helpers
            return getattr(r, attr)

        def table(self, table: str) -> pd.DataFrame:
            t = r.table(table)
            return t.sample(frac=1.0, random_state=7) if table == "sock_buffers" else t

    assert sbd.sides(Shuffled(), probe=False) == want  # type: ignore[arg-type]
