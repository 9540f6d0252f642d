"""Templates and filling them: a template is a sequence of parts filled from a link's numbers.

A plain string part needs every number it names; an Opt is a clause that is
left out, or replaced by its `alt` words, when a number it names is missing
(None, NaN, empty). fill raises Missing when a plain part lacks a number, and
the caller says so in words rather than guessing.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.findings import plain
from analysis.kernel import SYN_RETRY_US, TCP_TIMEWAIT_LEN_S, TW_REUSE_AFTER_S

from .numbers import is_missing, number


@dataclass(frozen=True)
class Opt:
    """A clause rendered only when every number it names is there; else `alt` (which may name others)."""

    text: str
    alt: str = ""


Part = str | Opt

# Constants every template may name, besides the link's evidence.
CONSTANTS: dict[str, Any] = {
    "TIME_WAIT_S": TCP_TIMEWAIT_LEN_S,
    "SYN_RETRY_S": SYN_RETRY_US / 1e6,
    "TW_REUSE_AFTER_S": TW_REUSE_AFTER_S,
}


class Missing(Exception):
    """A number a part names is absent."""


class _Formatter(string.Formatter):
    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        try:
            obj, first = super().get_field(field_name, args, kwargs)
        except (KeyError, IndexError, TypeError, AttributeError):
            raise Missing(field_name) from None
        if is_missing(obj):
            raise Missing(field_name)
        return obj, first

    def format_field(self, value: Any, format_spec: str) -> str:
        value = plain(value)
        if format_spec and isinstance(value, (int, float)) and not isinstance(value, bool):
            return format(value, format_spec)
        return number(value)


_FMT = _Formatter()


def fill(parts: Sequence[Part] | str, values: Mapping[str, Any]) -> str:
    """Render template parts with values; raises Missing when a plain part lacks a number."""
    if isinstance(parts, str):
        parts = (parts,)
    ctx = {**values, **CONSTANTS}
    out = []
    for part in parts:
        if isinstance(part, Opt):
            for text in (part.text, part.alt):
                try:
                    out.append(_FMT.vformat(text, (), ctx))
                    break
                except Missing:
                    continue
        else:
            out.append(_FMT.vformat(part, (), ctx))
    return _tidy("".join(out))


def _tidy(text: str) -> str:
    text = re.sub(r"\s{2,}", " ", text).strip()
    return re.sub(r"\s+([.,;:)])", r"\1", text)
