"""Log sets: the volumes of one database's write-ahead log, and the records in them."""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from walcdc import _native
from walcdc.errors import LogError, argument_error

__all__ = [
    "LogSet",
    "open_log",
    "as_log",
    "Volumes",
    "EncryptedPagesSkipped",
    "UnplacedRecordsSkipped",
    "UnfinishedTransactionDropped",
    "RecordsBeyondEndSkipped",
    "PartialTransactionsSkipped",
    "PartialTransactionsEmitted",
    "SchemasUnknown",
    "UsersNotInLog",
]

PathLike = Union[str, "os.PathLike[str]"]


class EncryptedPagesSkipped(UserWarning):
    """A walk with ``on_encrypted="skip"`` skipped a run of TDE-encrypted pages."""


class UnplacedRecordsSkipped(UserWarning):
    """Records on archived pages with a NULL ``forw_lsa`` or an end-of-log type: the walk
    cannot tell where they end, goes on at the next page (as the engine does), and the rest of
    their page is not read (a damaged archive). ``log.last_walk["unplaced"]`` /
    ``stream.unplaced`` list them."""


class UnfinishedTransactionDropped(UserWarning):
    """A record started a new transaction under a trid whose transaction had not ended (no
    commit or abort record): the unfinished transaction's events were dropped. CUBRID reuses a
    trid only after an end record, so the log is damaged there; ``stream.stats`` counts the
    cases (``restarted_transactions``) and the events lost (``abandoned_events``)."""


class RecordsBeyondEndSkipped(UserWarning):
    """A crashed log ends at a torn or never-written page, yet later pages of the same turn of
    the ring hold readable records. CUBRID's recovery stops at the same place, so they are not
    read; ``log.last_walk["beyond_end"]`` / ``stream.beyond_end`` say where they start and how
    many pages hold them (``stream.stats["pages_beyond_end"]``)."""


class PartialTransactionsSkipped(UserWarning):
    """Transactions whose first record lies before the log set's oldest volume (an older
    archive was deleted) were left out: the events they made there are lost, so what the log
    still holds of them is not passed off as complete (``on_partial="emit"`` emits it, marked
    in the ``partial`` column). ``stream.stats``: ``partial_transactions``,
    ``partial_events``."""


class PartialTransactionsEmitted(UserWarning):
    """With ``on_partial="emit"``: events of transactions begun before the log set's oldest
    volume were emitted, marked in the ``partial`` column (their earlier events are lost)."""


class SchemasUnknown(UserWarning):
    """Change events of tables whose schema the log does not hold (created before its oldest
    volume): their rows carry the raw images only, with ``decode_error`` set; give
    ``schema=`` a schema file. ``stream.stats``: ``unknown_schema_tables``,
    ``unknown_schema_events``."""


class UsersNotInLog(UserWarning):
    """A change stream's ``users`` filter named users of whom the stream had no event and no
    transaction of the log set was by (:meth:`LogSet.users` names none of them): a misspelt
    name, most likely."""


#: ``supplement_type`` of the TRAN_USER supplemental record (the user of a transaction).
_TRAN_USER = {name: code for code, name in _native.supplement_types()}["TRAN_USER"]


