"""What runs on the executors: the functions ``mapInArrow`` applies to the rows of range
numbers (``i``, an index into the plan's ranges: ``(start, end)`` LSA keys, None for open).
Each is made from plain values (the volumes, the ranges, option dicts, bytes or a broadcast of
them, Arrow schemas), so what Spark pickles is what the task needs and never a driver object;
each task opens the volumes itself."""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Tuple

import pyarrow as pa

from walcdc.logset import Volumes
from walcdc.parallel import holds
from walcdc.spark.types import cast_batch

Range = Tuple[Optional[int], Optional[int]]
Task = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def spans(ranges: List[Range]) -> List[Range]:
    """Adjacent ranges (one's end the next one's start) joined: a task reads its consecutive
    ranges as one span, so a transaction crossing from one to the next is not read back along
    its chain at each edge."""
    out: List[List[Optional[int]]] = []
    for s, e in ranges:
        if out and out[-1][1] is not None and out[-1][1] == s:
            out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _given(tasks: Iterator[pa.RecordBatch], ranges: List[Range]):
    """``(i, start, end)`` of each range a task was given."""
    for t in tasks:
        for i in t.column("i").to_pylist():
            yield (i, *ranges[i])


def records_reader(
    volumes: Volumes, ranges: List[Range], payloads: bool, on_encrypted: str, target
) -> Task:
    """Each range's records (``LogSet.records``)."""

    def read(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:

        log = volumes.open()
        for _, s, e in _given(tasks, ranges):
            reader = log._native.records(
                start=s, end=e, payloads=payloads, on_encrypted=on_encrypted, range=True
            )
            for batch in reader:
                yield cast_batch(pa.record_batch(batch), target)

    return read


def changes_reader(
    volumes: Volumes,
    ranges: List[Range],
    options: dict,
    versions,
    skip: Tuple[Optional[int], int, Optional[int]],
    first_skipped: Optional[int],
    typed: Optional[list],
    target,
) -> Task:
    """A task's ranges read as spans by the range reader (``range_changes``): the events of
    the stream of ``options`` (the native ``change_options`` arguments) that lie in them.
    ``versions``: the catalog versions (bytes, or a broadcast of them); ``skip``: what an
    earlier run emitted (``(last_commit, txn_offset, position)``), the offset skipped by the
    span holding ``first_skipped``; ``typed``: a table's columns (typed structs)."""

    def read(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        log = volumes.open()
        native_options = log._native.change_options(**options)
        shared = versions.value if hasattr(versions, "value") else versions
        given = [(s, e) for _, s, e in _given(tasks, ranges)]
        for b in span_changes(log, native_options, shared, given, skip, first_skipped, typed):
            yield cast_batch(b, target)

    return read


def span_changes(
    log,
    native_options,
    versions: bytes,
    ranges: List[Range],
    skip: Tuple[Optional[int], int, Optional[int]],
    first_skipped: Optional[int],
    columns: Optional[list] = None,
) -> Iterator[pa.RecordBatch]:
    """The events of a task's ``ranges``, adjacent ones read as one span by the range reader
    (``range_changes``), the spans sharing one ``ChainMemo``; ``skip`` and ``first_skipped``
    as for :func:`changes_reader`. The one loop of Spark's tasks and the data source's."""
    import walcdc._native as native

    last_commit, offset, position = skip
    memo = native.ChainMemo()  # what a span learns reading transactions back, for the next
    for s, e in spans(ranges):
        batches = native.range_changes(
            log._native,
            native_options,
            versions,
            s,
            e,
            skip_commits_upto=last_commit,
            skip_before=position,
            skip_events=offset if holds(s, e, first_skipped) else 0,
            columns=columns,
            chain_memo=memo,
        )
        for b in batches:
            yield pa.record_batch(b)


def catalog_reducer(volumes: Volumes, ranges: List[Range], on_encrypted: str, target) -> Task:
    """Each range reduced to what the catalog needs: a row ``(i, RangeCatalog bytes,
    supplemental records)``."""

    def reduce(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc._native as native

        log = volumes.open()
        for i, s, e in _given(tasks, ranges):
            catalog, supplemental = native.range_catalog(log._native, s, e, on_encrypted)
            yield pa.record_batch([[i], [catalog], [supplemental]], schema=target)

    return reduce


def facts_reader(volumes: Volumes, ranges: List[Range], on_encrypted: str, target) -> Task:
    """Each range's facts (``walcdc_core::parallel::range_facts``)."""

    def read(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc._native as native

        log = volumes.open()
        for _, s, e in _given(tasks, ranges):
            b = native.range_facts(log._native, s, e, on_encrypted)
            yield cast_batch(pa.record_batch(b), target)

    return read
