"""Reading a run file as the C++ h5 helpers read it, for the package's validator (validate.py
and validate_results.py): objects read only as far as the file stores them, each value's type
class, and the generic checks of the schema's tables and attribute types (validate_table() and
check_attribute_types() in src/app/run_file_validate*.cpp).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import h5py
import numpy as np

from . import schema

#: Problems listed one by one per timeline before the rest are only counted.
MAX_ROW_PROBLEMS = 10
#: A dataset whose data passes through a filter (compression) may hold this many times the bytes
#: it stores (deflate's own limit is about 1032); an unfiltered one holds what it stores.
MAX_EXPANSION = 1100
#: Attributes of a known kind, checked in the schema's order: "int" (an integer), "count" (an
#: integer >= 1), "flag" (the integer 0 or 1), "number" (an integer or a float) or "text". What
#: the package reads is there, so that a value of another kind is refused before anything uses
#: it (never read as a default). Those the schema marks `code` have checks of their own.
AttrKinds = Dict[str, str]


class Problem(Exception):
    """An object that cannot be read as the layout says: one problem, ending its section."""


# ---- reading, as the C++ h5 helpers read ----


def _text(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _section(found: List[str], checks: Callable[[], None]) -> None:
    """Runs one group of checks; an exception becomes one more problem (check_section)."""
    try:
        checks()
    except Problem as e:
        found.append(str(e))
    except Exception as e:
        found.append(_text(e))


def _exists(f: h5py.File, path: str) -> bool:
    """Whether an object is at `path` (every group on the way must be a group)."""
    node: Any = f
    for part in path.strip("/").split("/"):
        if not isinstance(node, h5py.Group) or part not in node:
            return False
        node = node[part]
    return True


def _require(f: h5py.File, path: str, what: str, found: List[str]) -> bool:
    if _exists(f, path):
        return True
    found.append(f"{path}: missing {what}")
    return False


def _group(f: h5py.File, path: str) -> h5py.Group:
    obj = f[path] if _exists(f, path) else None
    if not isinstance(obj, h5py.Group):
        raise Problem(f"{path}: not a group")
    return obj


def _dataset(f: h5py.File, path: str) -> h5py.Dataset:
    obj = f[path] if _exists(f, path) else None
    if not isinstance(obj, h5py.Dataset):
        raise Problem(f"{path}: not a dataset")
    return obj


def type_class(dtype: np.dtype) -> Optional[str]:
    """"int", "float" or "string" (the HDF5 type classes the files use), else None."""
    if dtype.kind in "iu":
        return "int"
    if dtype.kind == "f":
        return "float"
    if dtype.kind == "S" or h5py.check_string_dtype(dtype) is not None:
        return "string"
    return None


def read_attrs(obj: h5py.HLObject, where: str) -> Dict[str, Any]:
    """The attributes of `obj`: each a single integer, float or string (else Problem)."""
    out: Dict[str, Any] = {}
    for name in obj.attrs:
        attr = obj.attrs.get_id(name)
        if attr.get_space().get_simple_extent_npoints() != 1:
            raise Problem(f"{where}: attribute '{name}' is not a single value")
        kind = type_class(attr.dtype)
        if kind is None:
            raise Problem(f"{where}: attribute '{name}' has an unsupported type (not integer, "
                          "float or string)")
        value = obj.attrs[name]
        if isinstance(value, np.ndarray):
            value = value.reshape(-1)[0]
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, np.generic):
            value = value.item()
        out[name] = value
    return out


def storage_problem(dataset: h5py.Dataset, path: str) -> Optional[str]:
    """Why `dataset` cannot be read whole in memory bounded by the file: its shape asks for
    more bytes than the file stores for it (a dataset declared large but never written, or
    data that would expand beyond MAX_EXPANSION); None when it can."""
    if dataset.shape is None:
        return None
    elements = 1
    for extent in dataset.shape:
        elements *= int(extent)
    needed = elements * dataset.dtype.itemsize
    if needed == 0:
        return None
    plist = dataset.id.get_create_plist()
    if plist.get_layout() == h5py.h5d.COMPACT:  # held in the object header, at most 64 KiB
        return None
    stored = int(dataset.id.get_storage_size())
    if needed <= stored * (MAX_EXPANSION if plist.get_nfilters() else 1):
        return None
    what = f"{elements} rows" if len(dataset.shape) == 1 else f"{elements} values"
    return f"{path}: {what} declared but only {stored} of their {needed} bytes stored"


def _rows(dataset: h5py.Dataset, path: str) -> int:
    """The rows of a 1-D dataset that the file really holds (else Problem), so that reading it
    allocates no more than the file stores."""
    if dataset.shape is None or len(dataset.shape) != 1:
        rank = 0 if dataset.shape is None else len(dataset.shape)
        raise Problem(f"{path}: expected a 1-D dataset, found rank {rank}")
    problem = storage_problem(dataset, path)
    if problem is not None:
        raise Problem(problem)
    return int(dataset.shape[0])


def read_vector(f: h5py.File, path: str, kind: str) -> np.ndarray:
    """A 1-D dataset of numbers of type class `kind` ("int" or "float")."""
    dataset = _dataset(f, path)
    _rows(dataset, path)
    if type_class(dataset.dtype) != kind:
        raise Problem(f"{path}: unexpected element type")
    return dataset[()]


def read_table(f: h5py.File, path: str) -> np.ndarray:
    """A 1-D compound dataset whose fields are integers, floats and strings."""
    dataset = _dataset(f, path)
    _rows(dataset, path)
    names = dataset.dtype.names
    if not names:
        raise Problem(f"{path}: not a compound dataset")
    for name in names:
        if type_class(dataset.dtype[name]) is None:
            raise Problem(f"{path}: field '{name}' has an unsupported type (not integer, float "
                          "or string)")
    return dataset[()]


def column(table: np.ndarray, name: str, kind: str, where: str) -> np.ndarray:
    """Field `name` of type class `kind`, else Problem."""
    if name not in (table.dtype.names or ()):
        raise Problem(f"{where}: missing field '{name}'")
    if type_class(table.dtype[name]) != kind:
        raise Problem(f"{where}: field '{name}' has an unexpected type")
    values = table[name]
    if kind == "string":
        values = np.array([v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                           for v in values], dtype=object)
    return values


def _number(value: float) -> str:
    return f"{value:g}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number_attr(attrs: Dict[str, Any], key: str, where: str) -> float:
    value = attrs[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Problem(f"{where}: attribute '{key}' is not a number")


def _attr_text(value: Any) -> str:
    """A value as attr_to_string() in src/app/run_data.cpp writes it (floats as %.6g)."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _found(value: Any) -> str:
    """"the string 'x'" or "the number 2", as validate_config() says what it found."""
    if isinstance(value, str):
        return f"the string '{value}'"
    return f"the number {_attr_text(value)}"


