"""Load a run directory (or another directory's CSV and JSON files) and check it against the data contract.

errors          RunDataError, and how problems become one message naming file, line and column
decode          a file's bytes, and its text by the contract's policy (invalid UTF-8 as \\xNN)
csv_rows        RFC 4180 rows with their physical lines; the header checked
coerce          text cells to typed columns, an error per cell that is not of its type
checks          a typed table against its contract: column checks, capture window, duplicate keys
content_checks  the counters' delta chain and the sysctl value formats
table           one CSV file through all of the above (load_table, read_table)
json_locate     the line of a key path in a JSON text, and errors that name it
json_files      JSON files: strict numbers, checked against their JSON Schema
metadata        metadata.json: versions, a capture still running refused, checked
scope           scope "sampled": probe rows of namespaces not sampled set aside
run_checks      what ties a run's tables to metadata.json
run             Run: a run directory, each table loaded once
"""

from __future__ import annotations

from .decode import decode, read_bytes
from .errors import MAX_ERRORS, RunDataError
from .json_files import check_json, read_json, read_json_text
from .json_locate import json_error, json_key_line
from .run import Run
from .table import Loaded, load_table, read_table

__all__ = [
    "MAX_ERRORS",
    "Loaded",
    "Run",
    "RunDataError",
    "check_json",
    "decode",
    "json_error",
    "json_key_line",
    "load_table",
    "read_bytes",
    "read_json",
    "read_json_text",
    "read_table",
]
