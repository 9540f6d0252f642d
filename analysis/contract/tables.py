"""The CSV tables of a run directory: every file a probe or sampler writes, in one place.

Each table names its file, the writer that produces it, a version, and for each
column its type, checks and meaning. Loaders validate against these tables;
tests check that real probe output matches them; docs/data-contract.md is
generated from them (``python -m analysis schema-doc``).

Bump a table's ``version`` (and CONTRACT_VERSION) whenever a column changes
meaning, type or order; writers print the contract version they follow.
"""

from __future__ import annotations

from .columns import Table
from .probe_tables import PROBE_TABLES
from .sampled_tables import SAMPLED_TABLES

# Version of the whole contract, recorded by collector/capture in metadata.json.
CONTRACT_VERSION = 13


# How every CSV is read (analysis/load), stated once for the doc.
CSV_RULES = (
    "Files are bytes: the loader reads them as UTF-8 and decodes a byte that is not valid UTF-8 as the "
    "four characters `\\xNN` (Python's `backslashreplace`), so nothing is lost and nothing fails to decode.",
    'Fields are RFC 4180: a field holding `,` `"` CR or LF is written in double quotes with inner quotes '
    "doubled; a quoted field may span lines. Every row, the last included, ends with a line feed.",
    "Blank lines are skipped (and noted in the report). Errors name the physical line of the file "
    "(counting the lines inside quoted fields) and the 1-based column: `file:line: column N (name): what`.",
    "int columns hold optionally signed decimal digits within int64 (a larger value is an error, never "
    "wrapped); float columns hold finite decimal numbers (`nan`, `inf` and overflow are errors); empty "
    "means missing and is allowed only where the type says `or empty`.",
    "Epoch columns must lie in 2000-2100, and inside the capture "
    "(metadata.json started_epoch - slack .. ended_epoch + slack, slack = max(5 s, 2 intervals)).",
    "A table with a key (listed under it) may not hold two rows with the same key.",
    "A probe family's files together hold exactly the rows metadata.json `probes.<family>.rows` says "
    "collector/probe-to-csv wrote; counters.csv, sockstat.csv and sysctls.csv hold rows of every sampled "
    "namespace (a complete run).",
)
# Inside the capture window, with this slack (s) at either end, or this many intervals if more.
TIME_SLACK_S = 5.0
TIME_SLACK_INTERVALS = 2
# Tcp counters that are gauges or constants: their delta may be negative (CurrEstab) or their value -1 (MaxConn).
GAUGE_COUNTERS = frozenset({"CurrEstab", "MaxConn", "RtoAlgorithm", "RtoMin", "RtoMax"})

TABLES: dict[str, Table] = {t.name: t for t in (*PROBE_TABLES, *SAMPLED_TABLES)}


# sysctls.csv values the analysis computes with, and the form each must have
# (anything else is an error naming the line, not a crash or a wrong number).
# Other keys are kept as text.
SYSCTL_FORMATS: dict[str, str] = {
    "net.core.somaxconn": "int",
    "net.ipv4.tcp_max_syn_backlog": "int",
    "net.ipv4.tcp_syncookies": "int",
    "net.ipv4.tcp_abort_on_overflow": "int",
    "net.ipv4.tcp_fin_timeout": "int",
    "net.ipv4.tcp_max_tw_buckets": "int",
    "net.ipv4.tcp_tw_reuse": "int",
    "net.ipv4.tcp_timestamps": "int",
    "net.ipv4.tcp_syn_retries": "int",
    "net.ipv4.tcp_synack_retries": "int",
    "net.ipv4.ip_local_port_range": "port_range",
}
SYSCTL_FORMAT_TEXT = {
    "int": "a non-negative decimal integer within int64",
    "port_range": "two ports `low high` separated by one space, 1 <= low <= high <= 65535",
}