def attr_problem(value: Any, key: str, kind: str, where: str) -> Optional[str]:
    """Why attribute `key` (`value`, as read_attrs() reads it) is not of `kind` (see
    ROOT_KINDS), worded as validate_config() in src/app/run_file_validate.cpp words it; None when it
    is."""
    if kind == "text":
        if isinstance(value, str):
            return None
        return f"{where}: {key} must be a string, found {_attr_text(value)}"
    if kind == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        return f"{where}: {key} must be a number, found {_found(value)}"
    if kind not in ("int", "count", "flag"):
        raise ValueError(f"unknown attribute kind {kind!r}")
    if not _is_int(value):
        return f"{where}: {key} must be an integer, found {_found(value)}"
    if kind == "count" and value < 1:
        return f"{where}: {key} must be an integer >= 1, found {value}"
    if kind == "flag" and value not in (0, 1):
        return f"{where}: {key} must be 0 or 1, found {value}"
    return None


def _check_kinds(attrs: Dict[str, Any], where: str, kinds: AttrKinds, found: List[str]) -> None:
    """Every attribute of a known kind is of that kind, in the order of `kinds`; a name with
    <...> stands for every attribute starting with what comes before it
    (check_attribute_types() in src/app/run_file_validate.cpp)."""
    checks = []
    for name, kind in kinds.items():
        family = name.find("<")
        if family < 0:
            checks += [(name, kind)] if name in attrs else []
        else:
            checks += [(key, kind) for key in attrs if key.startswith(name[:family])]
    for key, kind in checks:
        problem = attr_problem(attrs[key], key, kind, where)
        if problem is not None:
            found.append(problem)


def _require_attrs(attrs: Dict[str, Any], where: str, keys: Sequence[str],
                   found: List[str]) -> None:
    for key in keys:
        if key not in attrs:
            found.append(f"{where}: missing attribute '{key}'")


def _table(f: h5py.File, path: str, spec: schema.Table, held: Sequence[str],
           found: List[str]) -> Optional[np.ndarray]:
    """The table at `path` against `spec` (validate_table()): each field it requires (always, or
    by a condition in `held`) missing or of another class is a problem, an optional one only
    where present. The table when every required field is there, else None."""
    if not _require(f, path, "dataset", found):
        return None
    table = read_table(f, path)
    names = table.dtype.names or ()
    complete = True
    for field in spec.fields:
        required = schema.holds(field.required, held)
        if field.name not in names:
            if required:
                found.append(f"{path}: missing field {field.name}" if spec.names_only
                             else f"{path}: missing field '{field.name}'")
                complete = False
        elif (not spec.names_only and field.value_class != "any"
              and type_class(table.dtype[field.name]) != field.value_class):
            found.append(f"{path}: field '{field.name}' has an unexpected type")
            complete = False
    return table if complete else None
