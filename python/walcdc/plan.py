"""The plan of a read by ranges, in this process or on Spark: the window cut into
record-aligned ranges, each range reduced where it is read to what the catalog needs
(``RangeCatalog``), the reductions joined in log order into the catalog versions every range
reader shares, and what the read leaves out (said as the one-pass stream says it). Used by
the threads of :func:`walcdc.read_changes` and by :mod:`walcdc.spark`."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import pyarrow as pa

from walcdc.errors import InvalidArgumentError
from walcdc.logset import LogSet
from walcdc.parallel import clip

__all__ = [
    "Catalog",
    "catalog_of",
    "catalog_ranges",
    "check_supplemental_logging_here",
    "cut",
    "first_commit_after",
    "reduced_here",
    "resolved",
    "warn_left_out",
    "window_of",
]


def cut(
    ranges: List[Tuple[Optional[int], Optional[int]]], at: Optional[int]
) -> List[Tuple[Optional[int], Optional[int]]]:
    """The ranges with the one holding ``at`` split there (a range then starts exactly at it)."""
    if at is None:
        return ranges
    out = []
    for s, e in ranges:
        if (s is None or s < at) and (e is None or at < e):
            out += [(s, at), (at, e)]
        else:
            out.append((s, e))
    return out


def resolved(log: LogSet, kwargs: dict):
    """The native ``change_options`` arguments of a read by ranges (``kwargs``, resolved by
    ``walcdc.changes._native_options``), checked once: ``(kwargs, skip, seed)``. A cursor
    becomes the start, and ``skip`` what the earlier run emitted (``(last_commit_lsa,
    txn_offset, position)``); ``seed``: the cursor's catalog checkpoint (the catalog is read
    from there instead of from the beginning of the log), or None."""
    import walcdc._native as native

    kwargs = dict(kwargs)
    native.check_cursor(log._native, log._native.change_options(**kwargs))
    seed = kwargs.pop("checkpoint", None)
    skip = None
    if kwargs["cursor"] is not None:
        _, restart, last_commit, offset, position, _ = kwargs["cursor"]
        kwargs.update(start=restart, cursor=None)
        skip = (last_commit, offset, position)
    if kwargs["start"] is not None:
        log.records(start=kwargs["start"], end=kwargs["start"]).read_all()  # a record start
    return kwargs, skip, seed


def first_commit_after(log: LogSet, kwargs: dict, last_commit: Optional[int]) -> Optional[int]:
    """The first commit record after ``last_commit`` from the window's start on (a cursor's
    restart point, before it), read on the driver: the records from the later of the two up to
    that commit (the tail of one transaction; no image is read)."""
    import pyarrow.compute as pc

    start = kwargs["start"]
    if last_commit is not None and (start is None or last_commit > start):
        start = last_commit
    records = log.records(
        start=start,
        end=kwargs["end"],
        on_encrypted=kwargs["on_encrypted"],
        batch_size=4096,
        columns=["lsa", "trid", "type"],
    )
    for batch in records:
        types = batch.column("type").cast(pa.string())
        commits = batch.filter(
            pc.and_(pc.equal(types, "LOG_COMMIT"), pc.greater(batch.column("trid"), 0))
        )
        if last_commit is not None:
            commits = commits.filter(pc.greater(commits.column("lsa"), last_commit))
        if commits.num_rows:
            return commits.column("lsa")[0].as_py()
    return None


def catalog_ranges(log: LogSet, kwargs: dict, seed, split_bytes: int, whole: bool):
    """The ranges the catalog is read from: from the beginning of the log (or the cursor's
    checkpoint) to the window's end (``whole``: the log's), cut at the window's edges."""
    import walcdc._native as native

    start_key, end_key = kwargs["start"], kwargs["end"]
    seed_at = native.checkpoint_info(seed)[0] if seed is not None else None
    if seed_at is not None and start_key is not None and seed_at > start_key:
        raise InvalidArgumentError("the cursor's catalog checkpoint is past its restart point")
    ranges = clip(log.ranges(split_bytes), seed_at, None if whole else end_key)
    return cut(cut(ranges, start_key), end_key)


def window_of(ranges, start: Optional[int], end: Optional[int]) -> Tuple[int, int]:
    """The window ``[start, end)`` among ``ranges`` (cut at its edges by
    :func:`catalog_ranges`): ``ranges[first:last]``."""
    inside = [
        (start is None or (s is not None and s >= start)) and (end is None or s is None or s < end)
        for s, _ in ranges
    ]
    # The window's ranges are consecutive.
    first = inside.index(True) if any(inside) else len(ranges)
    return first, first + sum(inside)


