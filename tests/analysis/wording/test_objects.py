"""analysis/wording/objects.py: objects named as their applications write them, IPv6 too."""

from __future__ import annotations

from analysis.wording.objects import where


def test_ipv6_addresses_are_bracketed_before_their_ports() -> None:
    flow = {"service_port": 5202, "laddr": "2001:2::2", "lport": 5312, "raddr": "2001:2::1", "rport": 5202,
            "we_are": "client"}  # fmt: skip
    assert where(flow) == "the flow [2001:2::2]:5312 -> [2001:2::1]:5202 (we are the client)"
    assert where({"service_port": 8083, "raddr": "2001:2::1"}) == "connections to [2001:2::1]:8083"
    assert where({"laddr": "2001:2::1", "lport": 8081}) == "[2001:2::1]:8081"


def test_ipv4_objects_keep_their_plain_spelling() -> None:
    flow = {"service_port": 5202, "laddr": "198.18.0.2", "lport": 5312, "raddr": "198.18.0.1", "rport": 5202}
    assert where(flow) == "the flow 198.18.0.2:5312 -> 198.18.0.1:5202"
    assert where({"service_port": 8083, "raddr": "198.18.0.1"}) == "connections to 198.18.0.1:8083"
    assert where({"service_port": None, "raddr": "198.18.0.1"}) == "connections to 198.18.0.1 (an unknown port)"
    assert where({"laddr": "198.18.0.1", "lport": 8081, "dual_stack": True}) == (
        "198.18.0.1:8081 (dual-stack: IPv4 clients too)"
    )