class LogSet:
    """An opened, validated set of log volumes (``<db>_lgat`` and ``<db>_lgarNNN``).

    Use :func:`open_log` to make one. Volumes are memory-mapped, never read whole.
    """

    def __init__(
        self,
        paths: Union[PathLike, Sequence[PathLike]],
        storage_options: Optional[Dict[str, Any]] = None,
    ):
        if isinstance(paths, (str, bytes, os.PathLike)):
            paths = [paths]  # one directory, volume or URL: not a sequence of its characters
        self._paths = [os.fsdecode(p) for p in paths]
        self._storage_options = _storage_options(storage_options)
        self._native = _native.LogSet(self._paths, list(self._storage_options.items()) or None)
        #: What the last finished walk of :meth:`records` found: end LSA, end reason, skipped pages.
        self.last_walk: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        h = self._native.header_info()
        return (
            f"<walcdc.LogSet {h.get('prefix', '?')}: {len(h['volumes'])} volume(s), "
            f"{h['page_size']} B pages>"
        )

    def reopen(self) -> LogSet:
        """The same volumes opened again (a fresh listing of a directory or prefix), with the
        same storage options."""
        return LogSet(self._paths, self._storage_options or None)

    def volumes(self) -> Volumes:
        """The volumes as another process opens them (a Spark executor): each volume's
        absolute path or URL (a directory or prefix listed here, once), and the storage
        options."""
        paths, sizes = [], []
        for v in self._native.header_info()["volumes"]:
            path = v["path"]
            paths.append(path if "://" in path else os.path.abspath(path))
            sizes.append(v["size"])
        return Volumes(paths, sizes, self._storage_options)

    def fetched(self) -> Dict[str, int]:
        """What reading from object storage has cost so far: ``requests`` made and ``bytes``
        fetched (zeros for local files)."""
        return dict(self._native.fetched())

    def header(self) -> Dict[str, Any]:
        """What the volume headers say, without reading further: page size, ``db_creation``,
        release, database ``prefix``, volumes and archives with their page ranges, the header's
        append LSA, checkpoint and ``is_shutdown``. :meth:`info` adds what a walk finds."""
        return dict(self._native.header_info())

    def info(self) -> Dict[str, Any]:
        """Page size, db_creation, release, volumes and archives with their page ranges, first and
        last record LSA, the end of the log (found by walking, so it is right after a crash too),
        and ``is_shutdown``. LSAs are order-preserving u64 (see :mod:`walcdc.lsa`)."""
        info = dict(self._native.header_info())
        end = self._native.end_of_log()
        info["end_lsa"] = end["end_lsa"]
        info["end_reason"] = end["end_reason"]
        info["last_lsa"] = end["last_lsa"]
        info["encrypted_skipped"] = end["skipped"]
        first = self._native.records(None, None, "skip", False, 1)
        batch = next(first, None)
        info["first_lsa"] = pa.record_batch(batch).column("lsa")[0].as_py() if batch else None
        return info

    def records(
        self,
        start: Union[int, str, None] = None,
        end: Union[int, str, None] = None,
        *,
        on_encrypted: str = "raise",
        payloads: bool = False,
        batch_size: int = 65536,
        columns: Optional[Sequence[str]] = None,
        threads: int = 1,
        split_bytes: Optional[int] = None,
    ) -> pa.RecordBatchReader:
        """One row per log record, from ``start`` (default: the first record of the set) up to
        ``end`` (exclusive; default: the end of the log). Positions are LSAs or times, as in
        :func:`walcdc.read_changes`; a start must be where a record starts.

        Columns: ``lsa``, ``forw_lsa``, ``back_lsa``, ``prev_tranlsa`` (uint64, order-preserving;
        NULL LSA is null), ``trid``, ``type`` (the engine's record type name), ``rcvindex`` and
        ``rcvindex_name``, ``data_volid``/``data_pageid``/``data_offset`` (the data page a page
        update touched), ``undo_length``/``redo_length`` (uncompressed),
        ``undo_stored_length``/``redo_stored_length`` (bytes in the log), ``undo_zipped``,
        ``redo_zipped``, ``supplement_type``, ``at_time`` (commit/abort time), ``size`` (log bytes
        up to the next record) and ``file`` (the volume holding the record header). With
        ``payloads=True`` also ``undo`` and ``redo``: the images, unzipped, DIFF redo rebuilt.

        ``on_encrypted``: ``"raise"`` (default) raises :class:`~walcdc.EncryptedPageError` when
        the walk must cross a TDE-encrypted page; ``"skip"`` resumes at the first record that
        starts on the next clear page and warns with :class:`EncryptedPagesSkipped`.

        ``columns``: only these columns (names, or one comma-separated string), in the schema's
        order; a walk that builds fewer columns is faster (``["lsa", "type"]`` is about the
        cost of reading the bytes).

        ``threads``: walk with this many threads (:func:`walcdc.parallel.default_threads` is
        the cores this process may use), each reading record-aligned ranges of about
        ``split_bytes`` of log (default: about four ranges a thread, 2 to 16 MiB each: a range
        of about two batches keeps every thread busy while each holds at most two batches
        ahead); the rows, their order and :attr:`last_walk` are those of one thread, only the
        batches are cut at range edges too. A walk left before its end stops its threads when
        the reader is dropped (pyarrow's ``close`` keeps the reader's iterator until then).
        """
        from walcdc.options import choice, position, split_list

        choice("on_encrypted", on_encrypted, ("raise", "skip"))
        if int(threads) < 1:
            from walcdc.errors import argument_error

            raise argument_error("threads", f"{{}}{threads} must be at least 1")
        start_key, end_key = position(self, start, "start"), position(self, end, "end")
        names = None if columns is None else [str(c) for c in split_list(columns)]
        read = dict(payloads=bool(payloads), batch_size=int(batch_size), columns=names)
        # The whole walk, or (threads) an empty one that checks the start and the columns.
        first = self._native.records(
            start_key, end_key if threads == 1 else start_key, on_encrypted, **read
        )
        schema = pa.schema(first.schema())
        if threads == 1:
            return pa.RecordBatchReader.from_batches(schema, self._batches([lambda: first]))
        from walcdc.parallel import clip, split_bytes_for

        if split_bytes is None:
            split_bytes = split_bytes_for(self.volumes().total_bytes, int(threads))
        ranges = clip(self.ranges(split_bytes, start_key), start_key, end_key)

        def task(s, e):
            return lambda: self._native.records(s, e, on_encrypted, range=True, **read)

        walks = [task(s, e) for s, e in ranges] or [lambda: first]
        return pa.RecordBatchReader.from_batches(schema, self._batches(walks, int(threads)))

    def _batches(self, walks: List[Any], threads: int = 1) -> Iterable[pa.RecordBatch]:
        """The batches of ``walks`` (callables giving native record readers, one per range in
        log order), read by ``threads`` threads, then what the walks skipped, as one walk."""
        from walcdc.parallel import ordered

        def batches(open_walk):
            it = open_walk()
            for native_batch in it:
                yield pa.record_batch(native_batch)
            yield _WalkEnd(it)

        skipped: List[Dict[str, Any]] = []
        unplaced: List[int] = []
        end = None
        for item in ordered([lambda w=w: batches(w) for w in walks], threads):
            if isinstance(item, _WalkEnd):
                skipped = _joined_skips(skipped, item.skipped)
                unplaced += item.unplaced
                end = item
                continue
            yield item
        self.last_walk = {
            "end_lsa": end.end_lsa,
            "end_reason": end.end_reason,
            "skipped": skipped,
            "unplaced": unplaced,
            "beyond_end": end.beyond_end,
        }
        for w in walk_warnings(skipped, unplaced, self.last_walk["beyond_end"]):
            warnings.warn(w, stacklevel=3)

    def schemas(
        self, on_encrypted: str = "skip", *, since: Optional[bytes] = None
    ) -> List[Dict[str, Any]]:
        """The table schemas the log's committed class records define: ``name`` (as stored,
        owner-qualified), ``class_oid`` (CDC packing) and ``class_oid_text``, ``current_repid``,
        ``dropped``, ``subclasses`` (partitions), and every ``representation`` with its
        ``columns`` in storage order (``id``, ``name``, ``def_order``, ``type`` (DB_TYPE id),
        ``precision``, ``scale``, ``codeset``, ``collation``, ``enum_labels``, ``set_domains``,
        ``primary_key``, ``default``: the value rows written before the column existed take;
        ``type_name`` and ``charset`` by name). ``names`` lists every name the table had (oldest
        first). Each representation lists its own column names: the names its columns had while
        it was current (rows written before a RENAME COLUMN keep the old name there).

        ``since``: a cursor's ``catalog`` (:attr:`walcdc.Cursor.catalog`): what it says, and the
        class records after it (the log before it is not read).

        The log set's volumes do not change under it, so the walk is made once per log set
        (each call returns its own copy)."""
        import copy

        return copy.deepcopy(self._schemas_shared(on_encrypted, since))

    def _schemas_shared(
        self, on_encrypted: str = "skip", since: Optional[bytes] = None
    ) -> List[Dict[str, Any]]:
        """:meth:`schemas` without the copy, for walcdc's own readers, which do not change it
        (a stream by table asks once per table: copying every table's schemas each time made
        that quadratic)."""
        import hashlib
        import json

        cache = self.__dict__.setdefault("_schemas", {})
        key = (on_encrypted, hashlib.sha256(since).digest() if since is not None else None)
        if key not in cache:
            out = list(self._native.schemas(on_encrypted, since))
            for s in out:
                for r in s["representations"]:
                    for c in r["columns"]:
                        text = c.pop("default_json")
                        c["default"] = json.loads(text) if text is not None else None
            cache[key] = out
        return cache[key]

    def users(self) -> List[str]:
        """The names of the users whose transactions the log set records (its TRAN_USER
        supplemental records), sorted. A walk of the record headers, then one read per
        transaction; made once per log set. Encrypted pages are skipped."""
        cached = self.__dict__.get("_users")
        if cached is None:
            it = self._native.records(
                None, None, "skip", False, 65536, columns=["lsa", "supplement_type"]
            )
            names = set()
            for native_batch in it:
                batch = pa.record_batch(native_batch)
                kinds = batch.column("supplement_type")
                for lsa in batch.filter(pc.equal(kinds, _TRAN_USER)).column("lsa").to_pylist():
                    try:
                        name = self._native.record(lsa)["undo"]
                    except LogError:  # a damaged record names nobody
                        continue
                    names.add(name.decode("utf-8", "replace"))
            cached = self.__dict__["_users"] = sorted(names)
        return list(cached)

    def ranges(self, split_bytes: int = 256 << 20, start: Optional[int] = None) -> List[tuple]:
        """Record-aligned ranges of about ``split_bytes`` of log each, found from page headers
        alone (no walk): ``[(start, end), ...]`` as LSAs, ``None`` for the first record of the
        set and for the end of the log. ``records(start, end)`` over the ranges gives every
        record exactly once; a record that spans a cut belongs to the range it starts in. This
        is how a job splits a log for parallel readers. ``start``: the ranges of the records
        from there on (an LSA where a record starts; no page header before it is read)."""
        if split_bytes <= 0:
            from walcdc.errors import argument_error

            text = f"{{}}{split_bytes} must be a positive number of bytes"
            raise argument_error("split_bytes", text)
        pages = max(1, split_bytes // self.header()["page_size"])
        return [tuple(r) for r in self._native.ranges(pages, start)]

    def min_archive_needed(self, cursor) -> Optional[int]:
        """The oldest archive number a stream resuming at ``cursor`` (a :class:`walcdc.Cursor`
        or a restart LSA) still needs: archives with smaller numbers can be deleted. A cursor's
        stream reads from its catalog checkpoint on (at or before its restart point); a cursor
        without one learns the tables defined before it from the archives that remain."""
        from walcdc.options import position

        restart = position(None, getattr(cursor, "restart_lsa", cursor), "cursor")
        catalog = getattr(cursor, "catalog", None)
        if catalog is not None:
            from walcdc._native import checkpoint_info

            restart = min(restart, checkpoint_info(catalog)[0])
        return self._native.min_archive_needed(restart)

    def record(self, lsa: Union[int, str]) -> Dict[str, Any]:
        """Random access: the record at ``lsa`` with its ``undo`` and ``redo`` images (unzipped,
        DIFF rebuilt) and raw ``data_header``."""
        from walcdc.options import position

        return dict(self._native.record(position(None, lsa, "lsa")))


def walk_warnings(
    skipped: List[Dict[str, Any]], unplaced: List[int], beyond: Optional[Dict[str, int]]
) -> List[Warning]:
    """The warnings of what a walk skipped: runs of encrypted pages, records it could not
    place, readable pages past a torn end (the parts given: a followed stream gives the new
    ones only)."""
    out: List[Warning] = [
        EncryptedPagesSkipped(
            f"skipped encrypted log pages {s['first_pageid']}..{s['last_pageid']} "
            f"(from the record at {_fmt(s['from_lsa'])}; resumed at "
            f"{_fmt(s['resume_lsa']) if s['resume_lsa'] is not None else 'the end'})"
        )
        for s in skipped
    ]
    if unplaced:
        shown = ", ".join(_fmt(k) for k in unplaced[:5]) + (", ..." if len(unplaced) > 5 else "")
        out.append(
            UnplacedRecordsSkipped(
                f"{len(unplaced)} record(s) on archived pages end their page early (a NULL "
                f"forw_lsa or an end-of-log marker: {shown}): "
                "the rest of each such page was skipped (a damaged archive?)"
            )
        )
    if beyond:
        out.append(
            RecordsBeyondEndSkipped(
                f"the log ends at {_fmt(beyond['end_lsa'])} (a torn or unwritten page), but "
                f"{beyond['pages']} later page(s) hold readable records, from "
                f"{_fmt(beyond['first_lsa'])}: not read (a damaged tail of a crashed log?)"
            )
        )
    return out


class _WalkEnd:
    """How one walk (of a range, or of the whole window) ended, and what it skipped."""

    def __init__(self, it):
        self.end_lsa, self.end_reason = it.end_lsa(), it.end_reason()
        self.skipped: List[Dict[str, Any]] = list(it.skipped())
        self.unplaced: List[int] = list(it.unplaced())
        beyond = it.beyond_end()
        self.beyond_end = dict(beyond) if beyond is not None else None


def _joined_skips(before: List[Dict[str, Any]], after: List[Dict[str, Any]]):
    """The runs of encrypted pages two consecutive walks skipped, as one walk reports them: a
    range that starts inside a run the range before it skipped to its end skips the rest of
    that run again (the same pages, the same resume point)."""
    out = list(before)
    for run in after:
        if out and run["first_pageid"] <= out[-1]["last_pageid"]:
            continue
        out.append(run)
    return out


def _fmt(key: Optional[int]) -> str:
    from walcdc.lsa import format_lsa

    return format_lsa(key) if key is not None else "-"


class Volumes:
    """A log set's volumes as another process opens them: each volume's absolute path or URL,
    its size, and the storage options that reach object storage. Plain values, so it pickles
    to Spark executors; :meth:`open` opens the same log set there."""

    __slots__ = ("paths", "sizes", "storage_options")

    def __init__(self, paths: Sequence[str], sizes: Sequence[int], storage_options=None):
        self.paths = list(paths)
        self.sizes = list(sizes)
        self.storage_options = dict(storage_options or {})

    def __getstate__(self):
        return (self.paths, self.sizes, self.storage_options)

    def __setstate__(self, state) -> None:
        self.paths, self.sizes, self.storage_options = state

    def __repr__(self) -> str:  # no storage options: they may hold credentials
        return f"<walcdc.Volumes {len(self.paths)} volume(s), {self.total_bytes} bytes>"

    def open(self) -> LogSet:
        return LogSet(self.paths, self.storage_options or None)

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)

    def identity(self) -> tuple:
        """What changes when the volumes do: paths and sizes, and local files' modification
        times (for caches of what was read from them)."""

        def stamp(path: str) -> int:
            return 0 if "://" in path else os.stat(path).st_mtime_ns

        return tuple((p, n, stamp(p)) for p, n in zip(self.paths, self.sizes))


