"""The data contract is kept in one place and every writer follows it."""

from __future__ import annotations

import re

import pytest

from analysis.contract import CONTRACT_VERSION, TABLES, schema_doc
from analysis.contract.legacy import LEGACY_TABLES
from analysis.load import Run
from tests.conftest import FIXTURES, ROOT


def test_data_contract_doc_is_generated_from_schemas() -> None:
    doc = (ROOT / "docs" / "data-contract.md").read_text()
    assert doc == schema_doc() + "\n", "run: make schema-doc"


def test_capture_records_the_same_contract_version() -> None:
    m = re.search(r"^CONTRACT_VERSION=(\d+)", (ROOT / "collector" / "capture").read_text(), re.M)
    assert m and int(m.group(1)) == CONTRACT_VERSION


@pytest.mark.parametrize("probe", sorted(p.name for p in (ROOT / "probes").glob("*.bt")))
def test_probe_header_lines_match_schemas(probe: str) -> None:
    text = (ROOT / "probes" / probe).read_text()
    headers = dict(re.findall(r'printf\("#([a-z_]+),([a-z0-9_,]+)\\n"\)', text))
    # A tier file (probes/<family>.<tier>.bt) writes exactly what its family's probes/<family>.bt writes.
    family = probe.split(".")[0] + ".bt"
    written_by_probe = {t.name for t in TABLES.values() if t.writer == f"probes/{family}"}
    assert set(headers) == written_by_probe
    for name, cols in headers.items():
        assert cols.split(",") == TABLES[name].column_names, name


def test_sampler_headers_match_schemas() -> None:
    text = (ROOT / "collector" / "sample-netns").read_text()
    for name in ("counters", "listeners", "sockstat"):
        # The header is written literally, or from a variable set once (echo "$COUNTERS_HEADER" >"$counters").
        m = re.search(rf'echo "(?:([a-z_,]+)|\$([A-Z_]+))" >"\${name}"', text)
        assert m, name
        header = m.group(1) or re.search(rf'^{m.group(2)}="([a-z_,]+)"$', text, re.M).group(1)  # type: ignore[union-attr]
        assert header.split(",") == TABLES[name].column_names


def test_sysctl_and_connload_headers_match_schemas() -> None:
    capture = (ROOT / "collector" / "capture").read_text()
    assert 'echo "phase,netns,key,value"' in capture
    assert TABLES["sysctls"].column_names == ["phase", "netns", "key", "value"]
    connload = (ROOT / "labs" / "go" / "cmd" / "connload" / "main.go").read_text()
    assert ",".join(TABLES["connects"].column_names) in connload


# What each lab's capture must have filled, beyond the samplers.
LAB_TABLES = {
    "accept-overflow": ("aq_listener", "aq_accept", "aq_listen", "connects"),
    "retransmit": ("rt_endpoint",),
    # tw_connect holds failed connects only (contract 3): rows in the exhaust variant alone.
    "time-wait": ("tw_close", "tw_sockets", "connects"),
    "epoll": ("ep_loop",),
    "runtimes": ("aq_listen", "processes", "threads"),
    "socket-buffers": ("sb_flow", "sock_buffers"),
    # every family's objects at once, one faulty (here a lossy flow)
    "busy-host": (
        "aq_listener",
        "aq_accept",
        "rt_endpoint",
        "rt_flow",
        "tw_sockets",
        "ep_loop",
        "sb_flow",
        "sock_buffers",
        "threads",
        "processes",
    ),
    "none": ("aq_listener", "aq_accept", "tw_close", "tw_sockets", "ep_loop"),
}


# A host capture beside two labs' namespaces (tests/fixtures/README.md): the probes' rows of those.
NONLAB_TABLES = {"host-labs-not-sampled": ("aq_listener", "ep_loop")}
# A lab capture whose samplers never listed the lab's flow (tests/fixtures/README.md): its probe's rows.
NONLAB_TABLES["socket-buffers-slow-reader-unlisted-trixie"] = ("sb_flow",)


# Run directories only; the derived fixtures (sweeps, comparisons) are checked in test_sweep and test_compare.
@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if (p / "metadata.json").is_file()))
def test_real_captures_validate(name: str) -> None:
    run = Run.open(FIXTURES / name)
    counts = run.validate_all()
    # A capture without a lab (tests/fixtures/make-host-captures): servers and load on the host.
    lab = (run.lab or {}).get("lab", "none")
    for table in ("counters", "listeners", "sockstat", "sysctls", *NONLAB_TABLES.get(name, LAB_TABLES[lab])):
        family = TABLES[table].probe_family
        if family is not None and family not in run.metadata["probes"]:
            continue  # a capture without that probe (host-overflow-noaq)
        if table == "rt_endpoint" and run.lab["variant"] == "loss0":
            assert counts[table] == 0
            continue
        assert counts[table] > 0, table
    if lab == "time-wait":
        assert (counts["tw_connect"] > 0) == (run.lab["variant"] == "exhaust")


def test_each_table_builds_its_own_schema_once() -> None:
    """A table's schema is built once and kept on it; an older contract's table of the same
    name and file keeps its own (a cache keyed by name and file gave one of them the other's)."""
    old = LEGACY_TABLES[4]["listeners"].table
    now = TABLES["listeners"]
    assert now.schema() is now.schema()
    assert list(old.schema().columns) == old.column_names != now.column_names == list(now.schema().columns)
