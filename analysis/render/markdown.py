"""Markdown building blocks: the tables, headings, lists and images of every document render/ writes.

Each function returns a line or a list of lines; a document is its lines joined by newlines
(document()). Cell text is written as given: escape() what may hold a "|".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def heading(title: str, level: int = 2) -> list[str]:
    """A heading and the blank line after it."""
    return [f"{'#' * level} {title}", ""]


def row(cells: Iterable[object]) -> str:
    """One table row: | a | b |."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> list[str]:
    """A table: the header row, the rule under it, then one line per row."""
    return [row(header), "|" + "---|" * len(header), *(row(r) for r in rows)]


def records_table(records: Sequence[Mapping[str, Any]], cell: Callable[[Any], str] = str) -> list[str]:
    """A table of dicts: the first one's keys are the columns, each value written by cell()."""
    cols = list(records[0].keys())
    return table(cols, ([cell(r.get(c)) for c in cols] for r in records))


def bullets(items: Iterable[object], indent: int = 0) -> list[str]:
    """A bulleted list, indented by that many spaces (a list under a bullet: 2)."""
    return [f"{' ' * indent}- {x}" for x in items]


def numbered(items: Iterable[object]) -> list[str]:
    """A numbered list; every item is "1.", markdown counts."""
    return [f"1. {x}" for x in items]


def bold(text: object) -> str:
    return f"**{text}**"


def image(alt: str, target: object) -> str:
    return f"![{alt}]({target})"


def escape(text: str) -> str:
    """Text safe inside a table cell."""
    return text.replace("|", "\\|")


def document(lines: Iterable[str]) -> str:
    return "\n".join(lines)
