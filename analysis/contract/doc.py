"""docs/data-contract.md, generated from the contract (``python -m analysis schema-doc``)."""

from __future__ import annotations

from .columns import COMM_TEXT, Table
from .derived_tables import DERIVED_TABLES
from .json_docs import JSON_DOCS, JSON_RULES, JsonDoc
from .legacy import ABSENT_IN_CONTRACT, LEGACY_TABLES
from .tables import CONTRACT_VERSION, CSV_RULES, GAUGE_COUNTERS, SYSCTL_FORMAT_TEXT, SYSCTL_FORMATS, TABLES
from .verdict_thresholds import LOOP_THRESHOLDS


def schema_doc() -> str:
    """Markdown for docs/data-contract.md, generated from TABLES, DERIVED_TABLES, LEGACY_TABLES and JSON_DOCS."""
    out = _intro()
    for t in [*TABLES.values(), *DERIVED_TABLES.values()]:
        out += _table_section(t)
    out += _legacy_sections()
    out += _thresholds_section()
    out += ["# JSON files", "", *JSON_RULES, ""]
    for d in JSON_DOCS.values():
        out += _json_section(d)
    return "\n".join(out)


def _intro() -> list[str]:
    return [
        "# Data contract",
        "",
        "Generated from `analysis/contract/` by `python -m analysis schema-doc`; do not edit by hand.",
        f"Contract version: **{CONTRACT_VERSION}** (recorded as `data_contract` in each run's `metadata.json`).",
        "",
        "Every file is CSV with a header row. Times are wall-clock epoch seconds unless a column says otherwise.",
        "",
        "## How a CSV file is read",
        "",
        *[f"- {r}" for r in CSV_RULES],
        "",
        "Text fields that can hold any byte but NUL (`comm`): " + COMM_TEXT + ".",
        "",
        "How they are made safe (escaped, not replaced): bpftrace 0.17 has no string functions, so the "
        "probes print `comm` raw in their own output (`probe_<family>.out`), and `ss -p` does the same. "
        "`comm` is the only free-text field of any record, so `collector/probe-to-csv` and "
        "`collector/sample-netns` recover it by position (in a map key: the key columns before the first "
        "counter column; a line cut by a newline in it is joined to the next) and write it quoted as "
        "above. The raw probe output is therefore not CSV to be read directly; the run directory's "
        "files are. Addresses (`ntop()`) and numbers cannot hold a comma or a quote.",
        "",
    ]


def _table_section(t: Table) -> list[str]:
    out = [
        f"## `{t.file}` (v{t.version})",
        "",
        f"{t.description} Written by `{t.writer}`." + (" Optional." if t.optional else ""),
        "",
        "| column | type | meaning |",
        "|---|---|---|",
    ]
    for c in t.columns:
        kind = {"Int64": "int", "float64": "float", "string": "text"}[c.dtype]
        out.append(f"| `{c.name}` | {kind}{' or empty' if c.nullable else ''} | {c.description} |")
    out.append("")
    if t.key:
        out += [f"Key (no two rows share it): {', '.join(f'`{k}`' for k in t.key)}.", ""]
    return out + _table_notes(t)


def _table_notes(t: Table) -> list[str]:
    """What the loader checks of a table beyond its columns."""
    if t.name == "counters":
        return [
            "`delta` must equal `value` minus the previous `value` of the same (`netns`, `counter`), and is "
            "empty exactly on a counter's first row; a negative delta is allowed only for the gauges "
            + ", ".join(sorted(GAUGE_COUNTERS))
            + ".",
            "",
        ]
    if t.name == "sysctls":
        out = ["Value formats the analysis relies on:", "", "| key | value |", "|---|---|"]
        out += [f"| `{k}` | {SYSCTL_FORMAT_TEXT[v]} |" for k, v in SYSCTL_FORMATS.items()]
        return [*out, ""]
    return []


def _legacy_sections() -> list[str]:
    out: list[str] = []
    for contract, tables in LEGACY_TABLES.items():
        absent = ", ".join(f"`{TABLES[n].file}`" for n in sorted(ABSENT_IN_CONTRACT.get(contract, ())))
        out += [
            f"## Runs of contract {contract}",
            "",
            *([f"Not written then, read as empty: {absent}.", ""] if absent else []),
            "Still read. These tables were laid out differently then; each is checked against its old "
            "definition, then given today's columns as its description above says: "
            + ", ".join(
                f"`{lg.table.file}` v{lg.table.version} ({', '.join(lg.table.column_names)})" for lg in tables.values()
            )
            + ".",
            "",
        ]
    return out


def _json_section(d: JsonDoc) -> list[str]:
    out = [
        f"## `{d.file}` (schema v{d.version})",
        "",
        f"{d.description} Written by `{d.writer}`.",
        "",
        "| key | type | meaning |",
        "|---|---|---|",
    ]
    out += [f"| `{path}` | {kind} | {desc} |" for path, kind, desc in _json_rows(d.schema, "")]
    out.append("")
    return out


def _json_rows(schema: dict, path: str) -> list[tuple[str, str, str]]:
    """(key path, type, meaning) rows for the doc, depth first."""
    rows: list[tuple[str, str, str]] = []
    required = set(schema.get("required", []))
    for key, sub in schema.get("properties", {}).items():
        p = f"{path}.{key}" if path else key
        rows.append((p, _json_kind(sub, key in required), _json_desc(sub)))
        rows += _json_children(sub, p)
    return rows


def _json_children(sub: dict, p: str) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if sub.get("properties"):
        rows += _json_rows(sub, p)
    extra = sub.get("additionalProperties")
    if isinstance(extra, dict):
        rows.append((f"{p}.*", _json_kind(extra, True), _json_desc(extra)))
        rows += _json_children(extra, f"{p}.*")
    items = sub.get("items")
    if isinstance(items, dict) and items.get("properties"):
        rows += _json_rows(items, f"{p}[]")
    return rows


def _json_kind(sub: dict, required: bool) -> str:
    kinds = sub.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    text = " or ".join(kinds)
    items = sub.get("items")
    if "array" in kinds and isinstance(items, dict) and "type" in items and not items.get("properties"):
        text = text.replace("array", f"array of {items['type']}")
    return text + ("" if required else " (optional)")


def _json_desc(sub: dict) -> str:
    d = sub.get("description", "")
    bounds = []
    if "enum" in sub:
        bounds.append("one of " + ", ".join(f"`{e}`" for e in sub["enum"]))
    if "const" in sub:
        bounds.append(f"= {sub['const']}")
    if "minimum" in sub and "maximum" in sub:
        bounds.append(f"{sub['minimum']}..{sub['maximum']}")
    elif "minimum" in sub:
        bounds.append(f">= {sub['minimum']}")
    if "pattern" in sub:
        bounds.append(f"matches `{sub['pattern']}`")
    if "minItems" in sub:
        bounds.append(f"at least {sub['minItems']}")
    return d + (f" ({'; '.join(bounds)})" if bounds else "")


def _thresholds_section() -> list[str]:
    out = [
        "# Verdict thresholds",
        "",
        "An event loop that never waits, judged over its busy window (from the end of its first `ep_loop.csv` "
        "interval with events to the start of its last) with the scheduler's clocks of `threads.csv` "
        "(analysis/rules/epoll/verdicts.py):",
        "",
        "| threshold | value | meaning |",
        "|---|---|---|",
    ]
    out += [f"| `{t.name}` | {t.value:g} | {t.meaning} |" for t in LOOP_THRESHOLDS]
    return [*out, ""]
