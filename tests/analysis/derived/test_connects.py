"""analysis/derived/connects.py on real captures, against the lab clients' own connects.csv."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.derived import connects
from tests.analysis.derived.conftest import raw, run

# Lab runs with a client log, and what each one's client hit.
LAB_RUNS = ["accept-overflow-sizing", "time-wait-exhaust", "retransmit-synloss", "accept-overflow-stall"]
SYN_RETRY_US = 900_000  # a connect() this long waited at least one SYN retry (1 s, less slack)


def csv(name: str) -> pd.DataFrame:
    return raw(name, "connects", dtype={"errno": str, "result": str})


def test_no_client_log_outside_a_lab() -> None:
    r = run("host-healthy")
    assert not (r.path / "connects.csv").exists()
    assert connects.table(r) is None
    assert connects.summary(r) == {}
    for f in (connects.failed, connects.eaddrnotavail, connects.ok_per_s, connects.connected_us):
        assert f(r) is None
    assert connects.first_byte_ms(r, 0.5) is None


@pytest.mark.parametrize("name", LAB_RUNS)
def test_table_is_the_client_log(name: str) -> None:
    t = connects.table(run(name))
    assert t is not None
    c = csv(name)
    assert len(t) == len(c)
    assert t["connect_us"].astype("int64").tolist() == c["connect_us"].tolist()


@pytest.mark.parametrize("name", LAB_RUNS)
def test_errors_failed_and_eaddrnotavail(name: str) -> None:
    c = csv(name)
    bad = c[c["result"] != "ok"]
    want = bad["result"].value_counts().to_dict()
    t = connects.table(run(name))
    assert t is not None
    assert connects.errors_by_result(t) == want
    assert connects.failed(run(name)) == float(len(bad))
    assert connects.eaddrnotavail(run(name)) == float((c["errno"] == "EADDRNOTAVAIL").sum())


def test_time_wait_exhaustion_fails_with_eaddrnotavail() -> None:
    c = csv("time-wait-exhaust")
    n = int((c["errno"] == "EADDRNOTAVAIL").sum())
    assert n == 400
    s = connects.summary(run("time-wait-exhaust"))
    assert s["attempts_eaddrnotavail"] == n
    assert s["errors"] == {"connect_error": n}


@pytest.mark.parametrize("name", LAB_RUNS)
def test_summary(name: str) -> None:
    c = csv(name)
    s = connects.summary(run(name))
    assert s["attempts"] == len(c)
    assert s["ok"] == int((c["result"] == "ok").sum())
    assert s["connects_waited_syn_retry"] == int((c["connect_us"] >= SYN_RETRY_US).sum())
    assert s["connect_latency"]["max_ms"] == pytest.approx(c["connect_us"].max() / 1000, abs=0.006)
    assert s["connect_latency"]["p50_ms"] == pytest.approx(c["connect_us"].quantile(0.5) / 1000, abs=0.006)
    assert s["connect_p99_ms"] == pytest.approx(c["connect_us"].quantile(0.99) / 1000, abs=0.06)
    fb = c["first_byte_us"].dropna()
    assert s["first_byte_latency"]["max_ms"] == pytest.approx(fb.max() / 1000, abs=0.006)


def test_overflow_makes_clients_wait_for_syn_retries() -> None:
    """The sizing lab's full queue dropped SYNs: most connects took a retry (>= 1 s)."""
    c = csv("accept-overflow-sizing")
    waited = connects.waited_syn_retry(connects.table(run("accept-overflow-sizing")))  # type: ignore[arg-type]
    assert int(waited.sum()) == int((c["connect_us"] >= SYN_RETRY_US).sum())
    assert waited.mean() > 0.5


def test_quantiles_ms() -> None:
    assert connects.quantiles_ms(pd.Series([], dtype="int64")) == {}
    v = pd.Series([1000, 2000, 3000, 4000, 101000])
    q = connects.quantiles_ms(v)
    assert q["p50_ms"] == 3.0 and q["max_ms"] == 101.0
    assert connects.quantile_ms(None, 0.5) is None
    assert connects.quantile_ms(pd.Series([], dtype=float), 0.5) is None
    assert connects.quantile_ms(v.astype(float), 0.5) == 3.0


@pytest.mark.parametrize("name", LAB_RUNS)
def test_connected_us_and_first_byte(name: str) -> None:
    c = csv(name)
    done = c[~c["result"].str.startswith("connect_")]["connect_us"]
    got = connects.connected_us(run(name))
    assert got is not None
    assert got.tolist() == done.astype(float).tolist()
    fb = c[c["result"] == "ok"]["first_byte_us"].dropna()
    want = None if fb.empty else fb.quantile(0.9) / 1000
    assert connects.first_byte_ms(run(name), 0.9) == pytest.approx(want)


@pytest.mark.parametrize("name", LAB_RUNS)
def test_ok_per_s(name: str) -> None:
    c = csv(name)
    span = (c["start_unix_ns"].max() - c["start_unix_ns"].min()) / 1e9
    assert connects.ok_per_s(run(name)) == pytest.approx((c["result"] == "ok").sum() / span)


def test_queue_waits_ms() -> None:
    name = "accept-overflow-sizing"
    c = csv(name)
    ok = c[c["result"] == "ok"]
    waits = ((ok["first_byte_us"] - ok["connect_us"]) / 1000).dropna()
    want = waits[waits < SYN_RETRY_US / 1000]
    got = connects.queue_waits_ms(connects.table(run(name)))  # type: ignore[arg-type]
    assert got.tolist() == pytest.approx(want.tolist())
    assert (got < 900).all() and len(got) < len(ok)
