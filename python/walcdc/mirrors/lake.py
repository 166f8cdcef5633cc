"""What the lake targets share: their column types (walcdc's typed Arrow narrowed to what a
table format holds) and the rewrite of a table's rows into a new layout."""

from __future__ import annotations

from typing import Callable, Dict, List, Set, TypeVar

import pyarrow as pa

from walcdc import lsa as L
from walcdc.mirrors.reduce import (
    META,
    Layout,
    MirrorError,
    TableChanges,
    attribute_id,
    cast_column,
    filled,
)


class LakeTypes:
    """A table format's types for walcdc's: ENUM labels as strings, timestamps in
    microseconds, unsigned integers widened, TIME as ``time_of_day`` (Delta Lake has no time
    of day: ``HH:MM:SS`` text there; Iceberg's ``time`` is in microseconds)."""

    def __init__(self, time_of_day: pa.DataType):
        self.time_of_day = time_of_day

    def type(self, t: pa.DataType) -> pa.DataType:
        if pa.types.is_dictionary(t):
            return self.type(t.value_type)
        if pa.types.is_time(t):
            return self.time_of_day
        if pa.types.is_timestamp(t):
            return pa.timestamp("us", tz=t.tz)
        if pa.types.is_unsigned_integer(t):
            return {8: pa.int16(), 16: pa.int32()}.get(t.bit_width, pa.int64())
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(self.type(f.type)) for f in t])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return pa.list_(t.value_field.with_type(self.type(t.value_type)))
        return t

    def layout(self, layout: Layout) -> Layout:
        fields = tuple(f.with_type(self.type(f.type)) for f in layout.fields)
        return Layout(layout.table, fields, layout.key, layout.defaults)

    def meta(self) -> List[pa.Field]:
        return [f.with_type(self.type(f.type)) for f in META]

    def schema(self, layout: Layout) -> pa.Schema:
        return pa.schema(list(self.layout(layout).fields) + self.meta())

    def table(self, table: pa.Table, layout: Layout) -> pa.Table:
        """Rows in walcdc's types (``layout``'s columns and :data:`META`) in the lake's."""
        schema = self.schema(layout)
        columns = [c.cast(f.type) for c, f in zip(table.columns, schema)]
        return pa.Table.from_arrays(columns, schema=schema)

    def reproject(self, table: pa.Table, ids: Dict[str, int], layout: Layout) -> pa.Table:
        """A lake table's rows (its columns' attribute ids in ``ids``, by name) in the lake
        types of ``layout``'s columns, matched by attribute id: renamed columns keep their
        values, dropped ones go, added ones take their default, changed types are cast."""
        lake = self.layout(layout)
        by_id = {ids[n]: table.column(n) for n in table.column_names if n in ids}
        out = []
        for own, f, column in zip(layout.fields, lake.fields, layout.defaults):
            c = by_id.get(attribute_id(f))
            if c is None:
                out.append(filled(column, own, table.num_rows, layout.table).cast(f.type))
            else:
                out.append(cast_column(c.combine_chunks(), f, layout.table))
        meta = self.meta()
        out += [table.column(f.name).cast(f.type) for f in meta]
        return pa.Table.from_arrays(out, schema=pa.schema(list(lake.fields) + meta))


def without(base: pa.Table, key: List[str], tables: List[pa.Table]) -> pa.Table:
    """``base`` without the rows whose key is in one of ``tables``."""
    keys: Set[tuple] = set()
    for t in tables:
        keys.update(zip(*(t.column(k).to_pylist() for k in key)))
    if not keys or not base.num_rows:
        return base
    mine = zip(*(base.column(k).to_pylist() for k in key))
    return base.filter(pa.array([k not in keys for k in mine], pa.bool_()))


def field_ids(schema: pa.Schema) -> Dict[str, int]:
    """Column name -> attribute id, from the fields' metadata (without :data:`META`)."""
    meta = {f.name for f in META}
    return {
        f.name: attribute_id(f)
        for f in schema
        if f.name not in meta and f.metadata and b"walcdc.attribute_id" in f.metadata
    }


def own_columns(schema: pa.Schema, ids: Dict[str, int]):
    """A lake table's own columns as ``Layout.columns()`` gives them: (attribute id, name,
    type), without :data:`META`."""
    return tuple((ids[f.name], f.name, f.type) for f in schema if f.name in ids)


#: A dropped table's new name: its name, this, the commit LSA of the DROP. ``~`` is escaped in
#: a table's own directory name, so no table's name looks like this.
DROPPED = "~dropped-"

Place = TypeVar("Place")


def dropped_suffix(changes: TableChanges) -> str:
    """What a table's name gets once it is dropped (nothing while it lives)."""
    if not changes.dropped:
        return ""
    return DROPPED + L.format_lsa(changes.version).replace("|", "_")


def place(
    changes: TableChanges,
    placed: Dict[int, Place],
    want: Place,
    exists: Callable[[Place], bool],
    move: Callable[[Place, Place], None],
    show: Callable[[Place], str] = str,
) -> Place:
    """Where a table's mirror is committed: ``want`` (its name now, or its dropped name), after
    moving it there from where ``placed`` says it is (RENAME TABLE, DROP TABLE) before the
    commit, so that a commit never lands before its move. A place another table holds is
    refused."""
    now = placed.get(changes.class_oid)
    if now != want and exists(want):
        raise MirrorError(
            f"{show(want)} exists and does not mirror table {changes.layout.table} "
            f"(class {changes.class_oid})",
            file=show(want),
        )
    if now is not None and now != want:
        move(now, want)
    placed[changes.class_oid] = want
    return want
