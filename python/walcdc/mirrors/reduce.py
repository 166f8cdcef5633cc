"""What one commit of a mirrored table applies: the committed changes of one table read in one
round, in commit order (across the table's layouts), reduced to the rows there after them (to
insert, or to replace the row of the same key) and the keys of the rows gone. Format-neutral:
each target (Delta Lake, Iceberg) applies a :class:`TableChanges` in one commit of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from walcdc.ddl import DdlType, ObjectType
from walcdc.errors import OutputError
from walcdc.mirrors.defaults import NoTypedDefault, typed_default

#: The columns a mirrored table has besides its own: the commit LSA and time of the change
#: that wrote the row, and the row's OID (the key of a table without a primary key).
COMMIT_LSA = "_walcdc_commit_lsa"
COMMIT_TIME = "_walcdc_commit_time"
ROW_OID = "_walcdc_row_oid"
META = (
    pa.field(COMMIT_LSA, pa.uint64()),
    pa.field(COMMIT_TIME, pa.timestamp("s", tz="UTC")),
    pa.field(ROW_OID, pa.uint64()),
)

ATTRIBUTE_ID = b"walcdc.attribute_id"


class MirrorError(OutputError):
    """A mirror that cannot be kept as asked (a table it cannot type, a target that belongs
    to another database or was changed by hand)."""


def attribute_id(field: pa.Field) -> int:
    return int(field.metadata[ATTRIBUTE_ID])


@dataclass(frozen=True)
class Layout:
    """A table's columns as one representation (and its column names at the time) has them:
    the typed fields of :func:`walcdc.read_changes_by_table` (each with its attribute id), the
    primary key's column names (empty: rows are keyed by :data:`ROW_OID`) and each column's
    dict of :meth:`walcdc.LogSet.schemas` (its default is what a row written before the column
    was added holds)."""

    table: str
    fields: Tuple[pa.Field, ...]
    key: Tuple[str, ...]
    defaults: Tuple[Optional[Dict[str, Any]], ...]

    def key_columns(self) -> Tuple[str, ...]:
        return self.key or (ROW_OID,)

    def schema(self) -> pa.Schema:
        return pa.schema(list(self.fields) + list(META))

    def columns(self) -> Tuple[Tuple[int, str, pa.DataType], ...]:
        return tuple((attribute_id(f), f.name, f.type) for f in self.fields)


def layout_of(table: str, struct: pa.StructType, columns: Dict[int, Dict[str, Any]]) -> Layout:
    """The layout of a table batch whose ``after`` column has type ``struct``; ``columns``:
    its representation's columns (of :meth:`walcdc.LogSet.schemas`) by attribute id."""
    fields = tuple(struct.field(i) for i in range(struct.num_fields))
    ids = [attribute_id(f) for f in fields]
    key = tuple(f.name for f, i in zip(fields, ids) if columns.get(i, {}).get("primary_key"))
    defaults = tuple(columns.get(i) for i in ids)
    return Layout(table, fields, key, defaults)


@dataclass
class TableChanges:
    """One table's changes of one round, reduced. ``rows``: the rows there after them
    (``layout``'s fields and :data:`META`, walcdc's types), one per key; ``gone``: the key
    columns of the rows no longer there;
    ``truncated``: the table was emptied first (``rows`` is all it holds); ``dropped``: the
    table was dropped (its rows as they were then); ``version``: the commit LSA of the last
    transaction applied; ``new``: per row of ``rows``, whether its key was not in the table
    before the round (only inserted in it: no row of the table can match it)."""

    class_oid: int
    layout: Layout
    version: int
    rows: pa.Table
    gone: pa.Table
    truncated: bool
    dropped: bool
    new: pa.Array

    def changes_rows(self) -> bool:
        return self.truncated or self.rows.num_rows > 0 or self.gone.num_rows > 0


def filled(column: Optional[Dict[str, Any]], field: pa.Field, n: int, table: str) -> pa.Array:
    """``n`` values of a column added after the rows were written (``column``: its dict of
    :meth:`walcdc.LogSet.schemas`): its default, as CUBRID gives it to such rows, or null."""
    if column is None or column.get("default") is None:
        return pa.nulls(n, field.type)
    try:
        value = typed_default(column, field.type)
    except NoTypedDefault as why:
        raise MirrorError(
            f"{table}: cannot give the rows written before column {field.name!r} was added "
            f"its default: {why}"
        ) from None
    return pa.repeat(value[0], n) if n else value.slice(0, 0)


def cast_column(values: pa.Array, field: pa.Field, table: str) -> pa.Array:
    """A column's values in the column's type now (ALTER may have changed it)."""
    if values.type == field.type:
        return values
    try:
        return values.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise MirrorError(
            f"{table}: the values of column {field.name!r} ({values.type}) do not fit its "
            f"new type {field.type}"
        ) from None


def project(columns: Sequence[pa.Array], fields: Sequence[pa.Field], layout: Layout) -> pa.Table:
    """Rows of columns ``fields`` (each with its attribute id) in ``layout``'s columns, matched
    by attribute id: renamed columns keep their values, dropped ones go, added ones hold their
    default, changed types are cast."""
    by_id = {attribute_id(f): c for f, c in zip(fields, columns)}
    n = len(columns[0]) if columns else 0
    out = []
    for f, default in zip(layout.fields, layout.defaults):
        c = by_id.get(attribute_id(f))
        out.append(
            filled(default, f, n, layout.table) if c is None else cast_column(c, f, layout.table)
        )
    return pa.Table.from_arrays(out, schema=pa.schema(layout.fields))


