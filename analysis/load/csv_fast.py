"""A plain CSV file read by pyarrow's C++ reader, every cell held to what the careful path accepts.

A day's capture holds tens of millions of cells: read in Python (csv, then int() or float() per
cell) that took minutes. A file qualifies when its bytes hold no quote, CR, NUL or blank line and
end with a line end, and its header is the table's: each row is then one physical line (line =
row + 2). Every column is read as text, and a whole column becomes numbers only when each of its
cells matches what coerce.py's reading accepts without a word (digits, a minus at most, for an integer: 18 at most
of them; a plain decimal for a float, finite); the text columns must be valid UTF-8 and non-empty
where the contract says so. Anything else returns None and the file takes the careful path,
which names the line and column of whatever is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from analysis.contract import Table

_CHUNK = 1 << 24
# Rows typed at a time: what a table costs beyond its frame while it is read.
_BLOCK = 1 << 22
# What coerce.py reads without a word: an optional minus and digits (18 at most: int64), _FLOAT_RE.
_INT = r"^-?[0-9]{1,18}$"
_FLOAT = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"


def _plain_lines(path: Path) -> int | None:
    """The file's line count when it holds no quote, CR, NUL or blank line, is not empty and ends
    with a line end; None otherwise (read in chunks: a file of hundreds of MB is never held whole)."""
    last = b"\n"  # the start of the file: a line end before it makes a leading one a blank line
    size = lines = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            if b'"' in chunk or b"\r" in chunk or b"\0" in chunk or b"\n\n" in chunk:
                return None
            if last == b"\n" and chunk[:1] == b"\n":
                return None
            last = chunk[-1:]
            size += len(chunk)
            lines += chunk.count(b"\n")
    return lines if size > 0 and last == b"\n" else None


def fast_table(path: Path, table: Table) -> tuple[pd.DataFrame, int] | None:
    """The table's frame (the careful path's dtypes: Int64, float64, string) and its row count,
    or None when the file does not qualify or a cell is not what the careful path reads at once."""
    try:
        # A regular file only: anything else gets the careful path's own words.
        lines = None if path.is_symlink() or not path.is_file() else _plain_lines(path)
    except OSError:
        return None
    if lines is None:
        return None
    with open(path, "rb") as f:
        header = f.readline().decode("utf-8", "replace").rstrip("\n").split(",")
    if header != table.column_names:
        return None
    # Each line after the header is a row: the columns are made at their full length at once and
    # filled a block at a time, so the table costs about its frame, not its frame twice.
    columns = _Columns(table, lines - 1)
    read = {
        "read_options": pcsv.ReadOptions(column_names=table.column_names, use_threads=False),
        "parse_options": pcsv.ParseOptions(quote_char=False, double_quote=False, newlines_in_values=False),
        "convert_options": _as_text(table),
    }
    try:
        for block in _blocks(path):
            if not columns.add(pcsv.read_csv(pa.py_buffer(block), **read)):
                return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):
        return None
    return columns.frame()


def _blocks(path: Path) -> Iterator[memoryview]:
    """The rows after the header, _BLOCK bytes at a time cut at a line end. pyarrow's own streaming
    reader reads ahead: a whole 66 MB file held as bytes before its first block is typed."""
    with open(path, "rb") as f:
        f.readline()
        rest = b""
        while chunk := f.read(_BLOCK):
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            rest = chunk[cut:]
            if cut:
                yield memoryview(chunk)[:cut]


def _as_text(table: Table) -> pcsv.ConvertOptions:
    """Every column as text (typed by _typed, which holds each cell to the careful path), empty cells null."""
    return pcsv.ConvertOptions(
        column_types={c: pa.string() for c in table.column_names},
        null_values=[""],
        strings_can_be_null=True,
        check_utf8=True,
    )


class _Columns:
    """A table's columns being filled a block at a time: numbers in numpy arrays of the file's row
    count (Int64 as values and a mask), text as pyarrow's blocks (pandas' string dtype holds them)."""

    def __init__(self, table: Table, rows: int) -> None:
        self.table, self.rows, self.filled = table, rows, 0
        self.values = {c.name: np.empty(rows, dtype=c.dtype.lower()) for c in table.columns if c.dtype != "string"}
        self.masks = {c.name: np.empty(rows, dtype=bool) for c in table.columns if c.dtype == "Int64"}
        self.text: dict[str, list[pa.Array]] = {c.name: [] for c in table.columns if c.dtype == "string"}

    def add(self, batch: pa.Table) -> bool:
        """One block's rows in their columns; False when a cell is not what the careful path reads
        at once (or the file holds more rows than lines)."""
        start, end = self.filled, self.filled + batch.num_rows
        if end > self.rows:
            return False
        for c in self.table.columns:
            typed = _typed(batch.column(c.name), c.dtype, c.nullable)
            if typed is None:
                return False
            if c.dtype == "string":
                self.text[c.name].append(typed)
            elif c.dtype == "float64":
                self.values[c.name][start:end] = typed.to_numpy(zero_copy_only=False)  # nulls: NaN
            else:
                self.values[c.name][start:end] = pc.fill_null(typed, 0).to_numpy()
                self.masks[c.name][start:end] = typed.is_null().to_numpy(zero_copy_only=False)
        self.filled = end
        return True

    def frame(self) -> tuple[pd.DataFrame, int] | None:
        """The frame, its arrays not copied; None when fewer rows came than the file has lines."""
        if self.filled != self.rows:
            return None
        data: dict[str, object] = {}
        for c in self.table.columns:
            if c.dtype == "string":
                data[c.name] = pd.array(pa.chunked_array(self.text.pop(c.name), type=pa.string()), dtype="string")
            elif c.dtype == "Int64":
                data[c.name] = pd.arrays.IntegerArray(self.values.pop(c.name), self.masks.pop(c.name))
            else:
                data[c.name] = self.values.pop(c.name)
        return pd.DataFrame(data, columns=self.table.column_names, copy=False), self.rows


_ARROW = {"string": pa.string(), "Int64": pa.int64(), "float64": pa.float64()}


def _typed(col: pa.Array, dtype: str, nullable: bool) -> pa.Array | None:
    """One block of a column in its type, or None when a cell is not what the careful path reads
    at once (or is empty where the contract says it may not be)."""
    if col.null_count and not nullable:
        return None
    if dtype == "string":
        return col
    cells = len(col) - col.null_count
    if cells and not pc.all(pc.match_substring_regex(col, _INT if dtype == "Int64" else _FLOAT)).as_py():
        return None
    x = pc.cast(col, _ARROW[dtype])
    if dtype == "float64" and cells and not pc.all(pc.is_finite(x)).as_py():
        return None
    return x
