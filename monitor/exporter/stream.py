"""Rows of a live probe, as collector/probe-to-csv --stream prints them.

The probe's line format (headers, CSV rows, running totals after '=== <epoch>' markers,
a comm that may hold commas or newlines) is parsed in one place, that awk script; this
reads what it prints: '#<record>,time_s,<columns>' headers, the probe's BEGIN line
('# <probe>.bt schema=...'), and '<record>,<time_s>,...' rows in CSV, where a quoted
field (a comm) may span lines."""

from __future__ import annotations

import csv
from collections.abc import Iterator

Row = dict[str, str]


class CsvRows:
    """Bytes from the pipe, in any chunks -> (record, {column: value}) as they complete."""

    def __init__(self) -> None:
        self.columns: dict[str, list[str]] = {}
        self.started = False  # the probe printed its BEGIN line
        self.bad = 0
        self.buf = b""
        self.pending: str | None = None

    def feed(self, chunk: bytes) -> Iterator[tuple[str, Row]]:
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            yield from self.line(raw.decode("utf-8", "replace"))
        if len(self.buf) > 1 << 20:  # a line without end: drop it, keep going
            self.buf = b""

    def line(self, text: str) -> Iterator[tuple[str, Row]]:
        if self.pending is not None:
            text = self.pending + "\n" + text
            self.pending = None
        if text.count('"') % 2:  # inside a quoted field: the record goes on
            if len(text) < 1 << 16:
                self.pending = text
            return
        if text.startswith("# "):
            self.started = True
        elif text.startswith("#"):
            rec, *cols = text[1:].split(",")
            self.columns[rec] = cols
        elif text:
            row = self.row(text)
            if row is not None:
                yield row

    def row(self, text: str) -> tuple[str, Row] | None:
        rec, *values = next(csv.reader([text]))
        cols = self.columns.get(rec)
        if cols is None or len(cols) != len(values):
            self.bad += 1
            return None
        return rec, dict(zip(cols, values, strict=True))