def reduced_here(log: LogSet, ranges, kwargs: dict, threads: int = 1):
    """Each range's ``(RangeCatalog bytes, supplemental records)``, in order, read in this
    process by ``threads`` threads (the native reduction releases the GIL)."""
    import walcdc._native as native
    from walcdc.parallel import ordered

    on_encrypted = kwargs["on_encrypted"]

    def task(s, e):
        return lambda: [native.range_catalog(log._native, s, e, on_encrypted)]

    return list(ordered([task(s, e) for s, e in ranges], threads, depth=1))


class Catalog(NamedTuple):
    """What a plan's catalog step gives (:func:`catalog_of`)."""

    #: The catalog versions (bytes) every range reader shares.
    versions: bytes
    #: Supplemental records in the window.
    supplemental: int
    #: What the read will leave out (:func:`warn_left_out`).
    left: dict
    #: The catalog's inputs (``native.catalog_inputs_of``): a cursor's checkpoint is built
    #: from them.
    inputs: list
    #: The window's ranges: ``ranges[first:last]``.
    first: int
    last: int


def catalog_of(log: LogSet, kwargs: dict, seed, ranges, reduced) -> Catalog:
    """The catalog versions from the ranges' reductions, the supplemental records in the
    window, and what the read will leave out (:func:`warn_left_out`): the transactions begun
    before the log set's first record (read from its beginning: ``parallel::begun_before``; none
    are known from a cursor's checkpoint on), what the walks of the window's ranges skipped,
    and the transactions a restart of their trid cut short there (``native.left_out``, every
    range decoded once)."""
    import walcdc._native as native

    seed_trids = native.checkpoint_info(seed)[1] if seed is not None else []
    inputs = native.catalog_inputs_of([c for c, _ in reduced], seed_trids)
    versions, _ = native.catalog_versions(log._native, inputs, seed)
    first, last = window_of(ranges, kwargs["start"], kwargs["end"])
    from_first = seed is None and bool(ranges) and ranges[0][0] is None
    begun, walk, restarted = native.left_out([c for c, _ in reduced], first, last, from_first)
    left = {"begun": begun, "walk": walk, "restarted": restarted}
    supplemental = sum(n for _, n in reduced[first:last])
    return Catalog(versions, supplemental, left, inputs, first, last)


def warn_left_out(left: dict, kwargs: dict) -> None:
    """Warns, as the local stream does, of what the read leaves out (``left``, from
    :func:`catalog_of`): what the walk skipped in the window (encrypted pages under
    ``on_encrypted="skip"``, records a damaged archive could not place, readable pages past a
    torn end), transactions cut short by a restart of their trid
    (:class:`walcdc.UnfinishedTransactionDropped`), and the transactions begun before the log
    set's oldest volume that commit in the window (and, in CUBRID's stream, those that abort
    there: :class:`walcdc.PartialTransactionsSkipped`)."""
    import warnings

    from walcdc.logset import (
        PartialTransactionsSkipped,
        UnfinishedTransactionDropped,
        walk_warnings,
    )

    for w in walk_warnings(*left["walk"]):
        warnings.warn(w, stacklevel=3)
    if left["restarted"]:
        warnings.warn(
            UnfinishedTransactionDropped(
                f"{left['restarted']} transaction(s) restarted under their trid before an end "
                "record: the events of the unfinished one(s) dropped (a damaged log?)"
            ),
            stacklevel=3,
        )
    begun = left["begun"]
    start, end = kwargs["start"], kwargs["end"]
    ends = ("commit",) if kwargs["committed_only"] else ("commit", "abort")
    left_out = [
        trid
        for trid, _, fate in begun
        if fate is not None
        and fate[0] in ends
        and (start is None or fate[1] >= start)
        and (end is None or fate[1] < end)
    ]
    if left_out:
        warnings.warn(
            PartialTransactionsSkipped(
                f"{len(left_out)} transaction(s) began before the oldest volume of the log set "
                "(an older archive is gone): their events the log still holds are left out "
                '(walcdc.read_changes(on_partial="emit") reads them, marked partial)'
            ),
            stacklevel=3,
        )


def check_supplemental_logging_here(log: LogSet, kwargs: dict) -> None:
    """For a window with no supplemental record, as the one-pass stream decides: a log
    written with ``supplemental_log=0`` (committed transactions changed user rows) raises
    :class:`walcdc.NoSupplementalLogError`. The window walked here by one reader, commit
    markers only (no image is read). ``kwargs``: the native ``change_options`` arguments."""
    marks = {**kwargs, "ops": ["commit"], "mode": "id", "decode": False}
    marks.update(tables=None, exclude_tables=None, users=None, cursor=None)
    for _ in log._native.changes(log._native.change_options(**marks), batch_size=65536):
        pass
