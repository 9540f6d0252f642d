"""Load a run directory and check it against the data contract.

One loader path for every file: bytes are read, decoded by the contract's
policy (invalid UTF-8 becomes the text \\xNN), parsed as RFC 4180 CSV or JSON,
typed, range-checked and cross-checked. Every problem becomes a RunDataError
that reads `file:line: column N (name): what is wrong` (or `file:line: key.path:
what is wrong` for JSON); the CLI prints it without a traceback.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import re
import stat
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa

from analysis.contract.schemas import (
    ABSENT_IN_CONTRACT,
    GAUGE_COUNTERS,
    JSON_DOCS,
    LEGACY_TABLES,
    READABLE_CONTRACTS,
    SYSCTL_FORMATS,
    TABLES,
    TIME_SLACK_INTERVALS,
    TIME_SLACK_S,
    Table,
)

# jsonschema imports rfc3987_syntax, when installed (Jupyter brings it), only to
# check the "iri" string format, which no schema here uses; building its grammar
# cost 1-3 s on every command. Marked absent, jsonschema skips that format.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
import jsonschema  # noqa: E402

METADATA_SCHEMA_VERSION = 1
REPORT_OUTPUTS = ("verdicts.json", "report.md")
# plots/ may hold files of others: report writes, replaces and removes only the
# files listed here (the plots it wrote last time), never the folder.
PLOT_MANIFEST = ".report-plots.json"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_RE = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PORT_RANGE_RE = re.compile(r"([0-9]{1,5}) ([0-9]{1,5})")
_UINT_RE = re.compile(r"[0-9]{1,18}")
MAX_ERRORS = 5


class RunDataError(Exception):
    """Bad input: a missing file, a malformed row, a contract mismatch."""


def _json_backslash(e: UnicodeDecodeError) -> tuple[str, int]:
    # Inside a JSON string "\\xNN" is the four characters \xNN: the CSV policy, kept valid JSON.
    bad = e.object[e.start : e.end]
    return "".join(f"\\\\x{b:02x}" for b in bad), e.end


codecs.register_error("tq_json_backslash", _json_backslash)


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, or a RunDataError saying why not."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            target = path.readlink()
            raise RunDataError(f"{path}: missing (a symbolic link to {target}, which does not exist)") from None
        raise RunDataError(f"{path}: missing") from None
    except OSError as e:
        raise RunDataError(f"{path}: cannot read: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise RunDataError(f"{path}: is a directory, expected a file")
    if not stat.S_ISREG(st.st_mode):
        raise RunDataError(f"{path}: not a regular file")
    try:
        return path.read_bytes()
    except OSError as e:
        raise RunDataError(f"{path}: cannot read: {e.strerror}") from None


def decode(data: bytes) -> tuple[str, int | None]:
    """Text by the contract's policy, and the line of the first invalid UTF-8 byte (None if all valid)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return data.decode("utf-8", errors="backslashreplace"), data.count(b"\n", 0, e.start) + 1


# --------------------------------------------------------------------------- CSV


@dataclass
class Loaded:
    """A validated table, the physical line of each row and what was odd but accepted."""

    df: pd.DataFrame
    lines: list[int]
    last_line: int
    notes: list[str] = field(default_factory=list)
    rows_in_file: int | None = None  # when an upgrade from an older contract dropped rows


def _cell_error(path: Path, line: int, table: Table, col: str, msg: str) -> str:
    return f"{path}:{line}: column {table.column_names.index(col) + 1} ({col}): {msg}"


def _raise(errors: list[str]) -> None:
    if errors:
        more = len(errors) - MAX_ERRORS
        raise RunDataError("\n".join(errors[:MAX_ERRORS]) + (f"\n... and {more} more" if more > 0 else ""))


