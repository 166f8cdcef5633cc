"""Typed output by table: one Parquet dataset (a directory of parts) per table.

Each table's rows go to ``DIR/<table>/``, with ``before`` / ``after`` typed with the table's
columns (the mapping of docs/typed.md) and the change metadata of :func:`walcdc.read_changes`.
Every part of a table has the same schema: ``before`` / ``after`` are structs of every column
the table has had (the union of its representations, by name: a column dropped by ALTER stays,
null in later rows; a column added later is null in earlier rows; a type that cannot hold
another type's values gets a column of its own, ``name#2``), so that any Parquet reader reads
the directory as one table. A run knows the union from the log's class records before it
writes; when it finds columns the table's earlier parts lack (an ALTER after the previous run),
it rewrites those parts with them (beside themselves, then renamed) before the cursor moves.

A run adds one part per table and representation (an ALTER starts a new part); after a RENAME
TABLE, the table's rows go to the directory of its new name. A part is named by the
commit LSA of its first row and the representation id, so a run repeated from the same cursor
(after a crash before the cursor was saved) writes parts of the same names again, replacing
them, however far it reads. Each part records the run that wrote it (``walcdc.run_from``: the
cursor it started from, or ``beginning``; ``walcdc.run_options``: a digest of the options that
chose what was read): a part of another run, or with rows the new one lacks, is never replaced
without ``overwrite``. DDL that belongs to no table (users, grants, ...) goes to
``DIR/_ddl/``; changes of tables whose schema the log does not hold (created before its oldest
volume; give ``schema=``) to ``DIR/_unknown_schema/``, with their raw images.

Reading a table's history across parts: ``pyarrow.parquet.read_table(DIR/<table>)``,
``pyarrow.dataset.dataset(DIR/<table>)``, ``polars.read_parquet("DIR/<table>/*.parquet")``,
DuckDB's ``read_parquet('DIR/<table>/*.parquet')``: no option for differing schemas is needed.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Set, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from walcdc import lsa as L
from walcdc.errors import OutputError, argument_error
from walcdc.sinks.base import (
    WriteResult,
    _count,
    _create_temp,
    _error,
    _fsync_dir,
    _remove,
    run_metadata,
)
from walcdc.sinks.loop import Writer, deliver
from walcdc.table_changes import table_schema

__all__ = ["OTHER_DDL", "UNKNOWN_SCHEMA", "table_directory", "write_tables"]

#: The directory of DDL that belongs to no table.
OTHER_DDL = "_ddl"
#: The directory of changes of tables whose schema the log does not hold.
UNKNOWN_SCHEMA = "_unknown_schema"


def table_directory(name: str) -> str:
    """The directory of a table: its owner-qualified name with every character that is not a
    letter, a digit, ``.``, ``-`` or ``_`` (or a leading ``.`` or ``_``) written ``%XX`` as
    UTF-8 bytes, so that no two names share a directory, none is hidden, and none is that of
    :data:`OTHER_DDL` or :data:`UNKNOWN_SCHEMA`.

    >>> table_directory("dba.t_orders"), table_directory("dba.a b"), table_directory("_ddl")
    ('dba.t_orders', 'dba.a%20b', '%5Fddl')
    """
    out = []
    for i, c in enumerate(name):
        if (c.isalnum() or c in "._-") and not (i == 0 and c in "._"):
            out.append(c)
        else:
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8")))
    return "".join(out) or "%00"


@dataclass
class _Part:
    directory: str
    tmp_path: str
    writer: Optional[pq.ParquetWriter]
    table: Optional[str]
    repid: int
    schema: Optional[pa.Schema] = None  # the stream's batches
    first: Optional[int] = None
    last: Optional[int] = None
    rows: int = 0
    written: Optional[pa.Schema] = None  # the file's
    slots: Optional[List[int]] = None  # a table's part: each column's place among the table's

    def name(self) -> str:
        page, offset = L.split(self.first)
        rep = f"-r{self.repid}" if self.repid >= 0 else ""
        return f"part-{page:012d}_{offset:05d}{rep}.parquet"


#: The columns that hold a table's rows, as structs of its columns.
VALUES = ("before", "after")


@dataclass
class _Dataset:
    """A table's directory: the columns every part of it has (``fields``, in Parquet's form),
    the parts earlier runs left there (and their schemas), the tables (class OIDs) whose
    representations were merged into ``fields``."""

    fields: List[pa.Field]
    existing: Dict[str, pa.Schema]
    classes: Set[int] = field(default_factory=set)

    @classmethod
    def read(cls, directory: str) -> _Dataset:
        existing: Dict[str, pa.Schema] = {}
        try:
            names = sorted(os.listdir(directory))
        except FileNotFoundError:
            names = []
        except OSError as exc:
            raise _error(f"{{}}: cannot read {directory}: {exc.strerror}") from None
        fields: List[pa.Field] = []
        for name in names:
            if name.startswith("part-") and name.endswith(".parquet"):
                path = os.path.join(directory, name)
                try:
                    existing[path] = pq.read_schema(path)
                except (OSError, pa.ArrowException) as exc:
                    raise _error(f"{{}}: cannot read the part {path}: {exc}") from None
                fields = _merge(fields, _value_fields(existing[path]))
        return cls(fields, existing)

    def take(self, class_oid: int, schema: pa.Schema, representations) -> tuple:
        """A new part of table ``class_oid`` whose batches have ``schema``: where its value
        columns go among the dataset's (``slots``) and the schema it is written with, which has
        every column the table has had (its representations, then what earlier parts hold)."""
        if class_oid not in self.classes:
            self.classes.add(class_oid)
            for columns in representations.get(class_oid, ()):
                self.fields = _merge(self.fields, _value_fields(_stored(table_schema(columns))))
        stored = _stored(schema)
        self.fields = _merge(self.fields, _value_fields(stored))
        slots = [_slot(self.fields, c) for c in _value_fields(stored)]
        return slots, _with_values(stored, self.fields)


def _stored(schema: pa.Schema) -> pa.Schema:
    """``schema`` as a Parquet file gives it back (seconds as milliseconds, list items named
    ``element``, ...): the form in which parts are written and their schemas compared."""
    buf = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buf)
    return pq.read_schema(pa.BufferReader(buf.getvalue()))


def _value_fields(schema: pa.Schema) -> List[pa.Field]:
    """The table's columns in a schema of its changes (``before`` and ``after`` have the same)."""
    out: List[pa.Field] = []
    for name in VALUES:
        if name in schema.names:
            out = _merge(out, schema.field(name).type)
    return out


