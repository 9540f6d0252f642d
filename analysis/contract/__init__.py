"""The data contract: every CSV and JSON file a probe, sampler, lab or the analysis writes, in one place.

  columns         how a column and a table are declared; the columns many tables share
  tables          the CSV tables of a run directory, CONTRACT_VERSION, sysctl value formats
  derived_tables  the CSV tables the analysis writes from many runs (compare, sweep)
  legacy          tables of older contract versions and their upgrades to today's
  json_docs       the JSON Schemas of metadata.json, doctor.json, compare.json, verdict.json, sweep.json
  doc             docs/data-contract.md, generated from all of the above

Callers import from here: ``from analysis.contract import TABLES, CONTRACT_VERSION``.
"""

from __future__ import annotations

from .columns import EPOCH_MAX, EPOCH_MIN, Col, Table
from .derived_tables import DERIVED_TABLES
from .doc import schema_doc
from .json_docs import JSON_DOCS, JsonDoc
from .legacy import ABSENT_IN_CONTRACT, LEGACY_TABLES, READABLE_CONTRACTS, Legacy
from .tables import (
    CONTRACT_VERSION,
    GAUGE_COUNTERS,
    SYSCTL_FORMAT_TEXT,
    SYSCTL_FORMATS,
    TABLES,
    TIME_SLACK_INTERVALS,
    TIME_SLACK_S,
)

__all__ = [
    "ABSENT_IN_CONTRACT",
    "CONTRACT_VERSION",
    "DERIVED_TABLES",
    "EPOCH_MAX",
    "EPOCH_MIN",
    "GAUGE_COUNTERS",
    "JSON_DOCS",
    "LEGACY_TABLES",
    "READABLE_CONTRACTS",
    "SYSCTL_FORMATS",
    "SYSCTL_FORMAT_TEXT",
    "TABLES",
    "TIME_SLACK_INTERVALS",
    "TIME_SLACK_S",
    "Col",
    "JsonDoc",
    "Legacy",
    "Table",
    "schema_doc",
]
