"""Change events: INSERT, UPDATE, DELETE and DDL read from a log set, as CUBRID's CDC would
report them, or committed work only, per transaction, in commit order, resumable."""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import warnings
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from walcdc import lsa as L
from walcdc.arrow_stream import ArrowStream
from walcdc.errors import InvalidArgumentError, LogError, LogIOError, argument_error
from walcdc.logset import LogSet, as_log, open_log
from walcdc.options import (
    OPS,
    OPTION_DEFAULTS,
    READ_OPTIONS,
    TableIndex,
    _class_oid,
    choice,
    parse_ops,
    position,
    read_options_of,
    split_list,
    with_read_options,
)

__all__ = [
    "read_changes",
    "ChangeStream",
    "TableChangeStream",
    "TableBatch",
    "Cursor",
    "OPS",
    "ENVELOPES",
]

#: Output shapes besides the plain event rows.
ENVELOPES = ("debezium",)


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
    #: What the log's class records said at or before ``restart_lsa`` (opaque bytes): the
    #: stream resumed from this cursor learns the tables defined before it from here instead
    #: of walking the log from its beginning (so older archives need not be read, nor kept).
    #: None: learned from the beginning of the log.
    catalog: Optional[bytes] = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        extra = {}
        if self.catalog is not None:
            extra["catalog"] = base64.b64encode(zlib.compress(self.catalog, 6)).decode("ascii")
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
                **extra,
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
            catalog = d.get("catalog")
            return cls(
                int(d["db_creation"]),
                restart,
                L.parse(last) if last else None,
                offset,
                position,
                engine,
                zlib.decompress(base64.b64decode(catalog, validate=True)) if catalog else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError, zlib.error):
            raise InvalidArgumentError(f"not a walcdc cursor: {text[:200]!r}") from None

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
        """Reads a cursor saved with :meth:`save`."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise argument_error(
                "cursor",
                f"{{}}: the cursor file {path} does not exist (to start at the beginning of the "
                "log, give no cursor)",
                LogIOError,
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise LogIOError(f"cannot read the cursor file {path}: {exc}", path) from None
        try:
            return cls.from_json(text)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{path}: {exc.message}", path) from None


def _stream_batches(
    native, users=None, on_warning=None, partial_emitted: bool = False
) -> Iterator[pa.RecordBatch]:
    """A stream's batches, then its warnings. Holds what it reads, never the stream object: a
    generator referring back to its stream would make a reference cycle through pyarrow's
    reader that the garbage collector cannot see, and a stream dropped half way would keep its
    volumes mapped. ``users``: a :class:`_UserCheck`."""
    for b in native:
        batch = pa.record_batch(b)
        if users is not None:
            users.see(batch)
        yield batch
    _say(_new_warnings(native, {}, partial_emitted), on_warning)
    if users is not None:
        users.finish()


class _UserCheck:
    """The users of a ``users`` filter of whom a stream had no event; at its end, a warning
    (:class:`~walcdc.UsersNotInLog`) names those no transaction of the log is by, for a
    misspelt name reads nothing, silently otherwise (an unknown table name is an error, but
    a user may simply have changed nothing)."""

    def __init__(self, log: LogSet, users: Sequence[str]):
        self._log = log
        # The filter compares names ignoring ASCII case.
        self._unseen = {_user_key(u): u for u in users}

    def see(self, batch: pa.RecordBatch) -> None:
        if self._unseen and "user" in batch.schema.names:
            for user in pc.unique(batch.column("user")).to_pylist():
                if user is not None:
                    self._unseen.pop(_user_key(user), None)

    def finish(self) -> None:
        if not self._unseen:
            return
        try:
            known = self._log.users()
        except LogError:
            return  # the stream read what it could; no second error about the log
        have = {_user_key(u) for u in known}
        missing = [u for k, u in self._unseen.items() if k not in have]
        if missing:
            from walcdc.logset import UsersNotInLog

            warnings.warn(
                UsersNotInLog(
                    f"the user filter names no user of this log: "
                    f"{', '.join(repr(u) for u in missing)} "
                    f"(its users: {', '.join(known) if known else 'none'})"
                ),
                stacklevel=4,
            )


def _user_key(name: str) -> bytes:
    return name.encode("utf-8").lower()  # bytes.lower(): ASCII only


#: What a followed stream gives between polls, in :meth:`ChangeStream.chunks`: everything
#: written so far was read, so every transaction emitted is whole (an envelope can close it).
IDLE = None


#: Where a follower says what it waits for (a log line once per distinct problem).
_follow_log = logging.getLogger("walcdc.follow")


def _waiting(problem: LogError, said: set) -> None:
    """A followed log that cannot be read on yet (a directory with no volume yet, an archive
    not copied yet, a snapshot between two steps of the server): said once per problem."""
    text = str(problem)
    if text not in said and len(said) < 64:
        said.add(text)
        _follow_log.warning("waiting for the log: %s", text)


def _follow_batches(
    native,
    *,
    log,
    paths: List[str],
    poll_interval: float,
    idle_timeout: Optional[float],
    stop: threading.Event,
    storage_options: Optional[Dict[str, str]] = None,
    on_warning=None,
    partial_emitted: bool = False,
) -> Iterator[pa.RecordBatch]:
    """A followed log's batches: what is written, then, every ``poll_interval`` seconds, what
    was written since (a fresh snapshot of ``paths``: the previous one, ``log`` at first,
    refreshed, so that a poll opens only the active volume and new archives), until ``stop`` is
    set or nothing new came for ``idle_timeout`` seconds, or the stream's ``end`` is reached.
    The last batch of a poll is flushed at once, so an event waits for no batch to fill; after
    it comes :data:`IDLE`."""
    options = list((storage_options or {}).items()) or None
    quiet_since = time.monotonic()
    failure: Optional[LogError] = None
    said: set = set()
    told: Dict[str, Any] = {}  # the warnings given so far: each is given as it happens
    while not stop.is_set():
        for b in native:
            quiet_since = time.monotonic()
            batch = pa.record_batch(b)
            _say(_new_warnings(native, told, partial_emitted), on_warning)
            yield batch
        # A poll gives whole transactions: the last one is over.
        yield IDLE
        _say(_new_warnings(native, told, partial_emitted), on_warning)
        if native.end_reason() == "requested_end":
            break  # the stream's end= is reached: nothing after it is read
        if idle_timeout is not None and time.monotonic() - quiet_since >= idle_timeout:
            if failure is not None:
                raise failure  # the log was unreadable until the end: say so
            break
        if stop.wait(poll_interval):
            break
        try:
            snapshot = _snapshot(lambda current=log: current.refreshed(paths, options))
        except LogError as exc:
            # A snapshot taken while the server writes may catch it between two steps (an
            # archive written, the header not yet saying so), or while archives are copied in:
            # look again, until the log reads or idle_timeout passes.
            _waiting(exc, said)
            failure = exc
            continue
        failure = None
        native.refresh(snapshot)
        log = snapshot
    _say(_new_warnings(native, told, partial_emitted), on_warning)


def _open_followed(
    source,
    poll_interval: float,
    idle_timeout: Optional[float],
    from_start: bool,
    storage_options: Optional[Dict[str, Any]] = None,
) -> LogSet:
    """The first snapshot of a followed log. A directory with no volume yet, or caught between
    two steps of the server or of a copy (see :func:`_snapshot`), is looked at again until it
    reads, or until ``idle_timeout`` passes with nothing new in it (its problem is raised then:
    a volume that arrives is progress, as a record is once the stream reads); a directory that
    does not exist is an error at once."""
    started = time.monotonic()
    said: set = set()
    seen = None
    while True:
        try:
            return _snapshot(lambda: open_log(source, storage_options=storage_options), from_start)
        except LogError as exc:
            gone = isinstance(source, (str, os.PathLike)) and not os.path.exists(source)
            now = _listing(source)
            if now != seen:
                seen, started = now, time.monotonic()
            waited = time.monotonic() - started
            if gone or (idle_timeout is not None and waited >= idle_timeout):
                raise
            _waiting(exc, said)
            time.sleep(max(poll_interval, 0.01))


def _listing(source):
    """What a followed directory holds (names and sizes), to tell a wait that makes progress
    from one that does not; None for anything else."""
    if not isinstance(source, (str, os.PathLike)) or not os.path.isdir(source):
        return None
    try:
        with os.scandir(source) as entries:
            return sorted((e.name, e.stat().st_size) for e in entries if e.is_file())
    except OSError:
        return None


def _snapshot(open_it, from_start: bool = False):
    """A snapshot of a followed log (``open_it()``: a :class:`LogSet` or a native one),
    refused (:class:`LogIOError`; look again) if its directory listing came before the server
    renamed its newest archive into place while its header, read after, already counts it: it
    would take that archive's pages for missing. ``from_start``: the stream reads from the
    beginning of the set, so its oldest archive must be there too when the active header says
    it was never deleted (archives copied into the directory out of order)."""
    log = open_it()
    header = getattr(log, "_native", log).header_info()
    made = header.get("nxarv_num") or 0
    numbers = {a["number"] for a in header.get("archives", [])}
    deleted = header.get("last_deleted_arv_num")
    kept_from = deleted + 1 if deleted is not None and deleted >= 0 else 0
    if made and (made - 1) not in numbers and (deleted is None or deleted < made - 1):
        raise LogIOError(f"archive {made - 1} is not in the directory yet")
    if from_start and made > kept_from and kept_from not in numbers:
        raise LogIOError(
            f"archive {kept_from} is not in the directory yet (the log's header says it was "
            "never deleted)"
        )
    if from_start and "nxarv_num" not in header and numbers and min(numbers) > 0:
        # Archives alone: only the active volume's header can say whether the older ones were
        # deleted or are yet to come.
        raise LogIOError(
            f"archive {min(numbers) - 1} is not in the directory yet (nor the active volume, "
            "whose header says which archives were deleted)"
        )
    return log


def _new_warnings(native, told: Dict[str, Any], partial_emitted: bool = False) -> List[Warning]:
    """What the stream skipped, dropped or could not decode and ``told`` (updated) does not
    hold yet, as warnings: a followed stream asks as it reads, so that a consumer running for
    days hears of a damaged record when it is read, not when the stream ends; a stream that
    ends asks once, with ``told`` empty."""
    from walcdc.logset import (
        PartialTransactionsEmitted,
        PartialTransactionsSkipped,
        SchemasUnknown,
        UnfinishedTransactionDropped,
        walk_warnings,
    )

    told.setdefault("skipped", [])
    told.setdefault("unplaced", set())
    skipped = [s for s in native.skipped() if s not in told["skipped"]]
    told["skipped"].extend(skipped)
    unplaced = [k for k in native.unplaced() if k not in told["unplaced"]]
    told["unplaced"].update(unplaced)
    beyond = native.beyond_end()
    beyond = dict(beyond) if beyond is not None else None
    if beyond == told.get("beyond_end"):
        beyond = None
    else:
        told["beyond_end"] = beyond
    out = walk_warnings(skipped, unplaced, beyond)
    stats = native.stats()

    def new(count: str, *more: str):
        """The growth of counters since they were last told: ``None`` if ``count`` did not."""
        grown = [stats.get(k, 0) - told.get(k, 0) for k in (count, *more)]
        if grown[0] <= 0:
            return None
        for k in (count, *more):
            told[k] = stats.get(k, 0)
        return grown

    restarted = new("restarted_transactions", "abandoned_events")
    if restarted:
        out.append(
            UnfinishedTransactionDropped(
                f"{restarted[0]} transaction(s) restarted under their trid before an end record: "
                f"{restarted[1]} event(s) of the unfinished one(s) dropped (a damaged log?)"
            )
        )
    partial = new("partial_transactions", "partial_events")
    if partial:
        began = "began before the oldest volume of the log set (an older archive is gone)"
        if partial_emitted:
            out.append(
                PartialTransactionsEmitted(
                    f"{partial[0]} transaction(s) {began}: their {partial[1]} event(s) the log "
                    "still holds were emitted with partial = true (the earlier ones are lost)"
                )
            )
        else:
            out.append(
                PartialTransactionsSkipped(
                    f"{partial[0]} transaction(s) {began}: their {partial[1]} event(s) the log "
                    'still holds were left out (on_partial="emit" emits them, marked partial)',
                )
            )
    unknown = new("unknown_schema_tables", "unknown_schema_events")
    if unknown:
        out.append(
            SchemasUnknown(
                f"the schema of {unknown[0]} table(s) is not in the log (created before its "
                f"oldest volume?): {unknown[1]} event(s) carry their raw images only, with "
                "decode_error set; pass schema= a schema file "
                "(walcdc.pycubrid_schema.export_schema writes one)"
            )
        )
    return out


def _say(found: List[Warning], on_warning=None) -> None:
    """Gives each warning to ``on_warning``, or warns with it."""
    for w in found:
        if on_warning is not None:
            on_warning(w)
        else:
            warnings.warn(w, stacklevel=4)


class ChangeStream(ArrowStream):
    """A stream of change events: an Arrow record batch stream with a resume :attr:`cursor`.

    Iterate it for ``pyarrow.RecordBatch`` es, call :meth:`read_all`, or hand it to anything
    that reads Arrow streams (it implements ``__arrow_c_stream__``; :attr:`reader` is the
    underlying ``pyarrow.RecordBatchReader``). Batches are built in Rust and imported without
    copying. The stream knows no output format: an envelope (:mod:`walcdc.envelope`) wraps it.
    """

    def __init__(
        self,
        native,
        info: Optional[Dict[str, Any]] = None,
        follow: Optional[Dict[str, Any]] = None,
        users: Optional[_UserCheck] = None,
        on_warning=None,
    ):
        self._native = native
        #: What the stream reads: ``committed_only``, ``db_creation``, ``database``, filters.
        self.info: Dict[str, Any] = dict(info or {})
        self.schema: pa.Schema = pa.schema(native.schema())
        said = dict(on_warning=on_warning, partial_emitted=self.info.get("on_partial") == "emit")
        if follow is not None:
            self._stop = threading.Event()
            self._chunks = _follow_batches(native, stop=self._stop, **follow, **said)
        else:
            self._chunks = _stream_batches(native, users, **said)
        batches = (b for b in self._chunks if b is not IDLE)
        self.reader: pa.RecordBatchReader = pa.RecordBatchReader.from_batches(self.schema, batches)

    def chunks(self) -> Iterator[Optional[pa.RecordBatch]]:
        """The batches, and :data:`IDLE` where a followed stream has read all that is written
        (for a consumer that acts on a quiet log, as an envelope closes the last transaction).
        Iterate either this or the stream, not both."""
        return self._chunks

    def close(self) -> None:
        """Ends the stream. A stream following a live log may be closed from another thread
        while one reads it: the reader then gets the batches already made and the end."""
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
            return
        self.reader.close()

    @property
    def cursor(self) -> Cursor:
        """The resume point after the events read so far, with the catalog at or before it."""
        fields = self._native.cursor()
        return Cursor(*fields, catalog=self._native.catalog_checkpoint(fields[1]))

    @property
    def pending(self) -> List[Dict[str, Any]]:
        """Transactions still open where the stream ended (once it has ended): ``trid``,
        ``first_lsa``, ``last_lsa``, buffered ``events``, ``user``, ``committed_with_postpone``."""
        return list(self._native.pending())

    @property
    def unplaced(self) -> List[int]:
        """LSAs of records on archived pages skipped with the rest of their page (NULL
        ``forw_lsa``, not an end marker; see :class:`walcdc.UnplacedRecordsSkipped`)."""
        return list(self._native.unplaced())

    @property
    def beyond_end(self) -> Optional[Dict[str, int]]:
        """Readable records past the torn or unwritten end of a crashed log, which the stream
        did not read: ``{"end_lsa", "first_lsa", "pages"}``, or None (see
        :class:`walcdc.RecordsBeyondEndSkipped`)."""
        b = self._native.beyond_end()
        return dict(b) if b is not None else None

    @property
    def skipped(self) -> List[Dict[str, Any]]:
        """Runs of TDE-encrypted pages skipped (with ``on_encrypted="skip"``)."""
        return list(self._native.skipped())

    @property
    def stats(self) -> Dict[str, int]:
        return dict(self._native.stats())

    def state(self):
        """What the stream knows where it stopped (the catalog, the open transactions and their
        events so far): pass it as ``read_changes(..., state=)`` to go on from there without
        reading the log before that point (chases aside). Take it once every batch was read;
        give the new stream the same filters and mode (the buffered events were made with
        them)."""
        return self._native.state()


class TableBatch(NamedTuple):
    """A batch of :class:`TableChangeStream`. ``kind``: ``"table"`` (one table's changes,
    ``before`` / ``after`` typed with the columns of its representation ``repid``),
    ``"ddl"`` (DDL that belongs to no table; the columns of :func:`read_changes` without
    images) or ``"unknown_schema"`` (changes of tables whose schema the log does not hold;
    the columns of :func:`read_changes` with the raw images)."""

    kind: str
    class_oid: Optional[int]
    table: Optional[str]
    repid: int
    batch: pa.RecordBatch


class TableChangeStream(ChangeStream):
    """Every table's typed changes, batch by batch (:func:`walcdc.read_changes_by_table`).
    Iterating it gives :class:`TableBatch` es; a table's next representation (after an ALTER),
    new column names or new name (after a RENAME) start new batches. Read :attr:`cursor`
    once the stream is over (batches of other tables are still being filled before that).
    :attr:`pending` and the rest are those of :class:`ChangeStream`."""

    def __init__(self, native, info: Optional[Dict[str, Any]] = None, users=None, on_warning=None):
        self._native = native
        self.info = dict(info or {})
        self.schema = None  # one per table and representation
        self.reader = None
        self._users = users
        self._on_warning = on_warning

    def __iter__(self) -> Iterator[TableBatch]:
        for kind, class_oid, table, repid, batch in iter(self._native.next_table, None):
            batch = pa.record_batch(batch)
            if self._users is not None:
                self._users.see(batch)
            yield TableBatch(kind, class_oid, table, repid, batch)
        emitted = self.info.get("on_partial") == "emit"
        _say(_new_warnings(self._native, {}, emitted), self._on_warning)
        if self._users is not None:
            self._users.finish()

    def _no_reader(self, *args, **kwargs):
        raise TypeError("a stream by table has one schema per table: iterate it instead")

    read_next_batch = read_all = read_pandas = __arrow_c_stream__ = _no_reader

    def close(self) -> None:
        pass


@with_read_options()
def read_changes(
    source: Union[LogSet, str, os.PathLike[str], Sequence[Any]],
    *,
    envelope: Optional[str] = None,
    envelope_options: Optional[Dict[str, Any]] = None,
    batch_size: int = 65536,
    state=None,
    follow: bool = False,
    poll_interval: float = 0.2,
    idle_timeout: Optional[float] = None,
    on_warning: Optional[Callable[[Warning], None]] = None,
    storage_options: Optional[Dict[str, Any]] = None,
    threads: int = 1,
    split_bytes: Optional[int] = None,
    **options,
) -> ChangeStream:
    """Change events of a log set (a :class:`LogSet`, or what :func:`open_log` opens: a
    directory, volume files, or a URL of object storage with its ``storage_options``).

    ``committed_only=True`` (default): the events of committed transactions, each transaction's
    events in log order right after its commit, with ``commit_lsa`` and ``commit_time``; aborted
    transactions and changes undone by a rollback to a savepoint or a failed statement are
    dropped; transactions still open at the end are in :attr:`ChangeStream.pending`.
    ``committed_only=False``: the items CUBRID's own CDC API produces, in log order, with
    ``commit``, ``abort`` and ``timer`` marker rows.

    ``start`` / ``end``: LSAs (``"pageid|offset"`` or u64) or times (aware ``datetime``, epoch
    seconds as float, or an ISO 8601 string; time to LSA as CUBRID's ``cdc_find_lsa``).
    ``cursor``: a :class:`Cursor` (or the path of one saved with :meth:`Cursor.save`) to resume
    after a previous stream.

    ``tables`` / ``exclude_tables``: table names (``t`` or ``owner.t``; a name matches the
    table it named at any time, so a renamed table is found by its old and new names;
    partitions count as their table) or class OIDs; a string is one name or a comma-separated
    list. An unknown name is an :class:`~walcdc.InvalidArgumentError` naming the nearest ones.
    A table filter keeps the DDL on its tables; ``include_ddl="all"`` keeps the DDL that
    belongs to no table (serials, users, ...) too. ``users``: user names. ``ops``: a subset of
    ``insert``, ``update``, ``delete``, ``ddl`` (plus ``commit``, ``abort``, ``timer`` markers).
    ``mode``: which images to build: ``"id"`` (none; ``key`` still holds the primary key),
    ``"before"``, ``"after"``, ``"full"``.

    ``keys``: the keys of ``before``/``after`` JSON: ``"name_then"`` (the column names in force
    when the change happened), ``"name_now"`` (the names at the end of the log: a consumer
    sees one name per column across RENAME COLUMN) or ``"id"`` (attribute ids, as in
    :meth:`LogSet.schemas`). ``envelope="debezium"``: events in Debezium's shape, of the
    committed stream; ``envelope_options`` adds Debezium's optional records
    (``{"tombstones": True, "transactions": True}``) or gives Kafka Connect's JSON form with
    typed values (``{"schemas": True, "decimal_handling": "precise"}``; see
    :mod:`walcdc.envelope`).
    ``schema``: schemas of tables created before the log window (a JSON file or dict, format
    in :mod:`walcdc.schemas`); the log's own class records take precedence. Passwords in DDL
    statements are replaced by ``***`` unless ``redact=False``.

    ``state``: a :meth:`ChangeStream.state` to go on from, reading nothing before it.

    ``threads``: read with this many threads (:func:`walcdc.parallel.default_threads` is the
    cores this process may use), each reading record-aligned ranges of about ``split_bytes``
    of log (default: about four ranges a thread, 2 to 16 MiB each) while the others read
    theirs; the rows, their order, the cursor, :attr:`ChangeStream.pending` and the state at
    the end are one thread's, and what waits in memory is bounded by the threads and the
    batch size. The cursor, pending transactions and state of such a stream are known once
    every batch was read. A followed log and a stream going on from a ``state`` are read by
    one thread.

    ``follow=True``: follow a live log (a server still writing it): the stream gives what is
    written, then polls every ``poll_interval`` seconds for more (the header read again, new
    archives found) and never ends by itself unless ``idle_timeout`` seconds pass with nothing
    new or the log reaches ``end``; :meth:`ChangeStream.close` (from any thread) ends it.
    Records are read only once what follows them is written, so a page being written is never
    read half way. Give the log's directory as ``source`` so that new archives are found.

    A transaction whose first record lies before the log set's oldest volume (an older archive
    was deleted) has lost its earlier events: ``on_partial="skip"`` (default) leaves it out,
    ``"emit"`` emits what the log still holds of it with ``partial`` set; either way it is
    counted (``stats["partial_transactions"]``) and warned about
    (:class:`~walcdc.PartialTransactionsSkipped`). What a stream skips, drops or cannot decode
    is warned about (``UserWarning`` subclasses; a followed stream as it reads) or, with
    ``on_warning``, given to that callable instead.

    ``on_error="skip"`` turns a record whose images cannot be rebuilt into an event with the
    reason in ``error`` instead of raising. Buffered events past ``memory_limit`` bytes spill to
    a temporary file. ``decode=False`` leaves ``before``/``after``/``key``/``changed_columns``
    empty (the raw images stay) for the fastest extraction.

    The read options (``start`` to ``redact``: every one but ``source``, the envelope's, the
    batch size, ``state``, following, ``on_warning`` and ``storage_options``) are declared once
    for every API, Spark and the CLI; :data:`walcdc.options.READ_OPTIONS` lists them.
    """
    options = read_options_of("read_changes", options)
    start, cursor = options["start"], options["cursor"]
    committed_only = options["committed_only"]
    if follow and (poll_interval <= 0 or (idle_timeout is not None and idle_timeout < 0)):
        raise argument_error("poll_interval", "{} must be positive (and idle_timeout at least 0)")
    if follow and not isinstance(source, LogSet):
        from_start = start is None and cursor is None and state is None
        log = _open_followed(source, poll_interval, idle_timeout, from_start, storage_options)
    else:
        log = as_log(source, storage_options)
    if envelope is not None:
        choice("envelope", envelope, ENVELOPES)
        if not committed_only:
            # Debezium's events are committed changes in commit order, with a transaction's
            # position; the engine's stream interleaves open transactions.
            raise argument_error("envelope", "{} needs the committed stream (committed_only=True)")
    if envelope_options is not None:
        from walcdc.envelope import envelope_options as check_options

        if envelope is None:
            raise argument_error("envelope_options", '{} needs envelope="debezium"')
        envelope_options = check_options(envelope_options)
    follow_args = None
    if follow:
        follow_args = dict(
            log=log._native,
            paths=log._paths,
            storage_options=log._storage_options,
            poll_interval=float(poll_interval),
            idle_timeout=idle_timeout,
        )
    return _open_stream(
        log,
        options,
        batch_size=batch_size,
        state=state,
        envelope=envelope,
        envelope_options=envelope_options,
        follow=follow_args,
        check_users=True,
        on_warning=on_warning,
        threads=threads,
        split_bytes=split_bytes,
    )


#: Log between two catalog checkpoints a stream takes for its cursors (see ``Cursor.catalog``):
#: a stream resumed from a cursor walks at most about this much before its restart point.
_CHECKPOINT_EVERY = 64 << 20


def _open_stream(
    log: LogSet,
    options: Dict[str, Any],
    *,
    batch_size: int,
    state=None,
    envelope: Optional[str] = None,
    envelope_options: Optional[Dict[str, Any]] = None,
    columns=None,
    by_table: bool = False,
    follow: Optional[Dict[str, Any]] = None,
    narrow: Optional[Dict[str, Any]] = None,
    check_users: bool = False,
    on_warning: Optional[Callable[[Warning], None]] = None,
    threads: int = 1,
    split_bytes: Optional[int] = None,
) -> ChangeStream:
    """A change stream with ``options`` (of :func:`_native_options`); with ``columns``, one
    table's typed changes (column dicts of :meth:`LogSet.schemas`); ``by_table``: a
    :class:`TableChangeStream` of every table's typed changes; ``follow``: the arguments of
    :func:`_follow_batches` to follow a live log; ``narrow``: filters pushed by a query engine
    (``tables`` as class OIDs, ``ops``) that leave the rows that pass them as they are in the
    whole stream (``txn_seq`` included) and read no image for the others; ``check_users``:
    warn at the end about users of the ``users`` filter the log does not know
    (:class:`_UserCheck`)."""
    options = read_options_of("read_changes", options)
    if state is not None and (options["cursor"] is not None or options["start"] is not None):
        raise argument_error("state", "{} says where to start: give no start= or cursor= with it")
    if int(threads) < 1:
        raise argument_error("threads", f"{{}}{threads} must be at least 1")
    kwargs = _native_options(log, **options)
    native_options = log._native.change_options(
        **kwargs,
        follow=follow is not None,
        checkpoint_every=_CHECKPOINT_EVERY,
        narrow_tables=(narrow or {}).get("tables"),
        narrow_ops=(narrow or {}).get("ops"),
    )
    if threads > 1 and follow is None and state is None and narrow is None:
        from walcdc.threaded import ThreadedChanges

        native = ThreadedChanges(
            log,
            kwargs,
            threads=int(threads),
            batch_size=int(batch_size),
            split_bytes=split_bytes,
            columns=columns,
            by_table=by_table,
        )
    else:
        native = log._native.changes(
            native_options,
            batch_size=int(batch_size),
            state=state,
            columns=columns,
            by_table=by_table,
        )
    header = log._native.header_info()
    info = {
        "committed_only": bool(options["committed_only"]),
        "db_creation": header["db_creation"],
        "database": header.get("prefix") or _database_name(header),
        "envelope": envelope,
        "on_partial": options["on_partial"],
    }
    # A followed log may yet hold the users it lacks now; a part of a parallel read may lack
    # them alone.
    users = split_list(options["users"]) if check_users and follow is None else None
    check = _UserCheck(log, [str(u) for u in users]) if users else None
    if by_table:
        return TableChangeStream(native, info, users=check, on_warning=on_warning)
    stream = ChangeStream(native, info, follow=follow, users=check, on_warning=on_warning)
    if envelope == "debezium":
        from walcdc.envelope import Debezium, EnvelopedStream

        columns = None
        if (envelope_options or {}).get("schemas"):
            from walcdc.connect import TableColumns

            cursor = _cursor(options)
            since = cursor.catalog if cursor is not None else None
            columns = TableColumns(log, options["keys"], since, follow=follow is not None)
        transform = Debezium(info["database"], envelope_options, columns)
        transform.prime(_transaction_head(log, options, batch_size))
        return EnvelopedStream(stream, transform)
    return stream


def _cursor(options: Dict[str, Any]) -> Optional[Cursor]:
    cursor = options["cursor"]
    return Cursor.load(cursor) if cursor is not None and not isinstance(cursor, Cursor) else cursor


def _transaction_head(log: LogSet, options: Dict[str, Any], batch_size: int):
    """The events a stream resumed inside a transaction skips (the cursor's ``txn_offset``
    first events of that transaction), read again without images, so that an envelope counts
    the transaction's events on from there."""
    cursor = _cursor(options)
    if cursor is None or not cursor.txn_offset:
        return
    head = {**options, "cursor": replace(cursor, txn_offset=0), "mode": "id"}
    left = cursor.txn_offset
    for batch in _open_stream(log, head, batch_size=min(batch_size, left)):
        yield batch.slice(0, left)
        left -= batch.num_rows
        if left <= 0:
            return


