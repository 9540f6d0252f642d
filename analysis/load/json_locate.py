"""Where a key path starts in a JSON text (its line), and the error that names file, line and key path."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .errors import RunDataError

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)


def json_key_line(text: str, path: tuple[Any, ...]) -> int:
    """Physical line where the value at `path` (keys and list indices) starts; 1 if not found."""
    hit = _key_offset(text, tuple(path))
    return text.count("\n", 0, hit) + 1 if hit is not None else 1


def _key_offset(text: str, want: tuple[Any, ...]) -> int | None:
    """Offset of the key (in an object) or the value (in an array, or the top level) at `want`."""
    stack: list[dict[str, Any]] = []
    for m in _TOKEN.finditer(text):
        t = m.group()
        top = stack[-1] if stack else None
        if top is not None and top["t"] == "o" and top["want_key"] and t.startswith('"'):
            top["key"], top["want_key"] = json.loads(t), False
            if _where(stack) == want:
                return m.start()
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
        if _where(stack) == want:
            return m.start()
        if t == "{":
            stack.append({"t": "o", "want_key": True, "key": None})
        elif t == "[":
            stack.append({"t": "a", "idx": 0})
    return None


def _where(stack: list[dict[str, Any]]) -> tuple[Any, ...]:
    return tuple(e["key"] if e["t"] == "o" else e["idx"] for e in stack)


def key_path(path: Any) -> str:
    """`a.b[2].c`, or `(top level)`."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def json_error(path: Path, text: str, key: tuple[Any, ...], msg: str) -> RunDataError:
    return RunDataError(f"{path}:{json_key_line(text, key)}: {key_path(key)}: {msg}")