def _storage_options(options: Optional[Dict[str, Any]]) -> Dict[str, str]:
    """``storage_options`` as the text pairs the store's builder takes (booleans as
    ``true``/``false``, numbers as their text)."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise argument_error(
            "storage_options", f"must be a dict of option names to values, not {options!r}"
        )
    text = {}
    for key, value in options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        text[str(key)] = str(value)
    return text


def open_log(
    path_or_paths: Union[PathLike, Sequence[PathLike]],
    *,
    storage_options: Optional[Dict[str, Any]] = None,
) -> LogSet:
    """Opens a log set: a directory holding ``<db>_lgat`` and any ``<db>_lgarNNN`` archives, or a
    list of volume files (archives alone work too).

    A path may also be a URL of object storage: a prefix holding the volumes
    (``s3://bucket/cubrid/log/``) or one volume (``s3://bucket/cubrid/log/demodb_lgar000``), in
    S3 or an S3-compatible store (``s3://``), Google Cloud Storage (``gs://``), Azure Blob
    Storage (``az://``, ``abfs://``) or over HTTP(S). Pages are fetched as they are read, in
    blocks of 2 MiB, never a whole volume that is not needed. ``storage_options`` says how to
    reach the store, with the option names of the Arrow project's ``object_store``
    (``aws_endpoint``, ``aws_region``, ``aws_access_key_id``, ``aws_secret_access_key``,
    ``google_service_account``, ``azure_storage_account_name``, ...), as deltalake and polars
    take them; its environment variables (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``) are read too.
    ``max_retries`` (default 10) and ``retry_timeout`` (seconds, default 180) bound the retries
    of transient errors. Fetched blocks are kept in a sparse temporary file per volume while the
    log set is open (``cache_dir``, default the temporary directory: on a RAM file system they
    would count as memory). Secret values never appear in messages.

    >>> import walcdc
    >>> log = walcdc.open_log(walcdc.samples.sample_path())
    >>> log.info()["page_size"]
    4096
    """
    if isinstance(path_or_paths, (str, bytes)) or hasattr(path_or_paths, "__fspath__"):
        paths = [path_or_paths]
    else:
        paths = list(path_or_paths)
    return LogSet(paths, storage_options)


def as_log(source: Union[LogSet, PathLike, Sequence[PathLike]], storage_options=None) -> LogSet:
    """``source`` as a log set: a :class:`LogSet` as it is, anything else opened with
    :func:`open_log` (and ``storage_options``). The one place every reader opens its source."""
    if isinstance(source, LogSet):
        if storage_options:
            raise argument_error(
                "storage_options", "{} is for a path or URL; this log set is open already"
            )
        return source
    return open_log(source, storage_options=storage_options)
