"""Typed output by table: one Parquet dataset (a directory of parts) per table.

Each table's rows go to ``DIR/<table>/``, with ``before`` / ``after`` typed with the table's
columns (the mapping of docs/typed.md) and the change metadata of :func:`walcdc.read_changes`.
A run adds one part per table and representation: when an ALTER gives the table a new
representation, the rows after it go to a new part whose schema has the new columns; after a
RENAME TABLE, the table's rows go to the directory of its new name. A part is named by the
commit LSA of its first row and the representation id, so a run repeated from the same cursor
(after a crash before the cursor was saved) writes parts of the same names again, replacing
them, however far it reads. Each part records the run that wrote it (``walcdc.run_from``: the
cursor it started from, or ``beginning``; ``walcdc.run_options``: a digest of the options that
chose what was read): a part of another run, or with rows the new one lacks, is never replaced
without ``overwrite``. DDL that belongs to no table (users, grants, ...) goes to
``DIR/_ddl/``; changes of tables whose schema the log does not hold (created before its oldest
volume; give ``schema=``) to ``DIR/_unknown_schema/``, with their raw images.

Reading a table's history across parts: ``pyarrow.dataset.dataset(DIR/<table>)`` unifies the
parts' schemas (``unify_schemas``: columns added by ALTER are null in older parts), and DuckDB
reads them with ``read_parquet('DIR/<table>/*.parquet', union_by_name = true)``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from walcdc import lsa as L
from walcdc.errors import OutputError, argument_error
from walcdc.sinks.base import WriteResult, _count, _create_temp, _error, _fsync_dir, _remove

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
    schema: Optional[pa.Schema] = None
    first: Optional[int] = None
    last: Optional[int] = None
    rows: int = 0

    def name(self) -> str:
        page, offset = L.split(self.first)
        rep = f"-r{self.repid}" if self.repid >= 0 else ""
        return f"part-{page:012d}_{offset:05d}{rep}.parquet"


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
        # The run that wrote the part: who may replace it.
        "walcdc.run_from": str(info.get("run_from", "")),
        "walcdc.run_options": str(info.get("run_options", "")),
    }
    result = WriteResult()
    summary: Counter = Counter()
    open_parts: Dict[Union[int, str], _Part] = {}
    parts: list = []  # every part begun, open or closed
    temps: List[str] = []  # their temporary files: what a failure removes
    published = False
    try:
        for item in stream:
            batch = item.batch
            key = item.class_oid if item.kind == "table" else item.kind
            part = open_parts.get(key)
            # Rust begins new batches for a new representation, name or column names.
            if part is not None and (
                (part.repid, part.table) != (item.repid, item.table)
                or not part.schema.equals(batch.schema)
            ):
                part.writer.close()
                del open_parts[key]
                part = None
            if part is None:
                where = {"ddl": OTHER_DDL, "unknown_schema": UNKNOWN_SCHEMA}.get(item.kind)
                where = os.path.join(directory, where or table_directory(item.table))
                part = _Part(where, "", None, item.table, item.repid)
                parts.append(part)
                meta = {
                    **base_meta,
                    "walcdc.table": item.table or "",
                    "walcdc.class_oid": "" if item.class_oid is None else str(item.class_oid),
                    "walcdc.repid": str(item.repid),
                    "walcdc.kind": item.kind,
                }
                part.schema = batch.schema
                _open_part(part, batch.schema, meta, temps)
                open_parts[key] = part
            first, last = _positions(batch)
            part.first = first if part.first is None else part.first
            part.last = last if last is not None else part.last
            part.rows += batch.num_rows
            part.writer.write_batch(batch)
            result.rows += batch.num_rows
            if first is not None and (result.first_lsa is None or first < result.first_lsa):
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
        open_parts.clear()
        for part in parts:  # all checked before any is published
            _check_replace(os.path.join(part.directory, part.name()), part, base_meta, overwrite)
        for part in parts:
            _sync(part.tmp_path)
        dirs = set()
        for part in parts:
            final = os.path.join(part.directory, part.name())
            os.replace(part.tmp_path, final)  # checked above: a part of a repeat of this run
            part.tmp_path = ""
            result.paths.append(final)
            dirs.add(part.directory)
        for d in sorted(dirs) + [directory]:
            _fsync_dir(d)
        published = True
    finally:
        if not published:
            for part in parts:
                if part.writer is not None:
                    try:
                        part.writer.close()
                    except Exception:  # noqa: BLE001 - the file is being thrown away
                        pass
            _remove(temps)
    if cursor_file is not None:
        # Every part is durable: now the cursor may move past them.
        result.cursor.save(cursor_file)
    result.summary = dict(summary)
    return result


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
