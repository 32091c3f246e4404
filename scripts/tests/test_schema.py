"""One schema (src/app/run_file_schema.json), three readers of it: docs/SCHEMA.md's field tables
are generated from it, and `ridgeline validate` and the package's validator both take their
structural view from it. Real files the binary wrote validate in both; the same file with each
object the schema requires taken away, one at a time and enumerated from the schema, is refused by
both with the same problems."""
import shutil
import sys

import h5py
import pytest
from numpy.lib import recfunctions

from conftest import REPO, ridgeline_validate, run_ridgeline
from ridgeline_analysis import schema, validate

sys.path.insert(0, str(REPO / "scripts"))
import schema_doc  # noqa: E402


def test_doc_tables_are_the_schemas():
    text = schema_doc.DOC.read_text(encoding="utf-8")
    assert schema_doc.generated(text) == text, "run python3 scripts/schema_doc.py"
    assert sorted(set(schema.TABLES) - set(schema_doc.block_ids(text))) == []


def test_doc_check_fails_on_a_changed_table(tmp_path, monkeypatch):
    changed = schema_doc.DOC.read_text(encoding="utf-8").replace(
        "| `t_end_ns` | int64 |", "| `t_end_ns` | int32 |")
    doc = tmp_path / "SCHEMA.md"
    doc.write_text(changed, encoding="utf-8")
    monkeypatch.setattr(schema_doc, "DOC", doc)
    assert schema_doc.main(["--check"]) == 1


def test_schema_names_only_what_it_defines():
    """Every condition an entry is required under is defined, every enum an attribute names
    exists, and no table, group or attribute list repeats a name."""
    conditions = set(schema.DATA["conditions"])
    required = [t.required for t in schema.TABLES.values()]
    required += [f.required for t in schema.TABLES.values() for f in t.fields]
    required += [a.required for _, attrs in schema.ATTRIBUTES.values() for a in attrs]
    required += [d.get("required", True) for d in schema.DATASETS.values()]
    assert {r for r in required if isinstance(r, str)} <= conditions
    assert {a.values for _, attrs in schema.ATTRIBUTES.values() for a in attrs} - {""} <= \
        set(schema.ENUMS)
    for table in schema.TABLES.values():
        names = [f.name for f in table.fields]
        assert len(names) == len(set(names)), table.path
    for path, attrs in schema.ATTRIBUTES.values():
        names = [a.name for a in attrs]
        assert len(names) == len(set(names)), path


# ---- both validators against the schema, on real files ----

def _both(path):
    """(`ridgeline validate`'s problems, the package's problems) of the file at `path`."""
    done = ridgeline_validate(path)
    cpp = [line.split(": ", 1)[1] for line in done.stderr.splitlines()]
    assert (done.returncode == 0) == (cpp == []), done.stderr
    return cpp, validate.problems(str(path))


@pytest.mark.parametrize("fixture", ["run_path", "overlap_run_path", "train_run_path",
                                     "decode_path", "sweep_path", "collectives_path"])
def test_written_files_validate_in_both(fixture, request):
    assert _both(request.getfixturevalue(fixture)) == ([], [])


def _held(f):
    """The schema's conditions the file `f` meets (as the validators decide them)."""
    kind = f.attrs.get("command", "run")
    held = {kind} if kind == "collectives" else {"envelope"}
    if "sweep" in f and "repeats" in f["sweep"].attrs:
        held.add("repeats")
    config = f["config"].attrs if "config" in f else {}
    if config.get("decode_steps", 0) > 0:
        held.add("decode")
    train = config.get("phase") == "train"
    if train or config.get("schedule"):
        held.add("pipeline")
        if train and config.get("pp", 1) > 1:
            held.add("pipeline-actions")
    return held


def _resolve(f, path):
    """`path` with its <...> segment standing for the first object of the file it names (a
    segment with a suffix, <name>_samples_ns, is not taken by its plain family); None where
    the file has none."""
    if "<" not in path:
        return path if path in f else None
    parent, rest = path.split("<", 1)
    suffix, _, tail = rest.split(">", 1)[1].partition("/")
    group = f.get(parent.rstrip("/") or "/")
    if not isinstance(group, h5py.Group):
        return None
    others = {t.path.split(">", 1)[1] for t in schema.TABLES.values()
              if t.path.startswith(parent) and ">" in t.path} - {suffix, ""}
    for child in group:
        if child.endswith(suffix) and not any(child.endswith(o) for o in others if o):
            found = f"{parent}{child}" + (f"/{tail}" if tail else "")
            return found if found in f else None
    return None


