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

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from analysis.contract import Table

_CHUNK = 1 << 24
# What coerce.py reads without a word: an optional minus and digits (18 at most: int64), _FLOAT_RE.
_INT = r"^-?[0-9]{1,18}$"
_FLOAT = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"


def _plain_bytes(path: Path) -> bool:
    """No quote, CR, NUL or blank line; not empty; ends with a line end (read in chunks: a file
    of hundreds of MB is never held whole)."""
    last = b"\n"  # the start of the file: a line end before it makes a leading one a blank line
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            if b'"' in chunk or b"\r" in chunk or b"\0" in chunk or b"\n\n" in chunk:
                return False
            if last == b"\n" and chunk[:1] == b"\n":
                return False
            last = chunk[-1:]
            size += len(chunk)
    return size > 0 and last == b"\n"


def fast_table(path: Path, table: Table) -> tuple[pd.DataFrame, int] | None:
    """The table's frame (the careful path's dtypes: Int64, float64, string) and its row count,
    or None when the file does not qualify or a cell is not what the careful path reads at once."""
    try:
        # A regular file only: anything else gets the careful path's own words.
        if path.is_symlink() or not path.is_file() or not _plain_bytes(path):
            return None
    except OSError:
        return None
    with open(path, "rb") as f:
        header = f.readline().decode("utf-8", "replace").rstrip("\n").split(",")
    if header != table.column_names:
        return None
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(block_size=_CHUNK),
            parse_options=pcsv.ParseOptions(quote_char=False, double_quote=False, newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(
                column_types={c: pa.string() for c in table.column_names},
                null_values=[""],
                strings_can_be_null=True,
                check_utf8=True,
            ),
        )
        # A batch at a time: a column's text is held for one block only, its typed values kept.
        chunks: dict[str, list[pa.Array]] = {c: [] for c in table.column_names}
        n = 0
        for batch in reader:
            for c in table.columns:
                typed = _typed(batch.column(c.name), c.dtype, c.nullable)
                if typed is None:
                    return None
                chunks[c.name].append(typed)
            n += batch.num_rows
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):
        return None
    data: dict[str, object] = {}
    for c in table.columns:
        col = pa.chunked_array(chunks.pop(c.name), type=_ARROW[c.dtype])
        if c.dtype == "float64":
            data[c.name] = col.to_numpy()
        else:
            data[c.name] = pd.array(col, dtype=c.dtype)
    return pd.DataFrame(data, columns=table.column_names), n


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
