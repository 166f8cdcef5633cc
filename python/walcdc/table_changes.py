"""Changes of one table with typed columns: ``before`` and ``after`` as Arrow structs, built in
Rust straight from the decoded rows (the type mapping is documented in docs/typed.md)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List

import pyarrow as pa

from walcdc.changes import (
    ChangeStream,
    Cursor,
    TableChangeStream,
    _cursor,
    _open_stream,
)
from walcdc.errors import argument_error
from walcdc.logset import LogSet, as_log
from walcdc.options import TableIndex, read_options_of, with_read_options

__all__ = ["read_table_changes", "read_changes_by_table", "table_schema"]


def table_schema(columns: List[Dict[str, Any]]) -> pa.Schema:
    """The schema of a table's changes, given its columns (column dicts of
    :meth:`walcdc.LogSet.schemas`, in the order the struct fields take)."""
    import walcdc._native as n

    return pa.schema(n.table_changes_schema(columns))


def _table_columns(log: LogSet, table, kwargs: Dict[str, Any]):
    """The class OID and current columns (in definition order) of ``table``; arguments that do
    not apply to one table are refused."""
    for arg in ("tables", "exclude_tables", "keys", "envelope"):
        if arg in kwargs:
            raise argument_error(arg, "read_table_changes reads one table: {} does not apply")
    user_schemas = None
    if kwargs.get("schema") is not None:
        from walcdc.schemas import load_schema

        user_schemas = load_schema(kwargs["schema"])
    cursor = kwargs.get("cursor")
    if cursor is not None and not isinstance(cursor, Cursor):
        cursor = Cursor.load(cursor)
    since = cursor.catalog if cursor is not None else None  # the log before it is not read
    class_oid, schema = TableIndex.of(log, user_schemas or (), since).one(table, "table")
    current = next(r for r in schema["representations"] if r["repid"] == schema["current_repid"])
    return class_oid, sorted(current["columns"], key=lambda c: c["def_order"])


@with_read_options("tables", "exclude_tables", "keys")
def read_table_changes(
    source,
    table,
    *,
    batch_size: int = 65536,
    state=None,
    storage_options=None,
    threads: int = 1,
    split_bytes=None,
    **kwargs,
) -> ChangeStream:
    """Changes of one table, ``before`` and ``after`` as Arrow structs typed with the table's
    current columns: integers, floats, ``decimal128`` for NUMERIC, ``date32``, ``time32``, UTC
    timestamps for TIMESTAMP/LTZ and DATETIMELTZ, the instant and its zone for TIMESTAMPTZ /
    DATETIMETZ, naive ``timestamp[ms]`` for DATETIME, the amount and currency of MONETARY,
    binary for BIT, a dictionary of labels for ENUM, lists for collections, strings for the rest
    (docs/typed.md has the table). Rows written under an older representation are mapped by
    attribute id (so renamed columns keep their values); columns they do not have are null. A
    value that does not fit its column's type (the type was changed by ALTER) is null, and
    ``decode_error`` says so. ``key`` and ``changed_columns`` use the current column names.

    ``table`` is a name (matched as by :func:`walcdc.read_changes`' ``tables=``: any name the
    table had in the log) or a class OID. Other arguments (``storage_options`` for a URL
    and ``threads`` among them) are those of :func:`walcdc.read_changes`.

    >>> import walcdc
    >>> s = walcdc.read_table_changes(walcdc.samples.sample_path(), "t_chg")
    >>> s.read_all().schema.field("after").type.num_fields
    4
    """
    log = as_log(source, storage_options)
    class_oid, columns = _table_columns(log, table, kwargs)
    options = read_options_of("read_table_changes", kwargs)
    options.update(tables=[class_oid], keys="id")
    return _open_stream(
        log,
        options,
        batch_size=batch_size,
        state=state,
        columns=columns,
        check_users=True,
        threads=threads,
        split_bytes=split_bytes,
    )


@with_read_options("committed_only", "keys")
def read_changes_by_table(
    source,
    *,
    batch_size: int = 65536,
    storage_options=None,
    threads: int = 1,
    split_bytes=None,
    **kwargs,
) -> TableChangeStream:
    """The committed changes of every table, typed, for writers that keep one dataset per table
    (:func:`walcdc.sinks.tables.write_tables`, ``walcdc extract --by-table``): a
    :class:`~walcdc.changes.TableChangeStream` of :class:`~walcdc.changes.TableBatch` es. Each
    table batch holds one table's changes decoded with one representation (``repid``),
    ``before`` / ``after`` typed with its columns; a table's next representation (after an
    ALTER) starts new batches. Arguments are those of :func:`walcdc.read_changes` (the committed
    stream only); with ``threads``, each range's tables are cut into batches of their own (the
    rows of each table, and their order, are one thread's).

    >>> import walcdc
    >>> s = walcdc.read_changes_by_table(walcdc.samples.sample_path(), tables="t_chg")
    >>> sorted({(b.table, b.repid) for b in s if b.kind == "table"})[:1]
    [('dba.t_chg', 1)]
    """
    log = as_log(source, storage_options)
    for arg in ("committed_only", "keys", "envelope"):
        if arg in kwargs and (arg != "committed_only" or not kwargs[arg]):
            why = "typed output by table reads the committed stream: {} does not apply"
            raise argument_error(arg, why)
    options = {**read_options_of("read_changes_by_table", kwargs), "keys": "id"}
    stream = _open_stream(
        log,
        options,
        batch_size=batch_size,
        by_table=True,
        check_users=True,
        threads=threads,
        split_bytes=split_bytes,
    )
    stream.info.update(_run_identity(options))
    stream.representations = _representations(log, options)
    return stream


def _representations(log: LogSet, options: Dict[str, Any]) -> Dict[int, List[List[Dict[str, Any]]]]:
    """The columns of every representation of every table the log's class records define (from
    the cursor's catalog on), oldest first, each in definition order as the typed output has
    them: what a writer by table needs to give every part of a table the same columns."""
    cursor = _cursor(options)
    since = cursor.catalog if cursor is not None else None
    return {
        c["class_oid"]: [
            sorted(r["columns"], key=lambda x: (x["def_order"] < 0, x["def_order"], x["id"]))
            for r in sorted(c["representations"], key=lambda r: r["repid"])
            if r["columns"]
        ]
        for c in log._schemas_shared(since=since)
    }


def _run_identity(options: Dict[str, Any]) -> Dict[str, str]:
    """What run a stream by table is: the cursor it starts from (``"beginning"`` without one)
    and a digest of the options that choose what it reads. A part of typed output by table
    records both, so that only a run repeated from the same cursor with the same options (after
    a crash before its cursor was saved) replaces it (:func:`walcdc.sinks.tables.write_tables`)."""
    cursor = _cursor(options)
    start = "beginning"
    if cursor is not None:
        fields = json.loads(cursor.to_json())
        fields.pop("catalog", None)  # what the log says: the same for the same cursor
        start = json.dumps(fields, sort_keys=True)
    chosen = {k: v for k, v in options.items() if k not in ("cursor", "memory_limit")}

    def plain(value):
        return sorted(map(str, value)) if isinstance(value, (set, frozenset)) else str(value)

    text = json.dumps(chosen, sort_keys=True, default=plain)
    return {"run_from": start, "run_options": hashlib.sha256(text.encode()).hexdigest()}
