"""One address identity: IPv4-mapped IPv6 and dual-stack wildcard listeners join with their IPv4 form."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.derived.addresses import dual_stack, is_loopback, listeners_serving, plain


@pytest.mark.parametrize(
    ("addr", "want"),
    [("::ffff:127.0.0.1", "127.0.0.1"), ("::ffff:198.18.0.1", "198.18.0.1"), ("127.0.0.1", "127.0.0.1"),
     ("::1", "::1"), ("2001:db8::1", "2001:db8::1"), ("not-an-address", "not-an-address")],
)  # fmt: skip
def test_plain(addr: str, want: str) -> None:
    assert plain(addr) == want


def test_loopback_and_dual_stack() -> None:
    assert is_loopback("::ffff:127.0.0.1") and is_loopback("::1") and is_loopback("127.0.0.53")
    assert not is_loopback("198.18.0.1") and not is_loopback("x")
    assert dual_stack("::") and not dual_stack("0.0.0.0")


LISTENERS = pd.DataFrame(
    {"netns": [1, 1, 1, 2], "laddr": ["::", "0.0.0.0", "::ffff:198.18.0.1", "::"], "lport": [7401, 8080, 9000, 7401]}
)


def test_a_dual_stack_listener_serves_its_namespaces_ipv4_loopback_clients() -> None:
    """Java's ServerSocket(7401) binds "::"; clients on 127.0.0.1 in the same namespace reach it;
    the same port's listener in another namespace does not serve them."""
    assert listeners_serving(LISTENERS, 1, "127.0.0.1", 7401).tolist() == [True, False, False, False]
    assert listeners_serving(LISTENERS, 2, "::1", 7401).tolist() == [False, False, False, True]
    assert listeners_serving(LISTENERS, 1, "127.0.0.1", 8080).tolist() == [False, True, False, False]


def test_mapped_and_plain_forms_join() -> None:
    assert listeners_serving(LISTENERS, 5, "198.18.0.1", 9000).tolist() == [False, False, True, False]
    # A wildcard listener is not assumed to own a non-loopback address of another namespace.
    assert not listeners_serving(LISTENERS, 5, "198.18.0.1", 8080).any()
    assert not listeners_serving(LISTENERS.iloc[0:0], 1, "127.0.0.1", 7401).any()