def _parse_rows(path: Path, text: str, table: Table) -> tuple[list[list[str]], list[int], int, list[str]]:
    """Rows (header checked and dropped), the first physical line of each, the last line, notes."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[list[str]] = []
    lines: list[int] = []
    blank: list[int] = []
    header: list[str] | None = None
    ncol = len(table.column_names)
    start = 1
    try:
        for rec in reader:
            if not rec:
                blank.append(start)
            elif header is None:
                header = rec
                if header != table.column_names:
                    missing = [c for c in table.column_names if c not in header]
                    extra = [c for c in header if c not in table.column_names]
                    detail = []
                    if missing:
                        detail.append(f"missing {missing}")
                    if extra:
                        detail.append(f"unexpected {extra}")
                    if not detail:
                        detail.append("columns out of order")
                    raise RunDataError(
                        f"{path}:{start}: header does not match schema {table.name} v{table.version}: "
                        + "; ".join(detail)
                    )
            elif len(rec) != ncol:
                if len(rec) < ncol:
                    absent = ", ".join(table.column_names[len(rec) :])
                    what = f"row ends after {len(rec)} fields, expected {ncol} (no {absent})"
                    col = len(rec) + 1
                else:
                    what = f"row has {len(rec)} fields, expected {ncol} (an unquoted comma in a text field?)"
                    col = ncol + 1
                raise RunDataError(f"{path}:{start}: column {col}: {what}")
            else:
                rows.append(rec)
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as e:
        raise RunDataError(f"{path}:{reader.line_num or 1}: malformed CSV: {e}") from None
    last = max(reader.line_num, 1)
    if header is None:
        raise RunDataError(f"{path}:1: empty file, expected a header row: {','.join(table.column_names)}")
    if not text.endswith("\n"):
        raise RunDataError(f"{path}:{last}: the last line has no line end: the file was cut short")
    notes = []
    if blank:
        notes.append(f"{path.name}: {len(blank)} blank line(s) skipped (line {', '.join(map(str, blank[:5]))})")
    return rows, lines, last, notes


def _typed(path: Path, table: Table, rows: list[list[str]], lines: list[int], text: str) -> pd.DataFrame:
    errors: list[str] = []
    data: dict[str, Any] = {}
    for i, c in enumerate(table.columns):
        raw = [r[i] for r in rows]
        if c.dtype == "string":
            vals: list[Any] = [v if v != "" else None for v in raw]
            if not c.nullable:
                errors += [_cell_error(path, lines[k], table, c.name, "empty") for k, v in enumerate(raw) if v == ""]
            errors += [
                _cell_error(path, lines[k], table, c.name, "holds a NUL byte") for k, v in enumerate(raw) if "\0" in v
            ]
            errors += [
                _cell_error(path, lines[k], table, c.name, f"{v!r}: a quote in a field that is not quoted (RFC 4180)")
                for k, v in enumerate(raw)
                if '"' in v and '"' + v.replace('"', '""') + '"' not in text
            ]
            data[c.name] = pd.array(vals, dtype="string")
            continue
        out: list[Any] = []
        for k, v in enumerate(raw):
            if v == "":
                if not c.nullable:
                    errors.append(_cell_error(path, lines[k], table, c.name, "empty, expected a number"))
                out.append(None)
            elif c.dtype == "Int64":
                if not _INT_RE.fullmatch(v):
                    errors.append(_cell_error(path, lines[k], table, c.name, f"{v!r} is not an integer"))
                    out.append(None)
                    continue
                n = int(v)
                if not INT64_MIN <= n <= INT64_MAX:
                    errors.append(_cell_error(path, lines[k], table, c.name, f"{v} does not fit in int64"))
                    n = 0
                out.append(n)
            else:
                x = float(v) if _FLOAT_RE.fullmatch(v) else None
                if x is None or not math.isfinite(x):
                    special = v.lower().lstrip("+-") in ("nan", "inf", "infinity")
                    what = "is not a finite number" if x is not None or special else "is not a number"
                    errors.append(_cell_error(path, lines[k], table, c.name, f"{v!r} {what}"))
                    x = None
                out.append(x)
            if len(errors) > MAX_ERRORS:
                break
        if c.dtype == "Int64":
            data[c.name] = pd.array(out, dtype="Int64")
        else:
            data[c.name] = np.array([np.nan if x is None else x for x in out], dtype="float64")
        if len(errors) > MAX_ERRORS:
            break
    _raise(errors)
    return pd.DataFrame(data, columns=table.column_names)


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _valid(check: pa.Check, s: pd.Series) -> np.ndarray | None:
    """Where a column passes one of the schema's checks (missing values pass), or None for a check
    this fast path does not know (pandera then runs the whole schema)."""
    st = check.statistics
    if check.name == "greater_than_or_equal_to":
        ok = s >= st["min_value"]
    elif check.name == "greater_than":
        ok = s > st["min_value"]
    elif check.name == "in_range":
        lo_ok = s >= st["min_value"] if st.get("include_min", True) else s > st["min_value"]
        hi_ok = s <= st["max_value"] if st.get("include_max", True) else s < st["max_value"]
        ok = lo_ok & hi_ok
    elif check.name == "isin":
        ok = s.isin(st["allowed_values"])
    else:
        return None
    return (ok.fillna(True) if hasattr(ok, "fillna") else ok).to_numpy(dtype=bool) | s.isna().to_numpy()


def _checks(
    path: Path, table: Table, df: pd.DataFrame, lines: list[int], window: tuple[float, float] | None
) -> pd.DataFrame:
    # The schema's checks, evaluated column by column (pandera's own validation costs ~3 ms a
    # column, which a run of 14 tables and the bad-input corpus feel); pandera for anything else.
    errors: list[str] = []
    for c in table.columns:
        for check in c.checks:
            ok = _valid(check, df[c.name])
            if ok is None:
                return _pandera_checks(path, table, df, lines, window)
            for i in np.flatnonzero(~ok)[:MAX_ERRORS]:
                errors.append(
                    _cell_error(path, lines[i], table, c.name, f"{_plain(df[c.name].iat[i])!r} fails {check.error}")
                )
    _raise(errors)
    return _more_checks(path, table, df, lines, window)


def _pandera_checks(
    path: Path, table: Table, df: pd.DataFrame, lines: list[int], window: tuple[float, float] | None
) -> pd.DataFrame:
    try:
        df = _schema(table).validate(df, lazy=True, inplace=True)
    except pa.errors.SchemaErrors as e:
        fc = e.failure_cases
        rows = fc[fc["index"].notna()].head(MAX_ERRORS)
        if rows.empty:
            msg = "; ".join(str(x) for x in fc["check"].head(3))
            raise RunDataError(f"{path}:1: does not match schema {table.name} v{table.version}: {msg}") from None
        parts = [
            _cell_error(
                path, lines[int(r["index"])], table, str(r["column"]), f"{r['failure_case']!r} fails {r['check']}"
            )
            for _, r in rows.iterrows()
        ]
        more = len(fc) - len(rows)
        raise RunDataError("\n".join(parts) + (f"\n... and {more} more" if more > 0 else "")) from None
    return _more_checks(path, table, df, lines, window)


def _more_checks(
    path: Path, table: Table, df: pd.DataFrame, lines: list[int], window: tuple[float, float] | None
) -> pd.DataFrame:
    errors: list[str] = []
    if window is not None and len(df):
        errors += _window_errors(path, table, df, lines, window)
        _raise(errors)
    if table.key and len(df):
        dup = df.duplicated(list(table.key), keep="first").to_numpy()
        if dup.any():
            keys = list(df[list(table.key)].astype(object).itertuples(index=False, name=None))
            first: dict[tuple, int] = {}
            for i, k in enumerate(keys):
                first.setdefault(k, i)
                if dup[i] and len(errors) < MAX_ERRORS:
                    errors.append(
                        f"{path}:{lines[i]}: column 1 ({table.column_names[0]}): duplicate row: the same "
                        f"{', '.join(table.key)} as line {lines[first[k]]}"
                    )
    if table.name == "counters":
        errors += _counter_errors(path, table, df, lines)
    if table.name == "sysctls":
        errors += _sysctl_errors(path, table, df, lines)
    _raise(errors)
    return df


_SCHEMAS: dict[tuple[str, str], pa.DataFrameSchema] = {}


def _schema(table: Table) -> pa.DataFrameSchema:
    """The table's pandera schema, built once (building one per load costs more than the checks)."""
    key = (table.name, table.file)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = table.schema()
    return _SCHEMAS[key]


