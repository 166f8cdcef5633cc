"""Mirrored tables as Iceberg tables (with ``pyiceberg``): one table per CUBRID table, in the
namespace of its owner (``dba.t_orders``), in a catalog: ``iceberg:DIR`` is a SQL catalog on
SQLite in ``DIR/catalog.db`` with its warehouse in ``DIR``; ``catalog=`` (the properties of
``pyiceberg.catalog.load_catalog``) names any other (REST, Glue, Hive, SQL).

Each commit of a table is one Iceberg transaction whose snapshots carry, in their summary, the
commit LSA of the last transaction applied (``walcdc.commit_lsa``): a run reads it back from the
table's current snapshot (or the newest before it that has one) and skips what the table
holds. Rows are merged by key (a delete of the keys changed, then an append, in one
transaction); a new layout (ALTER: the schema evolved by name and attribute id), a TRUNCATE or a
table's first rows overwrite the table in one transaction."""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from typing import Dict, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from walcdc.mirrors.lake import LakeTypes, dropped_suffix, own_columns, place, without
from walcdc.mirrors.reduce import Layout, MirrorError, TableChanges, attribute_id

#: Iceberg's types for walcdc's (TIME as Iceberg's ``time``, microseconds).
TYPES = LakeTypes(pa.time64("us"))
#: The table properties and snapshot summary keys a mirror keeps.
CLASS_OID = "walcdc.class_oid"
DB_CREATION = "walcdc.db_creation"
COLUMNS = "walcdc.columns"  # column name -> attribute id, as JSON
POSITION = "walcdc.commit_lsa"


def open_catalog(where: str, properties: Optional[Dict[str, str]]):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.catalog.sql import SqlCatalog

    if properties:
        return load_catalog(where or "walcdc", **properties)
    root = os.path.abspath(where)
    os.makedirs(root, exist_ok=True)
    return SqlCatalog("walcdc", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")


def _plain(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.remove_metadata() for f in schema])