def _wider(a: pa.DataType, b: pa.DataType) -> Optional[pa.DataType]:
    """The type that holds every value of ``a`` and of ``b`` exactly, if there is one of these:
    the same type, the wider of two integers or of two floats, a decimal with the integer
    digits and the scale of both. None otherwise."""
    if a.equals(b):
        return a
    for kind in (pa.types.is_signed_integer, pa.types.is_floating):
        if kind(a) and kind(b):
            return a if a.bit_width >= b.bit_width else b
    if pa.types.is_decimal128(a) and pa.types.is_decimal128(b):
        scale = max(a.scale, b.scale)
        precision = max(a.precision - a.scale, b.precision - b.scale) + scale
        return pa.decimal128(precision, scale) if precision <= 38 else None
    return None


def _family(name: str) -> str:
    """The column name of a column per type (``n#2`` is ``n``'s second type)."""
    base, sep, k = name.rpartition("#")
    return base if sep and k.isdigit() else name


def _slot(fields: List[pa.Field], column: pa.Field) -> Optional[int]:
    """Which of ``fields`` holds the values of ``column``: the one of its name, else one of its
    columns per type, whose type can hold them."""
    for exact in (True, False):
        for i, f in enumerate(fields):
            same = f.name == column.name if exact else _family(f.name) == column.name
            if same and _wider(f.type, column.type) is not None:
                return i
    return None


