"""Change events: INSERT, UPDATE, DELETE and DDL read from a log set, as CUBRID's CDC would
report them, or committed work only, per transaction, in commit order, resumable."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import pyarrow as pa

from walcdc import lsa as L
from walcdc.errors import InvalidArgumentError
from walcdc.logset import LogSet, open_log

__all__ = ["read_changes", "ChangeStream", "Cursor", "OPS"]

#: Operation names of the ``op`` column.
OPS = ("insert", "update", "delete", "ddl", "commit", "abort", "timer")


@dataclass(frozen=True)
class Cursor:
    """Where to resume a stream: restart the walk at ``restart_lsa`` (the first record of the
    oldest transaction still open) and skip every commit at or before ``last_commit_lsa``;
    ``txn_offset`` events of the next committed transaction were already emitted (a stream may
    stop inside a large transaction). Tied to its database by ``db_creation``. LSAs are
    order-preserving u64 (:mod:`walcdc.lsa`).
    """

    db_creation: int
    restart_lsa: int
    last_commit_lsa: Optional[int]
    txn_offset: int = 0
    #: Where the previous stream stopped reading (markers before it were emitted).
    position: Optional[int] = None
    #: A cursor of the engine-compatible stream (``committed_only=False``).
    engine: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "db_creation": self.db_creation,
                "restart_lsa": L.format_lsa(self.restart_lsa),
                "last_commit_lsa": (
                    L.format_lsa(self.last_commit_lsa) if self.last_commit_lsa is not None else None
                ),
                "txn_offset": self.txn_offset,
                "position": L.format_lsa(
                    self.position if self.position is not None else self.restart_lsa
                ),
                "stream": "engine" if self.engine else "committed",
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Cursor:
        try:
            d = json.loads(text)
            last = d.get("last_commit_lsa")
            restart = L.parse(d["restart_lsa"])
            offset = int(d.get("txn_offset", 0))
            position = L.parse(d["position"]) if d.get("position") else restart
            engine = d.get("stream", "committed") == "engine"
            return cls(
                int(d["db_creation"]),
                restart,
                L.parse(last) if last else None,
                offset,
                position,
                engine,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"not a walcdc cursor: {text[:200]!r}") from exc

    def save(self, path: Union[str, os.PathLike[str]]) -> None:
        """Writes the cursor atomically (temporary file, fsync, rename)."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(self.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Union[str, os.PathLike[str]]) -> Cursor:
        with open(path) as f:
            return cls.from_json(f.read())


class ChangeStream:
    """A stream of change events: an Arrow record batch stream with a resume :attr:`cursor`.

    Iterate it for ``pyarrow.RecordBatch`` es, call :meth:`read_all`, or hand it to anything
    that reads Arrow streams (it implements ``__arrow_c_stream__``; :attr:`reader` is the
    underlying ``pyarrow.RecordBatchReader``). Batches are built in Rust and imported without
    copying.
    """

    def __init__(self, native):
        self._native = native
        self.schema: pa.Schema = pa.schema(native.schema())
        self.reader: pa.RecordBatchReader = pa.RecordBatchReader.from_batches(
            self.schema, self._batches()
        )

    def _batches(self) -> Iterator[pa.RecordBatch]:
        for b in self._native:
            yield pa.record_batch(b)
        from walcdc.logset import _warn_skipped

        _warn_skipped(self.skipped)

    # The RecordBatchReader interface.
    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self.reader)

    def read_next_batch(self) -> pa.RecordBatch:
        return self.reader.read_next_batch()

    def read_all(self) -> pa.Table:
        return self.reader.read_all()

    def read_pandas(self, **kw):
        return self.reader.read_pandas(**kw)

    def __arrow_c_stream__(self, requested_schema=None):
        return self.reader.__arrow_c_stream__(requested_schema)

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> ChangeStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def cursor(self) -> Cursor:
        """The resume point after the events read so far."""
        return Cursor(*self._native.cursor())

    @property
    def pending(self) -> List[Dict[str, Any]]:
        """Transactions still open where the stream ended (once it has ended): ``trid``,
        ``first_lsa``, ``last_lsa``, buffered ``events``, ``user``, ``committed_with_postpone``."""
        return list(self._native.pending())

    @property
    def skipped(self) -> List[Dict[str, Any]]:
        """Runs of TDE-encrypted pages skipped (with ``on_encrypted="skip"``)."""
        return list(self._native.skipped())

    @property
    def stats(self) -> Dict[str, int]:
        return dict(self._native.stats())


