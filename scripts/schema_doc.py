"""docs/SCHEMA.md's field tables, generated from the run file's schema
(src/app/run_file_schema.json): every table between a `<!-- schema: ID -->` line and the next
`<!-- /schema -->` line is the schema's table (or attribute group) ID.

    python3 scripts/schema_doc.py          # rewrites the tables in docs/SCHEMA.md
    python3 scripts/schema_doc.py --check  # exit 1 where the doc differs from the schema
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from ridgeline_analysis import schema

DOC = Path(__file__).resolve().parents[1] / "docs" / "SCHEMA.md"
BLOCK = re.compile(r"(<!-- schema: (?P<id>[a-z_]+) -->\n)(?P<body>.*?)(<!-- /schema -->)", re.S)


def _required(required: schema.Required) -> str:
    if required is True:
        return "yes"
    if required is False:
        return "no"
    return schema.DATA["conditions"][required]


def _row(cells: List[str]) -> str:
    return " ".join(["|"] + [f"{cell} |" if cell else "|" for cell in cells])


def table_markdown(table_id: str) -> str:
    """The markdown table of a table's fields: name, type, unit (where any field has one),
    required (where any field is not always required) and meaning."""
    entries: List[Dict[str, Any]] = list(schema.TABLES[table_id].entries)
    units = any("unit" in e for e in entries)
    optional = any(e.get("required", True) is not True for e in entries)
    header = ["field", "type"] + (["unit"] if units else []) + \
        (["required"] if optional else []) + ["meaning"]
    lines = [_row(header), _row(["---"] * len(header))]
    for e in entries:
        cells = [", ".join(f"`{n}`" for n in schema.names_of(e)), e["dtype"]]
        cells += [e.get("unit", "")] if units else []
        cells += [_required(e.get("required", True))] if optional else []
        lines.append(_row(cells + [e.get("doc", "")]))
    return "\n".join(lines) + "\n"


_TYPES = {"int": "int64", "count": "int64 (>= 1)", "flag": "int64 (0 or 1)",
          "number": "float64", "text": "string"}


def attributes_markdown(group_id: str) -> str:
    """The markdown table of an attribute group's documented attributes."""
    attrs = [a for a in schema.DATA["attributes"] if a["id"] == group_id][0]["attributes"]
    lines = [_row(["attribute", "type", "required", "meaning"]), _row(["---"] * 4)]
    for a in attrs:
        if "doc" in a:
            lines.append(_row([f"`{a['name']}`", _TYPES[a["type"]],
                               _required(a.get("required", True)), a["doc"]]))
    return "\n".join(lines) + "\n"


def render(block_id: str) -> str:
    if block_id in schema.TABLES:
        return table_markdown(block_id)
    if block_id in schema.ATTRIBUTES:
        return attributes_markdown(block_id)
    raise KeyError(f"docs/SCHEMA.md names {block_id!r}, which the schema does not have")


def generated(text: str) -> str:
    """`text` (docs/SCHEMA.md) with every schema block rendered from the schema."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("id")) + m.group(4), text)


def block_ids(text: str) -> List[str]:
    return [m.group("id") for m in BLOCK.finditer(text)]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 where docs/SCHEMA.md's tables differ from the schema")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    new = generated(text)
    if args.check:
        if new != text:
            print(f"{DOC}: the field tables differ from src/app/run_file_schema.json; run "
                  "python3 scripts/schema_doc.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