def _struct_columns(struct: pa.Array) -> List[pa.Array]:
    if isinstance(struct, pa.ChunkedArray):
        struct = struct.combine_chunks()
    return [struct.field(i) for i in range(struct.type.num_fields)]


def _keys(table: pa.Table, names: Sequence[str]) -> List[tuple]:
    return list(zip(*(table.column(n).to_pylist() for n in names)))


def reduce_changes(
    class_oid: int, batches: Sequence[Tuple[Layout, pa.RecordBatch]], applied: Optional[int]
) -> Optional[TableChanges]:
    """The changes of ``batches`` (one table's, each with its layout, as the stream gave
    them) committed after ``applied`` (a commit LSA; None: all), reduced; None if none is."""
    parts = []
    for layout, batch in batches:
        if applied is not None:
            batch = batch.filter(
                pc.fill_null(pc.greater(batch.column("commit_lsa"), applied), False)
            )
        if batch.num_rows:
            parts.append((layout, batch))
    if not parts:
        return None
    layout = parts[-1][0]
    names = [COMMIT_LSA, "lsa", "op", "ddl_type", "object_type", "object_oid", "partition_oid"]
    names += [COMMIT_TIME, ROW_OID, "decode_error"]
    meta: Dict[str, List[Any]] = {n: [] for n in names}
    before, after = [], []
    for own, batch in parts:
        source = {COMMIT_LSA: "commit_lsa", COMMIT_TIME: "commit_time", ROW_OID: "row_oid"}
        for n in names:
            meta[n].append(batch.column(source.get(n, n)))
        for images, column in ((before, "before"), (after, "after")):
            images.append(project(_struct_columns(batch.column(column)), own.fields, layout))
    events = pa.table({n: pa.chunked_array(c) for n, c in meta.items()})
    # The stream gives a table's batches in commit order; sorting makes it certain.
    order = pc.sort_indices(events, [(COMMIT_LSA, "ascending"), ("lsa", "ascending")])
    events = events.take(order)
    before_rows = pa.concat_tables(before).take(order)
    after_rows = pa.concat_tables(after).take(order)

    ops = events.column("op").cast(pa.string()).to_pylist()
    ddl = events.column("ddl_type").to_pylist()
    objects = events.column("object_type").to_pylist()
    object_oids = events.column("object_oid").to_pylist()
    start, truncated, dropped = 0, False, False
    for i, op in enumerate(ops):
        if op != "ddl":
            continue
        if ddl[i] == DdlType.TRUNCATE:
            start, truncated = i + 1, True
        elif ddl[i] == DdlType.DROP and objects[i] == ObjectType.TABLE:
            dropped = dropped or object_oids[i] in (None, class_oid)
    errors = events.column("decode_error").to_pylist()
    for i in range(start, len(ops)):
        if errors[i] is not None and ops[i] in ("insert", "update", "delete"):
            lsa = events.column("lsa")[i].as_py()
            raise MirrorError(f"{layout.table}: a row cannot be decoded: {errors[i]}", lsa=lsa)

    key = layout.key_columns()
    if layout.key:
        before_keys, after_keys = _keys(before_rows, key), _keys(after_rows, key)
        heaps = [p or 0 for p in events.column("partition_oid").to_pylist()]
    else:
        oids = [(o,) for o in events.column(ROW_OID).to_pylist()]
        before_keys = after_keys = oids
        heaps = [0] * len(oids)
    # Per key and heap (a partitioned table's row moves between partitions as a delete in one
    # and an insert in another, in either order): the event whose after image is the row
    # (i >= 0), or the one that removed it (~i).
    # A key whose events in the round are inserts only was not there before (a row moved from
    # another partition shows a delete there): its row is new, and needs no match in the table.
    state: Dict[tuple, Dict[int, int]] = {}
    touched = set()  # keys of updates and deletes: the row may have been there before
    inserted_first = set()  # keys whose first event inserts them
    for i in range(start, len(ops)):
        op = ops[i]
        if op == "update" or op == "delete":
            state.setdefault(before_keys[i], {})[heaps[i]] = ~i
            touched.add(before_keys[i])
        if op == "insert" or op == "update":
            if op == "update":
                touched.add(after_keys[i])
            elif after_keys[i] not in state:
                inserted_first.add(after_keys[i])
            state.setdefault(after_keys[i], {})[heaps[i]] = i
    present, gone, fresh = [], [], set()
    for key_values, places in state.items():
        there = [i for i in places.values() if i >= 0]
        if there:
            present.append(max(there))
            if key_values not in touched:
                fresh.add(max(there))
        elif not truncated and not (key_values in inserted_first and len(places) == 1):
            # (Inserted and deleted again in one heap: it was not there before the round.)
            gone.append(~min(places.values()))
    present.sort()
    new_rows = pa.array([i in fresh for i in present], pa.bool_())
    present = pa.array(present, pa.int64())
    gone = pa.array(sorted(gone), pa.int64())
    rows = after_rows.take(present)
    for f in META:
        rows = rows.append_column(f, events.column(f.name).take(present).cast(f.type))
    if layout.key:
        gone_keys = before_rows.select(list(key)).take(gone)
    else:
        gone_keys = pa.table({ROW_OID: events.column(ROW_OID).take(gone).cast(pa.uint64())})
    version = events.column(COMMIT_LSA)[-1].as_py()
    return TableChanges(class_oid, layout, version, rows, gone_keys, truncated, dropped, new_rows)