class IcebergTarget:
    """The Iceberg tables of a catalog that mirror tables of one database, found by their
    properties (class OID, database), whatever their names are now."""

    def __init__(self, where: str, db_creation: int, catalog_properties=None):
        self.catalog = open_catalog(where, catalog_properties)
        self.db_creation = db_creation
        self.names: Dict[int, Tuple[str, str]] = {}
        for namespace in self.catalog.list_namespaces():
            for ident in self.catalog.list_tables(namespace):
                props = self.catalog.load_table(ident).properties
                if CLASS_OID not in props:
                    continue
                name = ".".join(ident)
                if int(props.get(DB_CREATION, -1)) != db_creation:
                    raise MirrorError(
                        f"{name} mirrors a table of another database (created at "
                        f"{props.get(DB_CREATION)}, this log's at {db_creation})"
                    )
                oid = int(props[CLASS_OID])
                if oid in self.names:
                    raise MirrorError(f"{name} and {'.'.join(self.names[oid])} both mirror {oid}")
                self.names[oid] = tuple(ident)

    def tables(self) -> Dict[int, str]:
        return {oid: ".".join(ident) for oid, ident in self.names.items()}

    def applied(self, class_oid: int) -> Optional[int]:
        ident = self.names.get(class_oid)
        if ident is None:
            return None
        table = self.catalog.load_table(ident)
        snapshot = table.current_snapshot()
        while snapshot is not None:
            value = snapshot.summary.additional_properties.get(POSITION)
            if value is not None:
                return int(value)
            parent = snapshot.parent_snapshot_id
            snapshot = table.snapshot_by_id(parent) if parent is not None else None
        return None

    def _place(self, changes: TableChanges) -> Tuple[str, str]:
        """The table's identifier, after renaming it as its name says (see ``lake.place``)."""
        owner, _, name = changes.layout.table.rpartition(".")
        want = (owner or "public", name + dropped_suffix(changes))
        self.catalog.create_namespace_if_not_exists(want[0])
        return place(
            changes,
            self.names,
            want,
            self.catalog.table_exists,
            self.catalog.rename_table,
            ".".join,
        )

    def apply(self, changes: TableChanges) -> None:
        ident = self._place(changes)
        layout = TYPES.layout(changes.layout)
        schema = TYPES.schema(changes.layout)
        ids = {f.name: attribute_id(f) for f in layout.fields}
        exists = self.catalog.table_exists(ident)
        table = self.catalog.load_table(ident) if exists else None
        old_ids = json.loads(table.properties.get(COLUMNS, "{}")) if table is not None else {}
        now = table.schema().as_arrow() if table is not None else None
        same = now is not None and own_columns(now, old_ids) == layout.columns()
        if same and not changes.changes_rows():
            return  # a DDL that changes no column (an index, a rename): nothing to commit
        rows = TYPES.table(changes.rows, changes.layout)
        _refuse_null_collections_of_structs(rows, changes.layout.table)
        types = {f.name: f.type for f in schema}
        gone = changes.gone
        gone = pa.table({n: gone.column(n).cast(types[n]) for n in gone.column_names})
        summary = {POSITION: str(changes.version), DB_CREATION: str(self.db_creation)}
        if table is None:
            props = {
                CLASS_OID: str(changes.class_oid),
                DB_CREATION: str(self.db_creation),
                COLUMNS: json.dumps(ids),
            }
            table = self.catalog.create_table(ident, _plain(schema), properties=props)
        key = list(layout.key_columns())
        with table.transaction() as txn:
            if same and not changes.truncated:
                # Rows of new keys match nothing: only the others' keys are looked for.
                old_rows = rows.filter(pc.invert(changes.new))
                self._merge(txn, key, rows, old_rows, gone, summary)
                return
            if changes.truncated or now is None:
                base = _plain(schema).empty_table()
            else:
                base = TYPES.reproject(table.scan().to_arrow(), old_ids, changes.layout)
                base = without(base, key, [rows, gone])
                self._evolve(txn, now, old_ids, layout, schema)
            whole = pa.concat_tables([base, rows]).cast(_plain(schema))
            with _quiet():
                txn.overwrite(whole, snapshot_properties=summary)
            txn.set_properties({COLUMNS: json.dumps(ids)})

    @staticmethod
    def _merge(txn, key, rows: pa.Table, replaced: pa.Table, gone: pa.Table, summary) -> None:
        """Deletes the rows of the keys ``replaced`` and ``gone`` hold, then appends ``rows``."""
        from pyiceberg.table.upsert_util import create_match_filter

        schema = rows.select(key).schema
        keys = pa.concat_tables([replaced.select(key), gone.select(key).cast(schema)])
        if keys.num_rows:
            with _quiet():
                txn.delete(create_match_filter(keys, key), snapshot_properties=summary)
        if rows.num_rows:
            txn.append(rows.cast(_plain(rows.schema)), snapshot_properties=summary)

    @staticmethod
    def _evolve(txn, now: pa.Schema, old_ids, layout: Layout, schema: pa.Schema) -> None:
        """The table's schema to ``layout``'s, by attribute id: renamed columns renamed,
        dropped ones deleted, those whose type Iceberg cannot promote deleted and added again
        (their values are rewritten), new ones added."""
        wanted = {attribute_id(f): f for f in layout.fields}
        mine = {old_ids[f.name]: f for f in now if f.name in old_ids}
        with txn.update_schema() as update:
            for i, f in mine.items():
                new = wanted.get(i)
                if new is None or not _promotable(f.type, new.type):
                    update.delete_column(f.name)
        with txn.update_schema() as update:
            for i, f in mine.items():
                new = wanted.get(i)
                if new is not None and _promotable(f.type, new.type) and new.name != f.name:
                    update.rename_column(f.name, new.name)
        with txn.update_schema() as update:
            update.union_by_name(_plain(schema))


def _refuse_null_collections_of_structs(rows: pa.Table, table: str) -> None:
    """pyiceberg (0.12) writes a NULL list of structs as an empty list (its projection of
    list<struct> rebuilds the list without its validity): such a value is refused, not written
    wrong."""
    for name, column in zip(rows.column_names, rows.columns):
        t = column.type
        if pa.types.is_list(t) and pa.types.is_struct(t.value_type) and column.null_count:
            raise MirrorError(
                f"{table}: column {name!r} has a NULL collection of {t.value_type}, which "
                "pyiceberg writes as an empty one; mirror the table to Delta Lake, or leave it "
                "out (exclude_tables=)"
            )


@contextlib.contextmanager
def _quiet():
    """pyiceberg's warning that a delete matched no row (the keys of rows inserted in the same
    round, an overwrite of an empty table) is no news."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Delete operation did not match any records")
        yield


def _promotable(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether Iceberg changes a column of type ``old`` to ``new`` in place."""
    if old == new:
        return True
    if old == pa.int32() and new == pa.int64():
        return True
    if old == pa.float32() and new == pa.float64():
        return True
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return old.scale == new.scale and new.precision >= old.precision
    return False