def _window_errors(
    path: Path, table: Table, df: pd.DataFrame, lines: list[int], window: tuple[float, float]
) -> list[str]:
    """Times inside the capture (metadata.json's start and end, with slack).

    Only for what the capture itself writes: a lab's own files (connects.csv)
    may run past a capture that stopped at its safety duration."""
    if not (table.probe or table.writer.startswith("collector/")):
        return []
    col, scale = ("time_s", 1.0) if "time_s" in table.column_names else ("start_unix_ns", 1e-9)
    if col not in table.column_names:
        return []
    lo, hi = window
    secs = df[col].astype("float64") * scale
    bad = np.flatnonzero(((secs < lo) | (secs > hi)).to_numpy())
    return [
        _cell_error(
            path,
            lines[i],
            table,
            col,
            f"{df[col].iat[i]} is outside the capture (metadata.json: {lo:.0f} .. {hi:.0f} with slack)",
        )
        for i in bad[:2]
    ]


def _counter_errors(path: Path, table: Table, df: pd.DataFrame, lines: list[int]) -> list[str]:
    """delta = value - previous value of the same (netns, counter); empty only on the first row.

    In file order, not time order: each sampler appends its rows as it takes
    them, and a wall clock stepped back (NTP, a VM resumed) must not turn a
    correct chain into errors."""
    errors: list[str] = []
    last: dict[tuple[int, str], tuple[int, int]] = {}
    order = range(len(df))
    netns, counter, value, delta = (df[c].tolist() for c in ("netns", "counter", "value", "delta"))
    for i in order:
        k = (netns[i], counter[i])
        d = delta[i]
        if k in last:
            prev_v, prev_i = last[k]
            if d is pd.NA:
                errors.append(
                    _cell_error(
                        path,
                        lines[i],
                        table,
                        "delta",
                        f"empty, but {counter[i]} has a sample before (line {lines[prev_i]})",
                    )
                )
            elif d != value[i] - prev_v:
                errors.append(
                    _cell_error(
                        path,
                        lines[i],
                        table,
                        "delta",
                        f"{d} but {counter[i]} went from {prev_v} (line {lines[prev_i]}) to {value[i]}: "
                        "delta must be value minus the previous value",
                    )
                )
            elif d < 0 and counter[i] not in GAUGE_COUNTERS:
                errors.append(
                    _cell_error(path, lines[i], table, "delta", f"{d}: {counter[i]} is a counter and cannot fall")
                )
        elif d is not pd.NA:
            errors.append(
                _cell_error(path, lines[i], table, "delta", f"{d} on the first sample of {counter[i]} (expected empty)")
            )
        last[k] = (value[i], i)
        if len(errors) > MAX_ERRORS:
            break
    return errors


