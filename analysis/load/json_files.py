"""JSON files: decoded by the contract's policy, parsed with strict numbers, checked against their JSON Schema."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from analysis.contract import JSON_DOCS

from .coerce import INT64_MAX, INT64_MIN
from .decode import JSON_ERRORS, read_bytes
from .errors import MAX_ERRORS, RunDataError
from .json_locate import json_key_line, key_path

# jsonschema imports rfc3987_syntax, when installed (Jupyter brings it), only to
# check the "iri" string format, which no schema here uses; building its grammar
# cost 1-3 s on every command. Marked absent, jsonschema skips that format.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
import jsonschema  # noqa: E402


def read_json(path: Path, hint: str, schema: str | None = None, allow_nan: bool = False) -> Any:
    """A JSON file the analysis needs, or a RunDataError naming the file (and line) and what it should be."""
    return read_json_text(path, hint, schema, allow_nan)[0]


def read_json_text(path: Path, hint: str = "", schema: str | None = None, allow_nan: bool = False) -> tuple[Any, str]:
    """A JSON file decoded by the contract's policy, parsed and (if named) checked against its schema."""
    try:
        data = read_bytes(path)
    except RunDataError as e:
        if str(e).endswith(": missing") and hint:
            raise RunDataError(f"{path}: missing; {hint}") from None
        raise
    text = data.decode("utf-8", errors=JSON_ERRORS)
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
            f"{path}:{json_key_line(text, tuple(e.absolute_path))}: {key_path(e.absolute_path)}: {e.message}"
            for e in errs[:MAX_ERRORS]
        ]
        more = len(errs) - MAX_ERRORS
        raise RunDataError("\n".join(parts) + (f"\n... and {more} more" if more > 0 else ""))


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