def _native_options(log: LogSet, **options) -> Dict[str, Any]:
    """The read options (:data:`~walcdc.options.READ_OPTIONS`; those not given take their
    defaults), checked and resolved against ``log`` (table names to class OIDs, times to LSAs,
    a cursor file to its cursor, a schema file to its tables): keyword arguments of the native
    ``change_options``, plain Python values (Spark ships them to its tasks)."""
    given = {**OPTION_DEFAULTS, **read_options_of("read_changes", options)}
    for name, option in READ_OPTIONS.items():
        if option.kind == "choice":
            choice(name, given[name], option.choices)
    user_schemas = None
    if given["schema"] is not None:
        from walcdc.schemas import load_schema

        user_schemas = load_schema(given["schema"])
    cursor = given["cursor"]
    if cursor is not None and not isinstance(cursor, Cursor):
        cursor = Cursor.load(cursor)
    if cursor is not None and given["start"] is not None:
        raise argument_error("start", "give {} or cursor=, not both")
    indexes: List[TableIndex] = []

    def tables(value, argument: str) -> Optional[List[int]]:
        if value is None:
            return None
        # Class OIDs need no schemas; names need the tables the log defines (a walk).
        direct = [_class_oid(item) for item in split_list(value) or []]
        if all(o is not None for o in direct):
            return direct
        if not indexes:
            since = cursor.catalog if cursor is not None else None
            indexes.append(TableIndex.of(log, user_schemas or (), since))
        return indexes[0].resolve(value, argument)

    def users(value, _argument: str) -> Optional[List[str]]:
        names = split_list(value)
        return [str(u) for u in names] if names is not None else None

    resolvers = {
        "position": lambda value, argument: position(log, value, argument),
        "tables": tables,
        "users": users,
        "ops": lambda value, _argument: parse_ops(value),
        "schema": lambda _value, _argument: user_schemas,
        "cursor": lambda _value, _argument: _cursor_tuple(cursor),
    }
    out: Dict[str, Any] = {}
    for name, option in READ_OPTIONS.items():
        value = given[name]
        if option.resolve in resolvers:
            value = resolvers[option.resolve](value, name)
        elif option.kind == "bool":
            value = bool(value)
        elif option.kind == "int":
            value = int(value)
        out[name] = value
    out["checkpoint"] = cursor.catalog if cursor else None
    return out


def _cursor_tuple(cursor: Optional[Cursor]) -> Optional[tuple]:
    """A cursor as the native side takes it."""
    if cursor is None:
        return None
    position = cursor.position if cursor.position is not None else cursor.restart_lsa
    return (
        cursor.db_creation,
        cursor.restart_lsa,
        cursor.last_commit_lsa,
        cursor.txn_offset,
        position,
        cursor.engine,
    )


def _database_name(header: Dict[str, Any]) -> Optional[str]:
    """The database name from a volume's file name (``<db>_lgarNNN``) when no active header
    names it."""
    for v in header.get("volumes", []):
        name = v["file"]
        if "_lg" in name:
            return name.rsplit("_lg", 1)[0]
    return None