def _sysctl_errors(path: Path, table: Table, df: pd.DataFrame, lines: list[int]) -> list[str]:
    errors: list[str] = []
    for i, (key, value) in enumerate(zip(df["key"].tolist(), df["value"].tolist(), strict=True)):
        fmt = SYSCTL_FORMATS.get(key)
        v = "" if value is pd.NA else str(value)
        if fmt == "int" and not _UINT_RE.fullmatch(v):
            errors.append(_cell_error(path, lines[i], table, "value", f"{key} = {v!r} is not a non-negative integer"))
        elif fmt == "port_range":
            m = _PORT_RANGE_RE.fullmatch(v)
            if not m:
                errors.append(_cell_error(path, lines[i], table, "value", f"{key} = {v!r} is not two ports 'low high'"))
                continue
            lo, hi = int(m.group(1)), int(m.group(2))
            if not (1 <= lo <= 65535 and 1 <= hi <= 65535):
                errors.append(_cell_error(path, lines[i], table, "value", f"{key} = {v!r}: ports must be 1..65535"))
            elif lo > hi:
                errors.append(_cell_error(path, lines[i], table, "value", f"{key} = {v!r}: low port above high port"))
    return errors


def _rows_in_file(ld: Loaded) -> int:
    return len(ld.df) if ld.rows_in_file is None else ld.rows_in_file


