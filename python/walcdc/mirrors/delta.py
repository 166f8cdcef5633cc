"""Mirrored tables as Delta Lake tables (with ``deltalake``, delta-rs): one table directory per
CUBRID table under the target directory, named as ``walcdc extract --by-table`` names them.

Each commit of a table carries a Delta transaction identifier (``txn``: the app id
``walcdc-<db_creation>``, the version the commit LSA of the last transaction applied), written
in the same atomic commit as the rows: a run reads it back and skips what the table already
holds, so a run repeated after a crash applies nothing twice and loses nothing. Rows are merged
by primary key (``MERGE``); a new layout (ALTER), a TRUNCATE or a table's first rows rewrite the
table in one overwrite commit."""

from __future__ import annotations

import json
import os
from typing import Dict, Optional

import pyarrow as pa
import pyarrow.compute as pc

from walcdc import lsa as L
from walcdc.mirrors.lake import (
    DROPPED,
    LakeTypes,
    dropped_suffix,
    field_ids,
    own_columns,
    place,
    without,
)
from walcdc.mirrors.reduce import Layout, MirrorError, TableChanges
from walcdc.sinks.tables import table_directory

#: Delta Lake's types for walcdc's (TIME as ``HH:MM:SS`` text: Delta has no time of day).
TYPES = LakeTypes(pa.string())


def _is_table(path: str, storage_options) -> bool:
    """Whether ``path`` holds a Delta table (a commit in its log): a directory a first write
    left without one (killed before its commit) is no table, and is written again."""
    from deltalake import DeltaTable

    if not os.path.isdir(path):
        return False
    return DeltaTable.is_deltatable(path, storage_options=storage_options)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class DeltaTarget:
    """The Delta tables under ``root``, found by what their description says (the class OID
    and database of each), whatever directory they are in now."""

    def __init__(self, root: str, db_creation: int, storage_options=None):
        import deltalake  # noqa: F401  (a clear ImportError first: the extra is optional)

        self.root = os.fspath(root)
        self.db_creation = db_creation
        self.app_id = f"walcdc-{db_creation}"
        self.storage_options = storage_options
        self.paths: Dict[int, str] = {}
        os.makedirs(self.root, exist_ok=True)
        for name in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, name)
            if not _is_table(path, storage_options):
                continue  # (a first write killed before its commit leaves files, no table)
            info = self._info(path)
            if info is None:
                continue
            if info.get("db_creation") != db_creation:
                raise MirrorError(
                    f"{path} mirrors a table of another database (created at "
                    f"{info.get('db_creation')}, this log's at {db_creation})",
                    file=path,
                )
            oid = info["class_oid"]
            if oid in self.paths:
                raise MirrorError(
                    f"{path} and {self.paths[oid]} both mirror table {oid}", file=path
                )
            self.paths[oid] = path

    def _info(self, path: str) -> Optional[dict]:
        from deltalake import DeltaTable

        try:
            description = (
                DeltaTable(path, storage_options=self.storage_options).metadata().description
            )
            info = json.loads(description or "null")
        except ValueError:
            return None
        return info if isinstance(info, dict) and info.get("walcdc") == 1 else None

    def tables(self) -> Dict[int, str]:
        return dict(self.paths)

    def applied(self, class_oid: int) -> Optional[int]:
        """The commit LSA of the last transaction the table holds (None: no table yet)."""
        from deltalake import DeltaTable

        path = self.paths.get(class_oid)
        if path is None:
            return None
        return DeltaTable(path, storage_options=self.storage_options).transaction_version(
            self.app_id
        )

    def _place(self, changes: TableChanges) -> str:
        """The table's directory, after moving it where its name says (see ``lake.place``)."""
        name = table_directory(changes.layout.table) + dropped_suffix(changes)
        want = os.path.join(self.root, name)
        return place(
            changes, self.paths, want, lambda p: _is_table(p, self.storage_options), os.rename
        )

    def apply(self, changes: TableChanges) -> None:
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        path = self._place(changes)
        exists = _is_table(path, self.storage_options)
        layout = TYPES.layout(changes.layout)
        schema = TYPES.schema(changes.layout)
        table = DeltaTable(path, storage_options=self.storage_options) if exists else None
        now = pa.schema(table.schema()) if table is not None else None
        same = now is not None and own_columns(now, field_ids(now)) == layout.columns()
        if same and not changes.changes_rows():
            return  # a DDL that changes no column (an index, a rename): nothing to commit
        rows = TYPES.table(changes.rows, changes.layout)
        types = {f.name: f.type for f in schema}
        gone = changes.gone
        gone = pa.table({n: gone.column(n).cast(types[n]) for n in gone.column_names})
        commit = CommitProperties(
            app_transactions=[Transaction(self.app_id, changes.version)],
            custom_metadata={"walcdc.commit_lsa": L.format_lsa(changes.version)},
        )
        if same and not changes.truncated:
            if gone.num_rows == 0 and pc.all(changes.new).as_py() is not False:
                # Only rows of new keys (inserts): nothing in the table to match, an append.
                write_deltalake(
                    table,
                    rows,
                    mode="append",
                    storage_options=self.storage_options,
                    commit_properties=commit,
                )
                return
            self._merge(table, layout, rows, gone, commit)
            return
        if table is None or changes.truncated:
            base = schema.empty_table()
        else:
            base = TYPES.reproject(table.to_pyarrow_table(), field_ids(now), changes.layout)
            base = without(base, layout.key_columns(), [rows, gone])
        description = json.dumps(
            {"walcdc": 1, "class_oid": changes.class_oid, "db_creation": self.db_creation}
        )
        write_deltalake(
            path,
            pa.concat_tables([base, rows]),
            mode="overwrite",
            schema_mode="overwrite",
            name=changes.layout.table,
            description=description,
            storage_options=self.storage_options,
            commit_properties=commit,
        )

    def _merge(self, table, layout: Layout, rows: pa.Table, gone: pa.Table, commit) -> None:
        key = layout.key_columns()
        # The rows gone, as rows of nulls but their key, marked.
        padding = [
            gone.column(f.name).cast(f.type) if f.name in key else pa.nulls(gone.num_rows, f.type)
            for f in rows.schema
        ]
        source = pa.concat_tables([rows, pa.Table.from_arrays(padding, schema=rows.schema)])
        deleted = [False] * rows.num_rows + [True] * gone.num_rows
        source = source.append_column("_walcdc_deleted", pa.array(deleted, pa.bool_()))
        predicate = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in key)
        values = {_quote(f.name): f"s.{_quote(f.name)}" for f in rows.schema}
        (
            table.merge(
                source,
                predicate,
                source_alias="s",
                target_alias="t",
                commit_properties=commit,
            )
            .when_matched_delete("s._walcdc_deleted")
            .when_matched_update(values, "NOT s._walcdc_deleted")
            .when_not_matched_insert(values, "NOT s._walcdc_deleted")
            .execute()
        )


__all__ = ["DROPPED", "TYPES", "DeltaTarget"]
