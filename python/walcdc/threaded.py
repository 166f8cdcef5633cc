"""A change stream read by several threads (``read_changes(threads=N)``): the window cut into
record-aligned ranges, read at once by the range reader the Spark source uses, and given in
log order with one thread's rows, order and end state.

Three steps, each on the plan of :mod:`walcdc.plan`:

1. every range reduced to what the catalog needs, ranges at once; the reductions joined in
   log order give the catalog versions, what the read leaves out, and the transactions open at
   the window's end (``native.open_at_end``);
2. every range's events read at once (``range_changes``: a transaction that began in an
   earlier range is read back along its own chain when it commits) and given range after
   range by :func:`walcdc.parallel.ordered`, so that what waits in memory is bounded by the
   threads, not by the log;
3. the end state (cursor, pending transactions, reader state) taken from a one-thread reader
   resumed where a cursor of the whole stream would restart (the first record of the oldest
   transaction open at the end, past the last commit): it reads that tail again, emits
   nothing, and ends knowing what one thread reading the whole window knows.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

import pyarrow as pa

from walcdc.logset import LogSet
from walcdc.parallel import holds, ordered, split_bytes_for
from walcdc.plan import (
    catalog_of,
    catalog_ranges,
    check_supplemental_logging_here,
    first_commit_after,
    reduced_here,
    resolved,
)

__all__ = ["ThreadedChanges"]

#: Counters of the range readers that add up, over the ranges, to one thread's. Two others
#: say how the stream was read rather than what it read, and differ from one thread's: the
#: records read by random access (``random_reads``, counted over the whole read: a range reads
#: back the transactions that began before it) and the most buffered at once
#: (``peak_buffered_bytes``, the largest of a range's and of the tail's).
_SUMMED = (
    "records",
    "events",
    "committed_transactions",
    "aborted_transactions",
    "undone_events",
    "spilled_events",
    "abandoned_events",
    "partial_transactions",
    "partial_events",
    "unknown_schema_events",
)


class _RangeEnd:
    """The end of one range's events: what its reader counted and where it stopped."""

    def __init__(self, reader):
        self.stats = dict(reader.stats())
        self.cursor = reader.cursor()
        self.unknown = reader.unknown_schema_classes()