def _merge(fields: List[pa.Field], columns: Iterable[pa.Field]) -> List[pa.Field]:
    """``fields`` with ``columns`` merged in by name: a known name keeps its place, its type
    widened to hold both (:func:`_wider`); a type it cannot hold gets a column of its own,
    ``name#2``, ``name#3``, ...; a new name is added at the end. Existing fields never move,
    so the parts written with ``fields`` need only columns added or widened."""
    out = list(fields)
    for column in columns:
        column = column.with_nullable(True)  # rows of other representations have no value
        i = _slot(out, column)
        if i is not None:
            out[i] = out[i].with_type(_wider(out[i].type, column.type))
            continue
        n = sum(_family(f.name) == column.name for f in out)
        out.append(column.with_name(f"{column.name}#{n + 1}") if n else column)
    return out


def _has_values(schema: pa.Schema, fields: List[pa.Field]) -> bool:
    """Whether ``before`` / ``after`` of ``schema`` are structs of ``fields``, in order."""
    return pa.struct(_value_fields(schema)).equals(pa.struct(fields))


def _with_values(schema: pa.Schema, fields: List[pa.Field]) -> pa.Schema:
    """``schema`` with ``before`` / ``after`` structs of ``fields``."""
    for name in VALUES:
        if name in schema.names:
            i = schema.get_field_index(name)
            schema = schema.set(i, schema.field(i).with_type(pa.struct(fields)))
    return schema


