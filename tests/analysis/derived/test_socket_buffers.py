"""analysis/derived/socket_buffers.py's sides() on real captures: every socket's figures are its own
rows' (sock_buffers.csv read with pandas, one flow at a time), however many flows the table holds."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from analysis.derived import socket_buffers as sbd
from tests.analysis.derived.conftest import raw, run
from tests.conftest import FIXTURES

# The runs whose samplers listed flows (socket-buffers-slow-reader-unlisted-trixie's listed none).
RUNS = sorted(p.name for p in FIXTURES.iterdir() if (p / "sock_buffers.csv").exists() and "unlisted" not in p.name)


def _last(v: pd.Series) -> int | None:
    v = v.dropna()
    return int(v.iloc[-1]) if len(v) else None


@pytest.mark.parametrize("name", RUNS)
def test_each_socket_is_made_from_its_own_rows(name: str) -> None:
    rows = raw(name, "sock_buffers")
    got = sbd.sides(run(name), probe=False)
    assert len(got) == len(rows.groupby(sbd.KEY)) > 0
    first_listing = rows.groupby("netns")["time_s"].min()  # each namespace's own first listing
    for key, flow in rows.groupby(sbd.KEY):
        flow = flow.sort_values("time_s")
        s = got[(int(key[0]), str(key[1]), int(key[2]), str(key[3]), int(key[4]))]
        assert (s.rows, s.t1) == (len(flow), float(flow["time_s"].iloc[-1]))
        assert (s.recv_q_max, s.send_q_max) == (flow["recv_q"].max(), flow["send_q"].max())
        assert (s.rcvbuf, s.sndbuf) == (_last(flow["rcvbuf"]), _last(flow["sndbuf"]))
        assert s.minrtt_ms == (flow["minrtt_ms"].min() if flow["minrtt_ms"].notna().any() else None)
        if flow["time_s"].iloc[0] > first_listing[key[0]] + 0.5:
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


def test_a_listing_the_sampler_left_out_is_no_reading_of_a_queue() -> None:
    """The slow-reader capture as a sampler over its CPU budget would have written it: every other
    listing after the first left out (its rows gone, sockstat.csv flows_listed 0). The reader's
    queue, listed at every listing it was in, keeps its mean: the left-out samples are not read as
    an empty queue. Counted over every sample instead, the mean would fall by a third or more."""
    r = run("socket-buffers-slow-reader")
    full = sbd.sides(r, probe=False)
    reader = max(full.values(), key=lambda s: s.recv_q_mean)
    st, sb = r.table("sockstat").copy(), r.table("sock_buffers")
    mine = (st["netns"] == reader.netns).to_numpy(dtype=bool)
    samples = st.loc[mine, "time_s"].sort_values().to_numpy(dtype=float)
    left_out = set(samples[1::2])
    st.loc[mine & st["time_s"].isin(left_out).to_numpy(dtype=bool), "flows_listed"] = 0
    # A listing's rows are stamped when ss ran, after its sample's time and before the next one's.
    sample_of = samples[samples.searchsorted(sb["time_s"].to_numpy(dtype=float), "right") - 1]
    kept = ~((sb["netns"] == reader.netns).to_numpy(dtype=bool) & pd.Series(sample_of).isin(left_out).to_numpy())
    assert 0 < kept.sum() < len(sb)

    class Rationed:
        def __getattr__(self, attr: str):
            return getattr(r, attr)

        def table(self, table: str) -> pd.DataFrame:
            if table == "sockstat":
                return st if self.marked else r.table("sockstat")
            return sb[kept] if table == "sock_buffers" else r.table(table)

    rationed = Rationed()
    rationed.marked = True  # type: ignore[attr-defined]
    got = sbd.sides(rationed, probe=False)[reader.key]  # type: ignore[arg-type]
    assert got.rows < reader.rows
    assert got.recv_q_mean == pytest.approx(reader.recv_q_mean, rel=0.1)
    rationed.marked = False  # type: ignore[attr-defined]
    unmarked = sbd.sides(rationed, probe=False)[reader.key]  # type: ignore[arg-type]
    assert unmarked.recv_q_mean < 0.67 * reader.recv_q_mean, (unmarked.recv_q_mean, got.recv_q_mean, reader.recv_q_mean)


def _lab_flow_ends(name: str = "socket-buffers-slow-reader") -> tuple[dict, sbd.Side, sbd.Side]:
    """The lab flow's two sockets as sides() makes them: the sender's and the reader's."""
    r = run(name)
    port = r.lab["flow"]["lport"]
    sides = sbd.sides(r, probe=False)
    (sender,) = [s for s in sides.values() if s.lport == port]
    (reader,) = [s for s in sides.values() if s.rport == port]
    return sides, sender, reader


def test_a_flows_other_end_is_its_peer_across_namespaces() -> None:
    sides, sender, reader = _lab_flow_ends()
    assert sender.netns != reader.netns  # the lab's two namespaces, joined by a veth pair
    assert sbd.pair(sides, sender) == reader and sbd.pair(sides, reader) == sender


def test_a_second_candidate_in_another_namespace_is_no_peer() -> None:
    """Containers reuse addresses and ports: a socket of the same addresses in a third namespace makes
    the reader a guess, and a guess is not a pair."""
    sides, sender, reader = _lab_flow_ends()
    twin = replace(reader, netns=4026539999)
    assert sbd.pair({**sides, twin.key: twin}, sender) is None


def test_a_loopback_flows_other_end_is_in_its_own_namespace() -> None:
    """Over lo both ends share a namespace: the same reversed addresses elsewhere are another flow."""
    _, sender, reader = _lab_flow_ends()
    lo_sender = replace(sender, laddr="127.0.0.1", raddr="127.0.0.1")
    lo_reader = replace(reader, laddr="127.0.0.1", raddr="127.0.0.1")
    elsewhere = {s.key: s for s in (lo_sender, lo_reader)}
    assert sbd.pair(elsewhere, lo_sender) is None
    home = replace(lo_reader, netns=lo_sender.netns)
    assert sbd.pair({**elsewhere, home.key: home}, lo_sender) == home