def _drop_field(f, path, name):
    table = f[path][()]
    kept = recfunctions.repack_fields(table[[n for n in table.dtype.names if n != name]])
    del f[path]
    f.create_dataset(path, data=kept)


def _required_objects(path):
    """Every object the schema requires that the real file at `path` holds, as (what, where,
    name): groups of its kind of file, required attributes, required datasets and the required
    fields of every table it holds (the first rank's timeline for the per-rank ones)."""
    with h5py.File(path, "r") as f:
        kind = f.attrs.get("command", "run")
        kind = kind.decode() if isinstance(kind, bytes) else kind
        held = _held(f)
        objects = [("group", g, "") for g in schema.FILES[kind]]
        for group_id, (where, _) in schema.ATTRIBUTES.items():
            if "<" in where or where not in f:
                continue
            objects += [("attribute", where, name)
                        for name in schema.required_attributes(group_id, held)
                        if "<" not in name]
        for dataset in schema.DATASETS.values():
            if schema.holds(dataset["required"], held) and dataset["path"] in f:
                objects.append(("dataset", dataset["path"], ""))
        for table in schema.TABLES.values():
            where = _resolve(f, table.path)
            if where is None:
                continue
            objects += [("field", where, field.name) for field in table.fields
                        if schema.holds(field.required, held)]
    return objects


def _remove(path, what, where, name):
    with h5py.File(path, "r+") as f:
        if what in ("group", "dataset"):
            del f[where]
        elif what == "attribute":
            del f[where].attrs[name]
        else:
            _drop_field(f, where, name)


@pytest.fixture(scope="module")
def collectives_path(tmp_path_factory):
    """A real two-rank `ridgeline collectives` file, sizes up to 1 KiB."""
    workdir = tmp_path_factory.mktemp("schema_collectives")
    run_ridgeline(workdir, "collectives", "--max-bytes", "1K", "--out", "coll.h5")
    return workdir / "coll.h5"


@pytest.fixture(scope="module")
def roofs_path(tmp_path_factory):
    """A real two-rank `ridgeline roofs --quick` file, with each rank's own figures."""
    workdir = tmp_path_factory.mktemp("schema_roofs")
    run_ridgeline(workdir, "roofs", "--quick", "--out", "roofs.h5")
    return workdir / "roofs.h5"


@pytest.fixture(scope="module")
def decode_path(tmp_path_factory):
    """A real two-rank TP=2 decode run of models/tiny.toml generating 2 tokens twice over."""
    workdir = tmp_path_factory.mktemp("schema_decode")
    run_ridgeline(workdir, "run", "--config", str(REPO / "models" / "tiny.toml"), "--tp", "2",
                  "--phase", "decode", "--context", "8", "--decode-steps", "2", "--iters", "4",
                  "--warmup", "1", "--roofs", "none", "--out", "steps.h5")
    return workdir / "steps.h5"


#: The real files the cases are enumerated from: each kind of file (roofs with each GPU's own
#: figures), and the run files whose configuration requires more (scheduled pipelines, decode
#: steps).
FILES = ("run_path", "train_run_path", "decode_path", "sweep_path", "collectives_path",
         "roofs_path")


@pytest.mark.parametrize("fixture", FILES)
def test_each_required_object_is_refused_by_both(fixture, request, tmp_path):
    """Each object the schema requires, taken out of a real file alone, makes both validators
    refuse the file with the same problems, one of which names the object."""
    source = request.getfixturevalue(fixture)
    objects = _required_objects(source)
    assert len(objects) > 10, objects
    failures = []
    for i, (what, where, name) in enumerate(objects):
        path = tmp_path / f"{i}.h5"
        shutil.copy(source, path)
        _remove(path, what, where, name)
        cpp, python = _both(path)
        label = f"{what} {where} {name}".strip()
        if not cpp or cpp != python or not any((name or where) in p for p in cpp):
            failures.append((label, cpp, python))
        path.unlink()
    assert failures == []