def load_table(path: Path, table: Table, window: tuple[float, float] | None = None) -> Loaded:
    """A file read, decoded, parsed, typed and checked against its table's contract."""
    text, bad_line = decode(read_bytes(path))
    rows, lines, last, notes = _parse_rows(path, text, table)
    if bad_line is not None:
        notes.append(f"{path.name}: bytes that are not UTF-8 (first on line {bad_line}) read as \\xNN")
    df = _checks(path, table, _typed(path, table, rows, lines, text), lines, window)
    return Loaded(df, lines, last, notes)


def read_table(path: Path, table: Table) -> pd.DataFrame:
    return load_table(path, table).df


# --------------------------------------------------------------------------- JSON


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _int64(s: str) -> int:
    n = int(s)
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"{s} does not fit in int64")
    return n


def _finite_float(s: str) -> float:
    x = float(s)
    if not math.isfinite(x):
        raise ValueError(f"{s} is beyond a double")
    return x


def json_key_line(text: str, path: tuple[Any, ...]) -> int:
    """Physical line where the value at `path` (keys and list indices) starts; 1 if not found."""
    tok = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)
    stack: list[dict[str, Any]] = []
    want = tuple(path)
    hit = None
    for m in tok.finditer(text):
        t = m.group()
        top = stack[-1] if stack else None
        if top is not None and top["t"] == "o" and top["want_key"] and t.startswith('"'):
            top["key"], top["want_key"] = json.loads(t), False
            cur = tuple(e["key"] if e["t"] == "o" else e["idx"] for e in stack)
            if cur == want:
                hit = m.start()
                break
            continue
        if t == ":":
            continue
        if t == ",":
            if top is not None:
                if top["t"] == "o":
                    top["want_key"] = True
                else:
                    top["idx"] += 1
            continue
        if t in "}]":
            if stack:
                stack.pop()
            continue
        cur = tuple(e["key"] if e["t"] == "o" else e["idx"] for e in stack)
        if cur == want:
            hit = m.start()
            break
        if t == "{":
            stack.append({"t": "o", "want_key": True, "key": None})
        elif t == "[":
            stack.append({"t": "a", "idx": 0})
    return text.count("\n", 0, hit) + 1 if hit is not None else 1


def _key_path(path: Any) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def json_error(path: Path, text: str, key: tuple[Any, ...], msg: str) -> RunDataError:
    return RunDataError(f"{path}:{json_key_line(text, key)}: {_key_path(key)}: {msg}")


def read_json_text(path: Path, hint: str = "", schema: str | None = None, allow_nan: bool = False) -> tuple[Any, str]:
    """A JSON file decoded by the contract's policy, parsed and (if named) checked against its schema."""
    try:
        data = read_bytes(path)
    except RunDataError as e:
        if str(e).endswith(": missing") and hint:
            raise RunDataError(f"{path}: missing; {hint}") from None
        raise
    text = data.decode("utf-8", errors="tq_json_backslash")
    try:
        doc = json.loads(
            text,
            parse_constant=(lambda c: float(c)) if allow_nan else _reject_constant,
            parse_float=float if allow_nan else _finite_float,
            parse_int=_int64,
        )
    except json.JSONDecodeError as e:
        raise RunDataError(f"{path}:{e.lineno}: invalid JSON at column {e.colno}: {e.msg}") from None
    except ValueError as e:
        raise RunDataError(f"{path}:{_value_line(text, str(e))}: invalid JSON: {e}") from None
    except RecursionError:
        raise RunDataError(f"{path}:1: invalid JSON: nested too deep") from None
    if schema is not None:
        check_json(path, text, doc, schema)
    return doc, text


