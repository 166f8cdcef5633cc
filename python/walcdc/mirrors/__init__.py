"""Mirrors: tables in a lake format kept equal to CUBRID's tables, from the log alone.

:func:`mirror` (``walcdc mirror LOGDIR --to delta:DIR``) applies the committed changes of every
table in commit order to one target table per CUBRID table, merged by primary key (by row OID
for a table without one). The log is read in rounds of about ``commit_every`` bytes; each round
ends with one commit per table it changed, which carries the commit LSA of the last transaction
it applied, atomically with the rows. A run reads those positions back and skips what each
table holds, so a run killed at any moment and run again leaves every table as one
uninterrupted run would. ``_walcdc_mirror.json`` in the target only says where to start
reading (a cursor no later than any table's position): lost or stale, it costs reading, never
a change lost or applied twice. docs/mirror.md has the guarantees and the schema changes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from walcdc.errors import argument_error
from walcdc.mirrors.reduce import COMMIT_LSA, COMMIT_TIME, ROW_OID, MirrorError, layout_of
from walcdc.sinks.loop import Writer, deliver

__all__ = [
    "COMMIT_LSA",
    "COMMIT_TIME",
    "CURSOR_FILE",
    "ROW_OID",
    "MirrorError",
    "MirrorResult",
    "mirror",
]

#: Where the target keeps the cursor a run starts reading from.
CURSOR_FILE = "_walcdc_mirror.json"
#: Read options a mirror takes (the rest of :func:`walcdc.read_changes`' do not apply: a
#: mirror reads the committed, typed stream).
OPTIONS = ("tables", "exclude_tables", "users", "schema", "start", "end", "on_encrypted")
OPTIONS += ("memory_limit",)
TARGETS = ("delta", "iceberg")


@dataclass
class MirrorResult:
    """What a :func:`mirror` run did: ``rounds`` of reading, ``commits`` made (one per table
    and round that changed it), ``rows`` written (inserted or replaced), ``deleted`` keys, the
    ``tables`` changed (owner.table) and the ``cursor`` it saved last."""

    rounds: int = 0
    commits: int = 0
    rows: int = 0
    deleted: int = 0
    tables: Set[str] = field(default_factory=set)
    cursor: Any = None


def _target(to: str) -> Tuple[str, str]:
    kind, sep, where = str(to).partition(":")
    if not sep or kind not in TARGETS or not where:
        text = f"{{}}{to!r}: give delta:DIRECTORY or iceberg:DIRECTORY"
        raise argument_error("to", text)
    return kind, where


#: The options that choose which changes a mirror holds: a run with others would go on from a
#: cursor that did not read what they now take in (a table added to ``tables=`` would miss its
#: history before the cursor).
CHOOSING = ("tables", "exclude_tables", "users")


def _chosen(options: Dict[str, Any]) -> Dict[str, Any]:
    def plain(value):
        if value is None:
            return None
        if isinstance(value, (str, int)):
            return [str(value)]
        return sorted(str(v) for v in value)

    return {k: plain(options.get(k)) for k in CHOOSING}


def _load_cursor(root: str, db_creation: int, options: Dict[str, Any]):
    from walcdc.changes import Cursor

    path = os.path.join(root, CURSOR_FILE)
    try:
        with open(path) as f:
            saved = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MirrorError(
            f"{path}: cannot be read ({exc}); delete it to read the log again from its beginning",
            file=path,
        ) from None
    if saved.get("db_creation") != db_creation:
        raise MirrorError(f"{path} belongs to a mirror of another database", file=path)
    before = saved.get("chosen", _chosen({}))
    if before != _chosen(options):
        raise MirrorError(
            f"{path}: the mirror was made with {before}, this run asks for "
            f"{_chosen(options)}: its cursor did not read what the new choice takes in. Delete "
            "the file to read the log again from its beginning (each table keeps its own "
            "position: nothing is applied twice), or give the same options",
            file=path,
        )
    return Cursor.from_json(saved["cursor"])


def _save_cursor(root: str, cursor, options: Dict[str, Any]) -> None:
    path = os.path.join(root, CURSOR_FILE)
    tmp = f"{path}.tmp-{os.getpid()}"
    saved = {"db_creation": cursor.db_creation, "chosen": _chosen(options)}
    with open(tmp, "w") as f:
        json.dump({**saved, "cursor": cursor.to_json()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def mirror(
    source,
    to: str,
    *,
    commit_every: int = 64 << 20,
    follow: bool = False,
    poll_interval: float = 1.0,
    idle_timeout: Optional[float] = None,
    storage_options: Optional[Dict[str, str]] = None,
    catalog: Optional[Dict[str, str]] = None,
    on_round: Optional[Callable[[MirrorResult, Optional[int]], None]] = None,
    **options,
) -> MirrorResult:
    """Applies the committed changes of ``source`` (a log directory, files or a
    :class:`walcdc.LogSet`) not yet in ``to`` to one table per CUBRID table there, and returns
    what it did. ``to``: ``"delta:DIRECTORY"`` (Delta Lake tables in the directory) or
    ``"iceberg:DIRECTORY"`` (Iceberg tables in a SQL catalog on SQLite in the directory, or,
    with ``catalog=`` (the properties of ``pyiceberg.catalog.load_catalog``), in that catalog;
    the directory then holds only the cursor file).

    ``commit_every``: bytes of log per round (each round ends with a commit per table it
    changed). ``follow``: keep going as the log grows (every ``poll_interval`` seconds;
    ``idle_timeout``: stop after that long with nothing new). ``on_round(result, lsa)`` is
    called after each round with the LSA read up to. Options: ``tables``, ``exclude_tables``,
    ``users``, ``schema``, ``on_encrypted``, ``memory_limit`` as in
    :func:`walcdc.read_changes`, ``start`` (where a mirror with no saved position starts
    reading) and ``end`` (where a run stops).

    >>> import tempfile, walcdc
    >>> out = tempfile.mkdtemp()
    >>> done = walcdc.mirror(walcdc.samples.sample_path(), f"delta:{out}")
    >>> sorted(done.tables)[:2]
    ['breadth_user.u_notes', 'dba.t_chg']
    """
    kind, root = _target(to)
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise TypeError(f"mirror() got unexpected arguments {sorted(unknown)}")
    if commit_every <= 0:
        raise argument_error("commit_every", "{} must be a positive number of bytes")
    result = MirrorResult()
    idle_since = time.monotonic()
    while True:
        before = (result.commits, result.cursor)
        target = _open_target(kind, storage_options, catalog)
        _run(source, root, target, commit_every, options, result, on_round)
        if not follow:
            return result
        if (result.commits, result.cursor) != before:
            idle_since = time.monotonic()
        elif idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
            return result
        time.sleep(poll_interval)


def _open_target(kind: str, storage_options, catalog) -> Callable[[str, int], Any]:
    """How to open the target: (directory, db_creation) -> the target."""
    if kind == "delta":
        if catalog:
            raise argument_error("catalog", "{} is for iceberg: targets")
        from walcdc.mirrors.delta import DeltaTarget

        return lambda root, db: DeltaTarget(root, db, storage_options)
    from walcdc.mirrors.iceberg import IcebergTarget

    return lambda root, db: IcebergTarget(root, db, catalog)


def _run(source, root, open_target, commit_every, options, result, on_round) -> None:
    """One pass: from the saved cursor to the end of the log as it is now."""
    from walcdc.changes import _open_stream
    from walcdc.logset import LogSet, open_log

    log = source if isinstance(source, LogSet) and not result.rounds else None
    if log is None:
        log = source.reopen() if isinstance(source, LogSet) else open_log(source)
    db_creation = log.header()["db_creation"]
    os.makedirs(root, exist_ok=True)
    target = open_target(root, db_creation)
    cursor = _load_cursor(root, db_creation, options)
    start = None if cursor is not None else options.get("start")
    from walcdc.options import position

    first = cursor.position if cursor is not None else position(log, start, "start")
    catalog = cursor.catalog if cursor is not None else None
    columns = {
        (s["class_oid"], r["repid"]): {c["id"]: c for c in r["columns"]}
        for s in log._schemas_shared(options.get("on_encrypted", "raise"), since=catalog)
        for r in s["representations"]
    }
    last = position(log, options.get("end"), "end")
    if last is not None and first is not None and last <= first:
        return
    applied: Dict[int, Optional[int]] = {}
    for _, end in log.ranges(commit_every, first):
        if last is not None and (end is None or end >= last):
            end = last
        read = {k: v for k, v in options.items() if k not in ("start", "end")}
        chosen = {**read, "keys": "id", "end": end}
        if cursor is not None:
            chosen["cursor"] = cursor
        else:
            chosen["start"] = start
        # Batches of a few thousand rows: the by-table stream fills one per table at a time.
        stream = _open_stream(log, chosen, batch_size=8192, by_table=True, check_users=True)
        writer = _RoundWriter(target, columns, applied, result)

        def save(found) -> None:
            # A cursor that has passed no commit yet says nothing the saved one lacks.
            if found.last_commit_lsa is not None:
                _save_cursor(root, found, options)

        found = deliver(stream, writer, save)
        result.rounds += 1
        if found.last_commit_lsa is not None:
            cursor = result.cursor = found
        if on_round is not None:
            on_round(result, end)
        if last is not None and end == last:
            return


class _RoundWriter(Writer):
    """One round of a mirror on the delivery loop: a round's changes gathered by table, then
    each table's reduced and applied in one commit of the target (which records the version it
    reached: applying the round again after a crash changes nothing). The cursor is saved after
    the commits, only once it has passed a commit."""

    def __init__(self, target, columns, applied: Dict[int, Optional[int]], result):
        self.target, self.columns, self.applied, self.result = target, columns, applied, result
        self.grouped: Dict[int, List[Tuple[Any, Any]]] = {}
        self.unknown: Set[str] = set()

    def write(self, tb) -> None:
        if tb.kind == "unknown_schema":
            self.unknown.update(str(t) for t in tb.batch.column("table").to_pylist())
            return
        if tb.kind != "table":
            return
        cols = self.columns.get((tb.class_oid, tb.repid))
        if cols is None:
            self.unknown.add(tb.table)
            return
        layout = layout_of(tb.table, tb.batch.schema.field("after").type, cols)
        self.grouped.setdefault(tb.class_oid, []).append((layout, tb.batch))

    def finish(self, cursor) -> None:
        from walcdc.mirrors.reduce import reduce_changes

        if self.unknown:
            raise MirrorError(
                f"the log does not hold the columns of {', '.join(sorted(self.unknown))} "
                "(created before its oldest volume): give schema= (walcdc schema of a log "
                "that has them), or leave them out with exclude_tables="
            )
        result, applied = self.result, self.applied
        for oid, batches in self.grouped.items():
            if oid not in applied:
                applied[oid] = self.target.applied(oid)
            changes = reduce_changes(oid, batches, applied[oid])
            if changes is None:
                continue
            self.target.apply(changes)
            applied[oid] = changes.version
            result.commits += 1
            result.rows += changes.rows.num_rows
            result.deleted += changes.gone.num_rows
            result.tables.add(changes.layout.table)
