"""analysis/derived/servers.py: the server a process is, from its executable path as
/proc/PID/exe gives it (paths as seen on Debian 12 for its packages)."""

from __future__ import annotations

import pytest

from analysis.derived.servers import server_of_exe
from analysis.wording.servers import server_knob


@pytest.mark.parametrize(
    ("exe", "server"),
    [
        ("/usr/sbin/nginx", "nginx"),
        ("/usr/bin/redis-server", "redis"),
        ("/usr/bin/redis-check-rdb", "redis"),
        ("/usr/bin/memcached", "memcached"),
        ("/usr/sbin/haproxy", "haproxy"),
        ("/usr/sbin/apache2", "apache"),
        ("/usr/lib/postgresql/15/bin/postgres", "postgresql"),
        ("/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "java"),
        ("/usr/bin/node", "node"),
        ("/root/.pyenv/versions/3.11.7/bin/python3.11", "python"),
        ("/usr/bin/python3.11 (deleted)", "python"),  # upgraded while it ran
        ("/work/main/build/bin/aqserver", None),  # a Go program is named after itself
        ("", None),
        (None, None),
    ],
)
def test_server_of_exe(exe: str | None, server: str | None) -> None:
    assert server_of_exe(exe) == server


def test_a_knob_only_where_the_server_has_one() -> None:
    assert server_knob("nginx", "loop_saturated") == server_knob("nginx", "capacity")
    assert "worker_processes" in (server_knob("nginx", "capacity") or "")
    assert "tcp-backlog" in (server_knob("redis", "sizing") or "")
    assert server_knob("java", "stall") is None  # a stalled accept loop: the application's code, no knob
    assert server_knob(None, "sizing") is None and server_knob("aqserver", "sizing") is None
