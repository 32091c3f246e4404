"""The run file's schema as data: run_file_schema.json (src/app/run_file_schema.json, shipped in
this package), from which the C++ validator's tables and docs/SCHEMA.md's field tables are also
made. validate.py takes every group, dataset, table field, attribute and enum it checks from here.
"""
from __future__ import annotations

import json
from importlib import resources
from typing import Any, Dict, Iterable, List, NamedTuple, Tuple, Union

#: `required` of an entry: True, False (checked where present) or the condition requiring it.
Required = Union[bool, str]


class Field(NamedTuple):
    name: str
    dtype: str  #: as stored: int32, uint8, int64, float64, string
    value_class: str  #: "int", "float" or "string"
    required: Required
    positive: bool


class Table(NamedTuple):
    id: str
    path: str
    required: Required
    names_only: bool  #: fields checked for presence only, not for their type
    fields: Tuple[Field, ...]
    entries: Tuple[Dict[str, Any], ...]  #: as in the JSON (a row of the doc's table each)


class Attribute(NamedTuple):
    name: str
    type: str  #: int, count, flag, number or text
    required: Required
    code: bool  #: checked by code of its own (or for presence only), not by type
    values: str  #: the enum it comes from, or ""


def _value_class(dtype: str) -> str:
    if dtype.startswith(("int", "uint")):
        return "int"
    if dtype.startswith("float"):
        return "float"
    return "string" if dtype == "string" else "any"


def names_of(entry: Dict[str, Any]) -> List[str]:
    """The names of a field entry: its `name`, a string or a list of them."""
    name = entry["name"]
    return list(name) if isinstance(name, list) else [name]


def _load() -> Dict[str, Any]:
    text = resources.files(__package__).joinpath("run_file_schema.json").read_text("utf-8")
    return json.loads(text)


DATA = _load()
VERSION: int = DATA["schema_version"]
#: The groups each kind of file (root attribute `command`; run files: "run") must have.
FILES: Dict[str, Tuple[str, ...]] = {kind: tuple(groups) for kind, groups in DATA["files"].items()}
ENUMS: Dict[str, Tuple[str, ...]] = {name: tuple(v) for name, v in DATA["enums"].items()}
TABLES: Dict[str, Table] = {
    t["id"]: Table(t["id"], t["path"], t.get("required", True), t.get("check") == "names",
                   tuple(Field(name, e["dtype"], _value_class(e["dtype"]), e.get("required", True),
                               bool(e.get("positive", False)))
                         for e in t["fields"] for name in names_of(e)),
                   tuple(t["fields"]))
    for t in DATA["tables"]}
DATASETS: Dict[str, Dict[str, Any]] = {d["id"]: d for d in DATA["datasets"]}
#: Attribute groups by id: (path, attributes in order).
ATTRIBUTES: Dict[str, Tuple[str, Tuple[Attribute, ...]]] = {
    g["id"]: (g["path"], tuple(Attribute(a["name"], a["type"], a.get("required", True),
                                         bool(a.get("code", False)), a.get("values", ""))
                               for a in g["attributes"]))
    for g in DATA["attributes"]}


def holds(required: Required, held: Iterable[str] = ()) -> bool:
    """Whether `required` asks for the object: always, or by a condition in `held`."""
    return required is True or (isinstance(required, str) and required in held)


def field_names(table: str, *wanted: str) -> Tuple[str, ...]:
    """The fields of `table` (an id), or the `wanted` ones, each checked to be in the schema."""
    names = tuple(f.name for f in TABLES[table].fields)
    for name in wanted:
        if name not in names:
            raise KeyError(f"{TABLES[table].path} has no field {name!r} in the schema")
    return wanted or names


def attr_names(group: str, *wanted: str) -> Tuple[str, ...]:
    """The attributes of `group` (an id), or the `wanted` ones, each checked to be in the schema."""
    names = tuple(a.name for a in ATTRIBUTES[group][1])
    for name in wanted:
        if name not in names:
            raise KeyError(f"{ATTRIBUTES[group][0]} has no attribute {name!r} in the schema")
    return wanted or names


def required_attributes(group: str, held: Iterable[str] = ()) -> Tuple[str, ...]:
    """The attributes of `group` that must be present: always, or by a condition in `held`."""
    held = tuple(held)
    return tuple(a.name for a in ATTRIBUTES[group][1] if holds(a.required, held))


def attributes_required_by(group: str, condition: str) -> Tuple[str, ...]:
    """The attributes of `group` that `condition` alone requires."""
    return tuple(a.name for a in ATTRIBUTES[group][1] if a.required == condition)


def typed_attributes(group: str) -> Dict[str, str]:
    """The attributes of `group` whose type is checked generically (not `code`): name -> type.
    A name with <...> stands for every attribute starting with what comes before it."""
    return {a.name: a.type for a in ATTRIBUTES[group][1] if not a.code}


def attribute(group: str, name: str) -> Attribute:
    for a in ATTRIBUTES[group][1]:
        if a.name == name:
            return a
    raise KeyError(f"{ATTRIBUTES[group][0]} has no attribute {name!r} in the schema")


def one_of(values: Iterable[str]) -> str:
    """"a, b or c", as a problem names an enum's values."""
    values = list(values)
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