def _conform(batch: pa.RecordBatch, schema: pa.Schema, slots: List[int]) -> pa.RecordBatch:
    """``batch`` (of the same columns) in ``schema``: each of its table's columns at its slot
    in ``before`` / ``after`` (the others null), every value cast to its column's type (exact:
    the same type in Parquet's form, or a wider one)."""
    arrays = []
    for f, column in zip(schema, batch.columns):
        if f.name not in VALUES:
            arrays.append(column.cast(f.type))
            continue
        fields = list(f.type)
        children = [pa.nulls(len(column), c.type) for c in fields]
        for slot, child in zip(slots, column.flatten()):
            children[slot] = child.cast(fields[slot].type)
        arrays.append(pa.StructArray.from_arrays(children, fields=fields, mask=column.is_null()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _rewrite(path: str, fields: List[pa.Field], temps: List[str]) -> str:
    """A copy of the part ``path``, with ``before`` / ``after`` of ``fields``, in a new
    temporary file beside it (its rows, values and key/value metadata kept); returns its path."""
    directory = os.path.dirname(path)
    try:
        meta = pq.read_metadata(path).metadata or {}
        with pq.ParquetFile(path) as source:
            stored = source.schema_arrow
            schema = _with_values(stored, fields).with_metadata(
                {k: v for k, v in meta.items() if k != b"ARROW:schema"}
            )
            slots = [_slot(fields, c) for c in _value_fields(stored)]
            fd = _create_temp(directory, temps)
            os.close(fd)
            with pq.ParquetWriter(temps[-1], schema) as writer:
                for batch in source.iter_batches():
                    writer.write_batch(_conform(batch, schema, slots))
    except (OSError, pa.ArrowException) as exc:
        raise _error(f"{{}}: cannot rewrite {path} with the table's new columns: {exc}") from None
    return temps[-1]


def _positions(batch: pa.RecordBatch):
    """The first and last commit LSA of a batch (an event's own LSA where it has none, such
    as the markers of an aborted transaction)."""
    at = pc.coalesce(batch.column("commit_lsa"), batch.column("lsa")).drop_null()
    if len(at) == 0:
        return None, None
    return at[0].as_py(), at[-1].as_py()


def write_tables(
    stream,
    directory,
    *,
    overwrite: bool = False,
    cursor_file=None,
    on_batch: Optional[Callable[[pa.RecordBatch], None]] = None,
) -> WriteResult:
    """Writes a committed change stream opened by table (:func:`walcdc.read_changes_by_table`)
    into ``directory``, one Parquet dataset per table, makes every part durable, and only then
    saves the stream's cursor to ``cursor_file``. On failure the unpublished parts are removed
    and the cursor is left as it was.

    A part of the same name as an existing one replaces it only if the existing part was
    written by the same run (the same starting cursor and options: a run repeated after a
    crash) and holds no row the new one lacks, or with ``overwrite``; otherwise the run is an
    :class:`~walcdc.OutputError` naming the file, and writes nothing."""
    writer = TablesWriter(os.fspath(directory), stream, overwrite)
    save = None if cursor_file is None else (lambda cursor: cursor.save(cursor_file))
    each = None if on_batch is None else (lambda item: on_batch(item.batch))
    deliver(stream, writer, save, each)
    writer.result.summary = dict(writer.summary)
    return writer.result


#: What says which run wrote a part.
_RUN_KEYS = ("walcdc.run_from", "walcdc.run_options")


class TablesWriter(Writer):
    """The parts of one run of :func:`write_tables`: a part per table and representation,
    published together when the stream ends, with every part of a table given the table's
    columns as they are then."""

    def __init__(self, directory: str, stream, overwrite: bool):
        _make_directory(directory)
        info = dict(stream.info)
        self.directory, self.overwrite = directory, overwrite
        # The run that wrote a part (who may replace it) with the metadata of every run.
        run = {k: str(info.get(k[len("walcdc.") :], "")) for k in _RUN_KEYS}
        self.base_meta = run_metadata({**info, "committed_only": True}, **run)
        self.result = WriteResult()
        self.summary: Counter = Counter()
        self.representations = getattr(stream, "representations", None) or {}
        self.datasets: Dict[str, _Dataset] = {}  # by table directory
        self.open_parts: Dict[Union[int, str], _Part] = {}
        self.parts: list = []  # every part begun, open or closed
        self.temps: List[str] = []  # their temporary files: what a failure removes

    def write(self, item) -> None:
        batch = item.batch
        part = self._part_for(item)
        first, last = _positions(batch)
        part.first = first if part.first is None else part.first
        part.last = last if last is not None else part.last
        part.rows += batch.num_rows
        if part.slots is not None:
            batch = _conform(batch, part.written, part.slots)
        part.writer.write_batch(batch)
        self.result.took(batch.num_rows, first, last)
        _count(item.batch, self.summary)

    def _part_for(self, item) -> _Part:
        """The open part of an item's table (or kind), a new one when its representation, name
        or columns changed (the reader begins a new batch for each)."""
        key = item.class_oid if item.kind == "table" else item.kind
        part = self.open_parts.get(key)
        if part is not None and (
            (part.repid, part.table) != (item.repid, item.table)
            or not part.schema.equals(item.batch.schema)
        ):
            part.writer.close()
            del self.open_parts[key]
            part = None
        if part is not None:
            return part
        where = {"ddl": OTHER_DDL, "unknown_schema": UNKNOWN_SCHEMA}.get(item.kind)
        where = os.path.join(self.directory, where or table_directory(item.table))
        part = _Part(where, "", None, item.table, item.repid)
        self.parts.append(part)
        part.schema = part.written = item.batch.schema
        if item.kind == "table":
            ds = self.datasets.get(part.directory)
            if ds is None:
                ds = self.datasets[part.directory] = _Dataset.read(part.directory)
            part.slots, part.written = ds.take(item.class_oid, part.schema, self.representations)
        _open_part(part, part.written, _part_metadata(self.base_meta, item), self.temps)
        self.open_parts[key] = part
        return part

    def finish(self, cursor) -> None:
        self.result.cursor = cursor
        for part in self.open_parts.values():
            part.writer.add_key_value_metadata({"walcdc.cursor": cursor.to_json()})
            part.writer.close()
        self.open_parts.clear()
        parts, datasets, meta, temps = self.parts, self.datasets, self.base_meta, self.temps
        _publish(parts, datasets, self.directory, meta, self.overwrite, temps, self.result)

    def abort(self) -> None:
        for part in self.parts:
            if part.writer is not None:
                try:
                    part.writer.close()
                except Exception:  # noqa: BLE001 - the file is being thrown away
                    pass
        _remove(self.temps)


def _part_metadata(run: Dict[str, str], item) -> Dict[str, str]:
    """A part's Parquet metadata: the run's, and what the part holds."""
    return {
        **run,
        "walcdc.table": item.table or "",
        "walcdc.class_oid": "" if item.class_oid is None else str(item.class_oid),
        "walcdc.repid": str(item.repid),
        "walcdc.kind": item.kind,
    }


def _make_directory(directory: str) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise _error(f"{{}}: cannot create {directory}: {exc.strerror}") from None
    if not os.path.isdir(directory):
        raise _error(f"{{}}: {directory} is not a directory")


def _publish(parts, datasets, directory, base_meta, overwrite, temps, result) -> None:
    """Publishes a run's parts together: each checked (a name taken by another run's part is
    refused before any is published), every part of a table given the table's columns as they
    are now, every file synced, then renamed into place and the directories synced."""
    for part in parts:  # all checked before any is published
        final = os.path.join(part.directory, part.name())
        _check_replace(final, part, base_meta, overwrite)
    # Every part of a table gets the table's columns as they are now: this run's parts begun
    # before a column was seen, and earlier runs' parts, rewritten whole beside themselves.
    replaced = {os.path.join(part.directory, part.name()) for part in parts}
    rewrites = []  # (temporary file, the part it replaces)
    for where, ds in datasets.items():
        for part in parts:
            if part.directory == where and not _has_values(part.written, ds.fields):
                old = part.tmp_path
                part.tmp_path = _rewrite(part.tmp_path, ds.fields, temps)
                _remove([old])
        for path, schema in ds.existing.items():
            if path not in replaced and not _has_values(schema, ds.fields):
                rewrites.append((_rewrite(path, ds.fields, temps), path))
    for path in [part.tmp_path for part in parts] + [tmp for tmp, _ in rewrites]:
        _sync(path)
    dirs = set()
    for part in parts:
        final = os.path.join(part.directory, part.name())
        os.replace(part.tmp_path, final)  # checked above: a part of a repeat of this run
        part.tmp_path = ""
        result.paths.append(final)
        dirs.add(part.directory)
    for tmp, path in rewrites:
        os.replace(tmp, path)  # the same rows: a repeat after a crash does it again
        result.rewritten.append(path)
        dirs.add(os.path.dirname(path))
    for d in sorted(dirs) + [directory]:
        _fsync_dir(d)


def _check_replace(final: str, part: _Part, meta: Dict[str, str], overwrite: bool) -> None:
    """Refuses to replace ``final`` (unless ``overwrite``) if another run wrote it (another
    starting cursor or other options, or no walcdc run at all), or if it holds more rows than
    the part that would replace it (the same run read less of the log)."""
    if overwrite or not os.path.lexists(final):
        return
    try:
        existing = pq.read_metadata(final)
        kv = {k.decode(): v.decode() for k, v in (existing.metadata or {}).items()}
    except (OSError, pa.ArrowException, UnicodeDecodeError):
        existing, kv = None, {}
    run = ("walcdc.run_from", "walcdc.run_options")
    if existing is None or not meta[run[0]] or any(kv.get(k) != meta[k] for k in run):
        why = "written by another run"
    elif existing.num_rows > part.rows:
        why = f"with {existing.num_rows} rows, more than the {part.rows} of this run's part"
    else:
        return
    raise argument_error(
        "overwrite",
        f"{final} exists, {why}: nothing was written (pass {{}} to replace it)",
        OutputError,
    )


def _open_part(part: _Part, schema: pa.Schema, meta: Dict[str, str], temps: List[str]) -> None:
    try:
        os.makedirs(part.directory, exist_ok=True)
        fd = _create_temp(part.directory, temps)
        part.tmp_path = temps[-1]
    except OSError as exc:
        raise _error(f"{{}}: cannot write in {part.directory}: {exc.strerror}") from None
    os.close(fd)
    schema = schema.with_metadata({**(schema.metadata or {}), **meta})
    part.writer = pq.ParquetWriter(part.tmp_path, schema)


def _sync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
