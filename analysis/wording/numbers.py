"""Values as a sentence or a table writes them: numbers plainly, lists in words, missing ones said."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.findings import plain


def is_missing(v: Any) -> bool:
    """None, NaN, an empty string or an empty collection: nothing to write."""
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    if hasattr(v, "item") and not isinstance(v, (str, bytes)) and getattr(v, "ndim", 1) == 0:
        return is_missing(v.item())
    return isinstance(v, (str, list, tuple, dict, set)) and len(v) == 0


def join_words(items: Sequence[str]) -> str:
    """a; a and b; a, b and c."""
    items = [str(x) for x in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def number(v: Any) -> str:
    """A value as a sentence writes it: ints plainly, floats without a repr, lists joined in words."""
    v = plain(v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "unbounded"
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}" if abs(v) >= 1e6 else str(v)
    if isinstance(v, (list, tuple)):
        return join_words([number(x) for x in v if not is_missing(x)])
    if isinstance(v, Mapping):
        raise TypeError("a dict cannot be written into a sentence; name its fields")
    return str(v)


def num(x: Any, spec: str = "g") -> str:
    """A table or sentence number; words when it is missing."""
    if is_missing(x):
        return "not measured"
    x = plain(x)
    return "unbounded" if isinstance(x, float) and math.isinf(x) else format(x, spec)
