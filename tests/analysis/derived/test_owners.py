"""analysis/derived/owners.py: a process's owner from its cgroup and the host's names; a
namespace's owner only when one container or pod owns it; findings get theirs."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.contract import TABLES
from analysis.derived.owners import name_owners, owner_of
from analysis.findings import Finding

A, B = "a1" * 32, "b2" * 32
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"


class _Run:
    """Only the two tables the owners read, typed as the contract says."""

    def __init__(self, processes: list[dict[str, Any]], containers: list[dict[str, Any]]) -> None:
        self._t = {
            "processes": self._frame("processes", processes),
            "containers": self._frame("containers", containers),
        }

    @staticmethod
    def _frame(name: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
        t = TABLES[name]
        return t.schema().coerce_dtype(pd.DataFrame(rows, columns=t.column_names))

    def table(self, name: str) -> pd.DataFrame:
        return self._t[name]


def _proc(netns: int, pid: int, cgroup: str | None) -> dict[str, Any]:
    return {"time_s": 1.0, "netns": netns, "pid": pid, "comm": "srv", "exe": "/srv", "cgroup": cgroup}


RUN = _Run(
    [
        _proc(1, 10, f"5:pids:/libpod_parent/libpod-{A};0::/"),
        _proc(1, 11, f"5:pids:/libpod_parent/libpod-{A};0::/"),
        _proc(2, 20, f"0::/libpod_parent/libpod-{A}"),
        _proc(2, 21, f"0::/libpod_parent/libpod-{B}"),
        _proc(3, 30, "0::/system.slice/nginx.service"),
        _proc(4, 40, None),
        _proc(5, 50, f"0::/kubepods/burstable/pod{UID}/{B}"),
    ],
    [
        {"source": "podman ps", "container_id": A, "name": "api"},
        {
            "source": "/var/log/containers",
            "container_id": B,
            "name": "web",
            "pod_namespace": "shop",
            "pod_name": "checkout-7d9f",
        },
        {"source": "/var/log/pods", "pod_namespace": "shop", "pod_name": "checkout-7d9f", "pod_uid": UID},
    ],
)


def test_a_process_is_named_by_its_container_and_the_hosts_name_for_it() -> None:
    o = owner_of(RUN, 1, 10)
    assert o is not None and (o.runtime, o.container_id, o.container_name) == ("podman", A, "api")


def test_a_pod_gets_its_namespace_and_name_from_the_kubelets_records() -> None:
    o = owner_of(RUN, 5, 50)
    assert o is not None and (o.pod_namespace, o.pod_name, o.container_name, o.qos) == (
        "shop",
        "checkout-7d9f",
        "web",
        "Burstable",
    )


def test_a_namespace_is_owned_only_by_its_one_container() -> None:
    assert owner_of(RUN, 1, None).container_name == "api"  # type: ignore[union-attr]
    assert owner_of(RUN, 2, None) is None  # two containers share it: no guess
    assert owner_of(RUN, 3, None) is None  # a unit on the host's namespace does not own it
    assert owner_of(RUN, 3, 30).unit == "nginx.service"  # type: ignore[union-attr]


def test_the_hosts_namespace_is_never_a_containers() -> None:
    """A host-network container holding a listener on the host: its listener is the container's,
    the host's other endpoints are not."""
    from analysis.kernel import INIT_NET_INODE

    run = _Run([_proc(INIT_NET_INODE, 70, f"0::/libpod_parent/libpod-{A}")], [])
    assert owner_of(run, INIT_NET_INODE, 70).container_id == A  # type: ignore[union-attr]
    assert owner_of(run, INIT_NET_INODE, None) is None


def test_nothing_known_is_none() -> None:
    assert owner_of(RUN, 4, 40) is None  # no cgroup recorded (a run of contract 6)
    assert owner_of(RUN, 9, 99) is None  # a process the run never saw


def test_every_finding_gets_its_owner_or_none() -> None:
    found = [
        Finding("accept_queue_overflow", "confirmed", {"netns": 1, "pid": 11, "lport": 80}),
        Finding("tcp_retransmit_storm", "suspected", {"netns": 1, "raddr": "198.18.0.1"}),
        Finding("time_wait_exhaustion", "confirmed", {"netns": 2, "raddr": "198.18.0.2"}),
    ]
    a, b, c = name_owners(RUN, found)
    assert a.subject["owner"]["container_name"] == "api"
    assert b.subject["owner"]["container_name"] == "api"  # the flow's namespace is the container's
    assert c.subject["owner"] is None