def check_json(path: Path, text: str, doc: Any, schema: str) -> None:
    """RunDataError listing where `doc` breaks the named JSON schema (file:line: key.path: what)."""
    errs = sorted(
        _validator(schema).iter_errors(doc), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if errs:
        parts = [
            f"{path}:{json_key_line(text, tuple(e.absolute_path))}: {_key_path(e.absolute_path)}: {e.message}"
            for e in errs[:MAX_ERRORS]
        ]
        more = len(errs) - MAX_ERRORS
        raise RunDataError("\n".join(parts) + (f"\n... and {more} more" if more > 0 else ""))


def _value_line(text: str, msg: str) -> int:
    word = msg.split()[0]
    i = text.find(word)
    return text.count("\n", 0, i) + 1 if i >= 0 else 1


_VALIDATORS: dict[str, Any] = {}


def _validator(name: str) -> Any:
    if name not in _VALIDATORS:
        schema = JSON_DOCS[name].schema
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        _VALIDATORS[name] = cls(schema)
    return _VALIDATORS[name]


def read_json(path: Path, hint: str, schema: str | None = None, allow_nan: bool = False) -> Any:
    """A JSON file the analysis needs, or a RunDataError naming the file (and line) and what it should be."""
    return read_json_text(path, hint, schema, allow_nan)[0]


# --------------------------------------------------------------------------- runs


@dataclass
class Run:
    """A run directory: metadata.json plus the CSV tables of the data contract."""

    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    meta_text: str = ""

    @classmethod
    def open(cls, path: str | Path) -> Run:
        p = Path(path)
        if not p.exists():
            raise RunDataError(f"{p}: not a run directory (no such folder)")
        if not p.is_dir():
            raise RunDataError(f"{p}: not a run directory (not a folder)")
        meta_path = p / "metadata.json"
        meta, text = read_json_text(meta_path, f"is {p} a run directory written by collector/capture?")
        if not isinstance(meta, dict):
            raise json_error(meta_path, text, (), f"expected an object, found {type(meta).__name__}")
        for key, want, what in (
            ("schema_version", (METADATA_SCHEMA_VERSION,), "metadata schema"),
            ("data_contract", READABLE_CONTRACTS, "data contract"),
        ):
            if key not in meta:
                raise json_error(meta_path, text, (), f"no {key!r}: not a metadata.json written by collector/capture")
            if meta[key] not in want or type(meta[key]) is not int:
                raise json_error(
                    meta_path,
                    text,
                    (key,),
                    f"{what} v{meta[key]!r}, this analysis reads v{' and v'.join(map(str, want))}: analyse it "
                    f"with the version of this repository that wrote it, or capture again",
                )
        if meta.get("stop_reason") == "running" or ("ended_epoch" in meta and meta["ended_epoch"] is None):
            key = "stop_reason" if meta.get("stop_reason") == "running" else "ended_epoch"
            raise json_error(
                meta_path,
                text,
                (key,),
                "this capture has not ended: it is still running, or it died and was never reaped; "
                "wait for it, or reap it with collector/capture --reap (any of collector/capture, scripts/lab, "
                "scripts/compare, scripts/sweep reaps dead runs when it starts)",
            )
        check_json(meta_path, text, meta, "metadata")
        if meta["ended_epoch"] < meta["started_epoch"]:
            raise json_error(
                meta_path,
                text,
                ("ended_epoch",),
                f"{meta['ended_epoch']} is before started_epoch {meta['started_epoch']}",
            )
        inodes = [ns["inode"] for ns in meta["netns"]]
        for i, ino in enumerate(inodes):
            if ino in inodes[:i]:
                raise json_error(meta_path, text, ("netns", i, "inode"), f"{ino} listed twice")
        doctor = p / "doctor.json"
        if doctor.exists() or doctor.is_symlink():
            read_json(doctor, "", schema="doctor")
        return cls(path=p, metadata=meta, meta_text=text)

    def meta_line(self, *key: Any) -> str:
        return f"{self.path / 'metadata.json'}:{json_key_line(self.meta_text, key)}"

    @property
    def complete(self) -> bool:
        return bool(self.metadata.get("complete"))

    def has(self, name: str) -> bool:
        return (self.path / TABLES[name].file).is_file()

    def _probe_family(self, t: Table) -> str | None:
        return t.writer.removeprefix("probes/").removesuffix(".bt") if t.probe else None

    def table(self, name: str) -> pd.DataFrame:
        """A validated table; an empty frame with the right columns if the file may be absent."""
        if name not in self._cache:
            t = TABLES[name]
            f = self.path / t.file
            if not (f.exists() or f.is_symlink()):
                family = self._probe_family(t)
                probes = self.metadata["probes"]
                status = probes.get(family, {}).get("status") if family else None
                # Empty when the file is optional, its probe was not asked for or did not run
                # to the end, or the run itself stopped early.
                absent = name in ABSENT_IN_CONTRACT.get(self.metadata.get("data_contract"), ())
                if absent or t.optional or (family is not None and status != "ok"):
                    if not absent and family is not None and family in probes and status != "ok":
                        self.missing[name] = f"probe {family} {status}"
                elif not self.complete:
                    self.missing[name] = f"run incomplete ({self.metadata.get('stop_reason')})"
                else:
                    raise RunDataError(f"{f}: missing ({t.description})")
                empty = t.schema().coerce_dtype(pd.DataFrame(columns=t.column_names))
                self._loaded[name] = Loaded(empty, [], 1)
            else:
                legacy = LEGACY_TABLES.get(self.metadata.get("data_contract"), {}).get(name)
                if legacy is None:
                    self._loaded[name] = load_table(f, t, self.window)
                else:
                    # Written under an older contract: checked against the definition it was
                    # written by, then given today's columns.
                    ld = load_table(f, legacy.table, self.window)
                    up = legacy.upgrade(ld.df.reset_index(drop=True))
                    lines = [ld.lines[i] for i in up.index]
                    self._loaded[name] = Loaded(up.reset_index(drop=True), lines, ld.last_line, ld.notes, len(ld.df))
                self.notes += self._loaded[name].notes
                self._loaded[name] = self._scoped(name, self._loaded[name])
            self._cache[name] = self._loaded[name].df
        return self._cache[name]

    @property
    def scope(self) -> str:
        """all (default): every namespace the probes saw is judged; sampled: only the sampled ones."""
        return str(self.metadata.get("scope", "all"))

    @cached_property
    def out_of_scope(self) -> dict[str, int]:
        """Probe rows set aside by scope "sampled", per table."""
        return {}

    @cached_property
    def scope_pids(self) -> set[int]:
        """Processes of the sampled namespaces that the run saw: listening there (ss -p in the namespace), or
        calling listen() or accept() on one of its sockets, or failing a connect there (probes)."""
        sampled = {int(ns["inode"]) for ns in self.metadata["netns"]}
        pids: set[int] = set()
        for name in ("listeners", "aq_listen", "aq_accept", "tw_connect"):
            df = self.table(name)
            pids |= {int(p) for p in df.loc[df["netns"].isin(sampled), "pid"].dropna() if int(p) > 0}
        return pids

    def _scoped(self, name: str, ld: Loaded) -> Loaded:
        """Under scope "sampled", a probe table without the rows of namespaces that were not sampled (the
        probes see the whole kernel: other containers, other namespace "hosts"). ep_loop has no namespace
        column: it keeps the threads of scope_pids. rows_in_file keeps the file's count for the cross-checks."""
        t = TABLES[name]
        if self.scope != "sampled" or not t.probe or ld.df.empty:
            return ld
        if "netns" in t.column_names:
            keep = ld.df["netns"].isin({int(ns["inode"]) for ns in self.metadata["netns"]})
        else:
            keep = ld.df["pid"].isin(self.scope_pids)
        mask = keep.fillna(False).to_numpy(dtype=bool)
        if mask.all():
            return ld
        self.out_of_scope[name] = int((~mask).sum())
        lines = [n for n, k in zip(ld.lines, mask, strict=True) if k]
        return Loaded(ld.df[mask].reset_index(drop=True), lines, ld.last_line, ld.notes, _rows_in_file(ld))

    @cached_property
    def _cache(self) -> dict[str, pd.DataFrame]:
        return {}

    @cached_property
    def _loaded(self) -> dict[str, Loaded]:
        return {}

    @cached_property
    def notes(self) -> list[str]:
        """What was odd in the input but accepted (blank lines, bytes that are not UTF-8, ...)."""
        return []

    @cached_property
    def missing(self) -> dict[str, str]:
        """Tables absent from the run, and why (probe status or an incomplete run)."""
        return {}

    def validate_all(self) -> dict[str, int]:
        """Load and check every table and what ties them together; returns rows per table."""
        counts = {name: len(self.table(name)) for name in TABLES}
        self._cross_checks()
        self.check_outputs()
        return counts

    def check_outputs(self) -> None:
        """report can write its outputs here: each is absent or a regular file, plots/ absent or a folder."""
        for name in (*REPORT_OUTPUTS, f"plots/{PLOT_MANIFEST}"):
            p = self.path / name
            if (p.exists() or p.is_symlink()) and (p.is_symlink() or not p.is_file()):
                raise RunDataError(f"{p}: exists and is not a regular file; report will not replace it")
            if name == REPORT_OUTPUTS[0]:
                plots = self.path / "plots"
                if plots.is_symlink() or (plots.exists() and not plots.is_dir()):
                    raise RunDataError(f"{plots}: exists and is not a folder; report writes its plots there")

    @property
    def window(self) -> tuple[float, float]:
        """Epoch seconds rows may carry: the capture, with slack at both ends."""
        slack = max(TIME_SLACK_S, TIME_SLACK_INTERVALS * float(self.metadata["interval_s"]))
        return self.start - slack, self.end + slack

    def _cross_checks(self) -> None:
        meta = self.metadata
        # Each probe family's files hold the rows probe-to-csv counted when it wrote them.
        for family, info in meta["probes"].items():
            names = [n for n, t in TABLES.items() if self._probe_family(t) == family]
            if info.get("status") != "ok" or not names or any(n in self.missing for n in names):
                continue
            have = sum(_rows_in_file(self._loaded[n]) for n in names)
            if have != info["rows"]:
                files = ", ".join(TABLES[n].file for n in names)
                raise RunDataError(
                    f"{self.meta_line('probes', family, 'rows')}: probes.{family}.rows: {info['rows']}, but "
                    f"{files} hold {have} rows together: a file was cut short or rows were added"
                )
        # Every sampled namespace has samples (the samplers write one per interval).
        for name in ("counters", "sockstat", "sysctls"):
            if name in self.missing:
                continue
            ld = self._loaded[name]
            have = set(ld.df["netns"].dropna().astype("int64").tolist())
            for i, ns in enumerate(meta["netns"]):
                if ns["inode"] in have:
                    continue
                msg = (
                    f"{self.path / TABLES[name].file}:{ld.last_line}: no row for namespace {ns['label']} "
                    f"(inode {ns['inode']}, {self.meta_line('netns', i)}): the file was cut short"
                )
                if self.complete:
                    raise RunDataError(msg)
                self.notes.append(msg + " (run incomplete)")

    @property
    def start(self) -> float:
        return float(self.metadata["started_epoch"])

    @property
    def end(self) -> float:
        return float(self.metadata["ended_epoch"])

    def netns_label(self, inode: int) -> str:
        for ns in self.metadata["netns"]:
            if int(ns["inode"]) == int(inode):
                return str(ns["label"])
        return str(inode)

    @property
    def lab(self) -> dict[str, Any] | None:
        return self.metadata.get("lab")

    def counter_deltas(self, netns: int, names: list[str]) -> pd.DataFrame:
        """Per-sample deltas of counters (columns) in one namespace; 0 where unchanged."""
        from analysis.derived.counters import per_sample

        return per_sample(self, netns, names)

    def sysctl(self, netns: int, key: str, phase: str = "start") -> str | None:
        s = self.table("sysctls")
        hit = s[(s["netns"] == netns) & (s["key"] == key) & (s["phase"] == phase)]
        return None if hit.empty else str(hit["value"].iloc[0])