def _class_oid(value: Union[int, str]) -> Optional[int]:
    """A class OID in CUBRID's CDC packing from an int or ``volid|pageid|slotid`` text; ``None``
    for a table name."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    parts = text.split("|")
    if len(parts) == 3 and all(p.strip().lstrip("-").isdigit() for p in parts):
        vol, page, slot = (int(p) for p in parts)
        return (page & 0xFFFFFFFF) | ((slot & 0xFFFF) << 32) | ((vol & 0xFFFF) << 48)
    if "|" in text or not text:
        raise InvalidArgumentError(f"not a table name or class OID: {value!r}")
    return None


def _split_tables(values):
    """(class OIDs, names) of a table filter; names are matched with the schemas of the log."""
    if values is None:
        return None, None
    oids, names = [], []
    for v in values:
        oid = _class_oid(v)
        if oid is None:
            names.append(str(v).strip())
        else:
            oids.append(oid)
    return oids, names


def _position(log: LogSet, value, what: str) -> Optional[int]:
    """An LSA from an LSA (int or 'pageid|offset') or a time (datetime or epoch float)."""
    import datetime

    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidArgumentError(f"{what}: give a timezone-aware datetime")
        value = value.timestamp()
    if isinstance(value, float):
        lsa, _adjusted = log._native.find_lsa(int(value))
        return lsa
    return L.coerce(value)


def read_changes(
    source: Union[LogSet, str, os.PathLike[str], Sequence[Any]],
    *,
    start=None,
    end=None,
    tables: Optional[Iterable[Union[int, str]]] = None,
    exclude_tables: Optional[Iterable[Union[int, str]]] = None,
    users: Optional[Iterable[str]] = None,
    ops: Optional[Iterable[str]] = None,
    include_trigger: bool = True,
    committed_only: bool = True,
    mode: str = "full",
    schema=None,
    cursor: Union[Cursor, str, os.PathLike[str], None] = None,
    on_error: str = "raise",
    memory_limit: int = 256 << 20,
    on_encrypted: str = "raise",
    batch_size: int = 65536,
    decode: bool = True,
    _keys_by_id: bool = False,
) -> ChangeStream:
    """Change events of a log set.

    ``committed_only=True`` (default): the events of committed transactions, each transaction's
    events in log order right after its commit, with ``commit_lsa`` and ``commit_time``; aborted
    transactions and changes undone by a rollback to a savepoint or a failed statement are
    dropped; transactions still open at the end are in :attr:`ChangeStream.pending`.
    ``committed_only=False``: the items CUBRID's own CDC API produces, in log order, with
    ``commit``, ``abort`` and ``timer`` marker rows.

    ``start`` / ``end``: LSAs (``"pageid|offset"`` or u64) or times (aware ``datetime`` or epoch
    seconds as float; time to LSA as CUBRID's ``cdc_find_lsa``). ``cursor``: a :class:`Cursor`
    (or a path to one saved with :meth:`Cursor.save`) to resume after a previous stream.
    ``tables`` / ``exclude_tables``: table names (``t`` or ``owner.t``, matched with the schemas
    learned from the log, partitions under their table) or class OIDs. ``users``: user names.
    ``ops``: a subset of
    ``insert``, ``update``, ``delete``, ``ddl`` (plus ``commit``, ``abort``, ``timer`` markers).
    ``mode``: which images to build: ``"id"`` (none), ``"before"``, ``"after"``, ``"full"``.
    ``schema``: schemas of tables created before the log window (a JSON file or dict, format in
    :mod:`walcdc.schemas`); the log's own class records take precedence.
    ``on_error="skip"`` turns a record whose images cannot be rebuilt into an event with the
    reason in ``error`` instead of raising. Buffered events past ``memory_limit`` bytes spill to
    a temporary file. ``decode=False`` leaves ``before``/``after``/``changed_columns`` empty
    (the raw images stay) for the fastest extraction.
    """
    log = source if isinstance(source, LogSet) else open_log(source)
    user_schemas = None
    if schema is not None:
        from walcdc.schemas import load_schema

        user_schemas = load_schema(schema)
    if cursor is not None and not isinstance(cursor, Cursor):
        cursor = Cursor.load(cursor)
    if cursor is not None and start is not None:
        raise InvalidArgumentError("give start or cursor, not both")
    ops_list = None
    if ops is not None:
        ops_list = [str(o).lower() for o in ops]
        bad = [o for o in ops_list if o not in OPS]
        if bad:
            raise InvalidArgumentError(f"unknown ops {bad}; choose from {list(OPS)}")
    table_oids, table_names = _split_tables(list(tables) if tables is not None else None)
    if tables is not None and not table_names:
        table_names = None
    elif tables is not None and not table_oids:
        table_oids = None
    exclude_oids, exclude_names = _split_tables(list(exclude_tables or []))
    native = log._native.changes(
        start=_position(log, start, "start"),
        end=_position(log, end, "end"),
        committed_only=committed_only,
        mode=mode,
        tables=table_oids,
        exclude_tables=exclude_oids or None,
        table_names=table_names,
        exclude_table_names=exclude_names or None,
        users=list(users) if users is not None else None,
        ops=ops_list,
        include_trigger=include_trigger,
        cursor=(
            (
                cursor.db_creation,
                cursor.restart_lsa,
                cursor.last_commit_lsa,
                cursor.txn_offset,
                cursor.position if cursor.position is not None else cursor.restart_lsa,
                cursor.engine,
            )
            if cursor
            else None
        ),
        memory_limit=int(memory_limit),
        on_error=on_error,
        on_encrypted=on_encrypted,
        batch_size=int(batch_size),
        decode=bool(decode),
        user_schemas=user_schemas,
        keys_by_id=_keys_by_id,
    )
    return ChangeStream(native)
