"""Typed output by table: one Parquet dataset (a directory of parts) per table.

Each table's rows go to ``DIR/<table>/``, with ``before`` / ``after`` typed with the table's
columns (the mapping of docs/typed.md) and the change metadata of :func:`walcdc.read_changes`.
A run adds one part per table and representation: when an ALTER gives the table a new
representation, the rows after it go to a new part whose schema has the new columns; after a
RENAME TABLE, the table's rows go to the directory of its new name. Part names
carry the first and last commit LSA of their rows and the representation id, so a run repeated
from the same cursor (after a crash before the cursor was saved) writes the same parts again,
replacing them. DDL that belongs to no table (users, grants, ...) goes to ``DIR/_ddl/``.

Reading a table's history across parts: ``pyarrow.dataset.dataset(DIR/<table>)`` unifies the
parts' schemas (``unify_schemas``: columns added by ALTER are null in older parts), and DuckDB
reads them with ``read_parquet('DIR/<table>/*.parquet', union_by_name = true)``.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from walcdc import lsa as L
from walcdc.sinks.base import WriteResult, _count, _error, _fsync_dir, _positions

__all__ = ["OTHER_DDL", "write_tables"]

#: The directory of DDL that belongs to no table.
OTHER_DDL = "_ddl"


def table_directory(name: Optional[str]) -> str:
    """The directory name of a table (its owner-qualified name, made safe for a file name)."""
    if name is None:
        return OTHER_DDL
    safe = re.sub(r"[^\w.\-]", "_", name)
    return safe if safe not in ("", ".", "..") else f"table_{safe}"


@dataclass
class _Part:
    directory: str
    tmp_path: str
    writer: pq.ParquetWriter
    table: Optional[str]
    repid: int
    metadata: Dict[str, str]
    first: Optional[int] = None
    last: Optional[int] = None
    rows: int = 0

    def name(self) -> str:
        def text(k: int) -> str:
            page, offset = L.split(k)
            return f"{page:012d}_{offset:05d}"

        rep = f"-r{self.repid}" if self.repid >= 0 else ""
        return f"part-{text(self.first)}-{text(self.last)}{rep}.parquet"


def write_tables(
    stream,
    directory,
    *,
    cursor_file=None,
    on_batch: Optional[Callable[[pa.RecordBatch], None]] = None,
) -> WriteResult:
    """Writes a committed change stream opened by table (:func:`walcdc.read_changes_by_table`)
    into ``directory``, one Parquet dataset per table, makes every part durable, and only then
    saves the stream's cursor to ``cursor_file``. On failure the unpublished parts are removed
    and the cursor is left as it was."""
    directory = os.fspath(directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise _error(f"{{}}: cannot create {directory}: {exc.strerror}") from None
    if not os.path.isdir(directory):
        raise _error(f"{{}}: {directory} is not a directory")
    info = dict(stream.info)
    from walcdc import __version__

    base_meta = {
        "walcdc.version": __version__,
        "walcdc.database": str(info.get("database") or ""),
        "walcdc.db_creation": str(info.get("db_creation", "")),
        "walcdc.stream": "committed",
    }
    result = WriteResult()
    summary: Counter = Counter()
    open_parts: Dict[Optional[int], _Part] = {}
    closed = []
    published = False
    try:
        for class_oid, table, repid, batch in stream:
            part = open_parts.get(class_oid)
            if part is not None and (part.repid, part.table) != (repid, table):
                part.writer.close()
                closed.append(open_parts.pop(class_oid))
                part = None
            if part is None:
                part = _open_part(directory, table, class_oid, repid, batch.schema, base_meta)
                open_parts[class_oid] = part
            first, last = _positions(batch, True)
            part.first = first if part.first is None else part.first
            part.last = last if last is not None else part.last
            part.rows += batch.num_rows
            part.writer.write_batch(batch)
            result.rows += batch.num_rows
            if result.first_lsa is None or (first is not None and first < result.first_lsa):
                result.first_lsa = first
            if last is not None and (result.last_lsa is None or last > result.last_lsa):
                result.last_lsa = last
            _count(batch, summary)
            if on_batch is not None:
                on_batch(batch)
        result.cursor = stream.cursor
        for part in open_parts.values():
            part.writer.add_key_value_metadata({"walcdc.cursor": result.cursor.to_json()})
            part.writer.close()
            closed.append(part)
        open_parts.clear()
        for part in closed:
            _sync(part.tmp_path)
        dirs = set()
        for part in closed:
            final = os.path.join(part.directory, part.name())
            os.replace(part.tmp_path, final)  # the same part of a repeated run: same rows
            part.tmp_path = ""
            result.paths.append(final)
            dirs.add(part.directory)
        for d in sorted(dirs) + [directory]:
            _fsync_dir(d)
        published = True
    finally:
        if not published:
            for part in [*open_parts.values(), *closed]:
                try:
                    part.writer.close()
                except Exception:  # noqa: BLE001 - the file is being thrown away
                    pass
                if part.tmp_path:
                    try:
                        os.unlink(part.tmp_path)
                    except OSError:
                        pass
    if cursor_file is not None:
        # Every part is durable: now the cursor may move past them.
        result.cursor.save(cursor_file)
    result.summary = dict(summary)
    return result


def _open_part(directory, table, class_oid, repid, schema: pa.Schema, base_meta) -> _Part:
    where = os.path.join(directory, table_directory(table if class_oid is not None else None))
    try:
        os.makedirs(where, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(prefix=".walcdc-", suffix=".tmp", dir=where)
    except OSError as exc:
        raise _error(f"{{}}: cannot write in {where}: {exc.strerror}") from None
    os.close(fd)
    meta = {
        **base_meta,
        "walcdc.table": table or "",
        "walcdc.class_oid": "" if class_oid is None else str(class_oid),
        "walcdc.repid": str(repid),
    }
    writer = pq.ParquetWriter(tmp_path, schema.with_metadata({**(schema.metadata or {}), **meta}))
    return _Part(where, tmp_path, writer, table, repid, meta)


def _sync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