class ThreadedChanges:
    """The native side of a :class:`walcdc.ChangeStream` read by ``threads`` threads: its
    batches, then what the stream asks of its reader (cursor, pending, state, stats, what the
    walk skipped). ``kwargs``: the native ``change_options`` arguments
    (``walcdc.changes._native_options``); ``columns``: one table's typed changes."""

    def __init__(
        self,
        log: LogSet,
        kwargs: Dict[str, Any],
        *,
        threads: int,
        batch_size: int,
        split_bytes: Optional[int] = None,
        columns=None,
        by_table: bool = False,
    ):
        import walcdc._native as native

        self._log = log
        self._given = dict(kwargs)
        self._kwargs, self._skip, self._seed = resolved(log, kwargs)
        self._threads = int(threads)
        self._split = split_bytes or split_bytes_for(log.volumes().total_bytes, self._threads)
        self._batch_size = int(batch_size)
        self._columns = columns
        self._by_table = by_table
        if columns is None:
            self._schema = native.changes_schema()
        else:
            self._schema = native.table_changes_schema(columns)
        #: The one-thread reader of the tail, which holds the end state once the stream ends.
        self._end = None
        self._stats: Dict[str, int] = {}
        self._walk: tuple = ([], [], None)
        self._iter = self._batches()

    def schema(self):
        return self._schema

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._iter

    def next_table(self):
        """The next ``(kind, class_oid, table, repid, batch)`` of a stream by table, or None
        at the end (as the native stream's ``next_table``)."""
        return next(self._iter, None)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        import walcdc._native as native

        log, kwargs, seed = self._log, self._kwargs, self._seed
        reads = log._native.random_reads()
        whole = kwargs["decode"] and kwargs["keys"] == "name_now"
        ranges = catalog_ranges(log, kwargs, seed, self._split, whole)
        reduced = reduced_here(log, ranges, kwargs, self._threads)
        catalog = catalog_of(log, kwargs, seed, ranges, reduced)
        # The reduction's short walks each left a little of the log mapped around their ends.
        log._native.release_all()
        if not catalog.supplemental:
            check_supplemental_logging_here(log, kwargs)
        window = ranges[catalog.first : catalog.last]
        if not window:
            # Nothing to share out (an empty window): one reader reads it all.
            self._end = log._native.changes(
                log._native.change_options(**self._given),
                batch_size=self._batch_size,
                columns=self._columns,
                by_table=self._by_table,
            )
            if self._by_table:
                yield from iter(self._end.next_table, None)
            else:
                for b in self._end:
                    yield pa.record_batch(b)
            self._stats = dict(self._end.stats())
            self._walk = (self._end.skipped(), self._end.unplaced(), self._end.beyond_end())
            return
        last_commit, offset, position = self._skip or (None, 0, None)
        first_skipped = None
        if offset and kwargs["committed_only"]:
            first_skipped = first_commit_after(log, kwargs, last_commit)
        options = log._native.change_options(**kwargs)
        # The tasks hold no reference to this object: the threads reading them keep what they
        # hold alive, and a stream dropped half way must be collectable to stop them.
        columns, batch_size, by_table = self._columns, self._batch_size, self._by_table
        # What a range learns reading a transaction back, the ranges after it reuse.
        memo = native.ChainMemo()

        def read(s, e):
            reader = native.range_changes(
                log._native,
                options,
                catalog.versions,
                s,
                e,
                skip_commits_upto=last_commit,
                skip_before=position,
                skip_events=offset if holds(s, e, first_skipped) else 0,
                columns=columns,
                batch_size=batch_size,
                by_table=by_table,
                chain_memo=memo,
            )
            if by_table:
                yield from iter(reader.next_table, None)
            else:
                for b in reader:
                    yield pa.record_batch(b)
            yield _RangeEnd(reader)

        ends: List[_RangeEnd] = []
        tasks = [lambda s=s, e=e: read(s, e) for s, e in window]
        for item in ordered(tasks, self._threads):
            if isinstance(item, _RangeEnd):
                ends.append(item)
                continue
            yield item
        self._walk = catalog.left["walk"]
        self._stats = self._joined_stats(ends, catalog.left["restarted"])
        # A range's reader counts the supplemental records its chases read too.
        self._stats["supplemental_records"] = catalog.supplemental
        self._tail(catalog, reduced, ends)
        self._stats["random_reads"] = log._native.random_reads() - reads

    def _joined_stats(self, ends: List[_RangeEnd], restarted: int) -> Dict[str, int]:
        import walcdc._native as native

        stats: Dict[str, int] = {}
        for end in ends:
            for k, v in end.stats.items():
                if k in _SUMMED:
                    stats[k] = stats.get(k, 0) + v
                else:
                    stats[k] = max(stats.get(k, 0), v)
        stats["restarted_transactions"] = restarted
        # The tables of unknown schema, told apart over the ranges (at most as many as one
        # reader tells apart).
        unknown = set().union(*(end.unknown for end in ends))
        stats["unknown_schema_tables"] = min(len(unknown), native.MAX_UNKNOWN_TABLES)
        return stats

    def _tail(self, catalog, reduced, ends: List[_RangeEnd]) -> None:
        """Reads the tail that holds the end state (see the module's step 3); it emits no
        event, for every commit in it was emitted by the ranges."""
        import walcdc._native as native

        log, kwargs = self._log, self._kwargs
        db_creation, _, _, _, position, engine = ends[-1].cursor
        commits = [e.cursor[2] for e in ends if e.cursor[2] is not None]
        last_commit = max(commits) if commits else None
        window = [c for c, _ in reduced[catalog.first : catalog.last]]
        still_open = native.open_at_end(window)
        restart = min(still_open[0][1], position) if still_open else position
        checkpoint = native.catalog_checkpoint(log._native, catalog.inputs, restart, self._seed)
        cursor = (db_creation, restart, last_commit, 0, position, engine)
        tail = {**kwargs, "start": None, "cursor": cursor, "checkpoint": checkpoint}
        self._end = log._native.changes(
            log._native.change_options(**tail),
            batch_size=self._batch_size,
            columns=self._columns,
            by_table=self._by_table,
        )
        # Whether the log was written with supplemental logging is decided over the window
        # (and a reader state carries it): the tail's own part would not say.
        self._end.set_supplemental_records(catalog.supplemental)
        for b in iter(self._end.next_table, None) if self._by_table else self._end:
            raise RuntimeError(
                f"walcdc: the tail read for the stream's end state emitted events "
                f"({b!r} first) that the ranges had not"
            )
        # Its own read counted the tail's supplemental records again.
        self._end.set_supplemental_records(catalog.supplemental)
        peak = self._end.stats().get("peak_buffered_bytes", 0)
        self._stats["peak_buffered_bytes"] = max(self._stats.get("peak_buffered_bytes", 0), peak)

    def _ended(self):
        if self._end is None:
            raise RuntimeError("the stream's end state is known once every batch was read")
        return self._end

    def cursor(self):
        return self._ended().cursor()

    def catalog_checkpoint(self, restart: int):
        return self._ended().catalog_checkpoint(restart)

    def pending(self):
        return self._ended().pending()

    def state(self):
        return self._ended().state()

    def stats(self) -> Dict[str, int]:
        return dict(self._stats)

    def skipped(self):
        return list(self._walk[0])

    def unplaced(self):
        return list(self._walk[1])

    def beyond_end(self):
        return self._walk[2]

    def end_reason(self):
        return None
