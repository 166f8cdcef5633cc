"""walcdc on Spark: a log set read in parallel, one record-aligned range per task, through
``mapInArrow`` (Arrow batches built in Rust go straight to Spark; no Python per row).

The driver reads volume and page headers only (:meth:`walcdc.LogSet.ranges`) and never walks
the log; each task opens the volumes itself and reads its range. ``source`` must therefore be
readable at the same paths on every executor: local disk in local mode, a shared mount (NFS,
a cluster file system mounted on every node), or object storage (``s3://``, ``gs://``,
``az://`` URLs, with ``storage_options`` as :func:`walcdc.open_log` takes them: each task
fetches its own range and the blocks its chases need). Executors need walcdc installed
(``pip install walcdc`` on every node, or a packed environment shipped with
``spark.archives``); in local mode the driver's interpreter serves.

The package is cut by where code runs: :mod:`walcdc.spark.plan` and :mod:`walcdc.spark.facts`
run on the driver (ranges, checked options, the catalog job and every collect),
:mod:`walcdc.spark.tasks` on the executors (the functions ``mapInArrow`` applies, made from
plain values), :mod:`walcdc.spark.types` on both (the one Arrow-to-Spark mapping). The
functions here compose them.

Spark types come from the Arrow schemas of the local API through one mapping
(:func:`spark_schema`): unsigned integers widen to the next signed type (LSAs fit ``long``),
dictionary-encoded strings are strings, timestamps are UTC instants.
"""

from __future__ import annotations

import json
from typing import Union

import pyarrow as pa

from walcdc.logset import LogSet, as_log
from walcdc.options import read_options_of, with_read_options
from walcdc.parallel import clip
from walcdc.plan import first_commit_after, warn_left_out
from walcdc.spark import tasks
from walcdc.spark.facts import check_supplemental_logging, cursors_at, facts_and_plan, facts_run
from walcdc.spark.plan import (
    DEFAULT_SPLIT_BYTES,
    _task_count,
    checked_options,
    range_plan,
    ranges_frame,
    read_catalog,
    use_driver_python,
)
from walcdc.spark.types import spark_arrow_schema, spark_schema, spark_type

__all__ = [
    "end_cursor",
    "read_changes",
    "read_records",
    "read_table_changes",
    "source_plan",
    "spark_schema",
    "spark_type",
]


def read_records(
    spark,
    source,
    *,
    start: Union[int, str, None] = None,
    end: Union[int, str, None] = None,
    payloads: bool = False,
    on_encrypted: str = "raise",
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    storage_options=None,
):
    """One row per log record, as :meth:`walcdc.LogSet.records` gives them, read in parallel:
    a Spark DataFrame with the same columns (types by :func:`spark_schema`). ``split_bytes``
    is the log read by one task (cut at record boundaries)."""
    from walcdc.options import choice, position

    choice("on_encrypted", on_encrypted, ("raise", "skip"))
    log = as_log(source, storage_options)
    volumes = log.volumes()
    start_key = position(log, start, "start")
    end_key = position(log, end, "end")
    if start_key is not None:
        log.records(start=start_key, end=start_key).read_all()  # a record start, or the error
    ranges = clip(log.ranges(split_bytes), start_key, end_key)
    arrow_schema = log.records(payloads=payloads).schema  # lazy: nothing is read
    schema = spark_schema(arrow_schema)
    target = spark_arrow_schema(spark, schema)
    use_driver_python(spark)

    read = tasks.records_reader(volumes, ranges, payloads, on_encrypted, target)
    return ranges_frame(spark, ranges, volumes.total_bytes).mapInArrow(read, schema)


@with_read_options()
def read_changes(
    spark, source, *, split_bytes: int = DEFAULT_SPLIT_BYTES, storage_options=None, **options
):
    """The change events of :func:`walcdc.read_changes`, read in parallel: a Spark DataFrame
    with the same rows and columns (types by :func:`spark_schema`). Options mean what they mean
    there; ``committed_only=False`` gives CUBRID's own stream.

    The driver reads volume and page headers, and the few records that write class records (to
    build the catalog once); every other record is read by the tasks, each over its own range
    of ``split_bytes`` of log, once. A task emits, in the committed stream, the transactions
    that commit in its range, and in CUBRID's stream the changes and markers that lie in it;
    what a transaction begun before the range needs from its earlier records (its events, its
    user) is read back along its chain (see ``docs/design.md``).

    ``cursor``: resume after an earlier run (a :class:`walcdc.Cursor`, or the path of a saved
    one), exactly as the local stream does; :func:`end_cursor` gives the cursor where a run
    ends, for the next one. The catalog is then read from the cursor's catalog checkpoint (at
    or before its restart point), so a daily run reads only the archives written since the
    last one (older ones may be deleted: ``LogSet.min_archive_needed(cursor)``).

    Transactions begun before the log set's oldest volume are left out, as locally with
    ``on_partial="skip"`` (``"emit"`` is read locally only, for now), and warned about here
    (:class:`walcdc.PartialTransactionsSkipped`, with their number): the catalog job's ranges
    tell which transactions were open at the set's first record and how each ended.
    """

    log = as_log(source, storage_options)
    kwargs, skip, seed = checked_options(log, **read_options_of("read_changes", options))
    return _changes_frame(spark, log, kwargs, skip, seed, split_bytes)


def _changes_frame(spark, log: LogSet, kwargs: dict, skip, seed, split_bytes: int, typed=None):
    """The plan of :func:`read_changes` (both streams); ``typed``: a table's columns, to give
    ``before`` / ``after`` as typed structs (:func:`read_table_changes`). Each task reads its
    ranges once with the range reader (``range_changes``) and the catalog versions built by
    one Spark job."""
    import walcdc._native as native

    volumes = log.volumes()
    use_driver_python(spark)
    start_key, end_key = kwargs["start"], kwargs["end"]
    committed = kwargs["committed_only"]
    catalog = read_catalog(spark, log, volumes, kwargs, seed, split_bytes)
    versions = catalog.versions
    warn_left_out(catalog.left, kwargs)
    if not catalog.supplemental:
        _check_supplemental_logging(spark, log, volumes, kwargs, skip, seed, split_bytes)
    last_commit, offset, position = skip if skip is not None else (None, 0, None)
    # A cursor inside a committed transaction: the first commit after its last one skips
    # what the earlier run emitted of it.
    first_skipped = first_commit_after(log, kwargs, last_commit) if committed and offset else None
    try:
        shared = spark.sparkContext.broadcast(versions)
    except Exception:  # noqa: BLE001 -- Spark Connect: ship the bytes with the function
        shared = versions
    if typed is not None:
        result_arrow = pa.schema(native.table_changes_schema(typed))
    else:
        result_arrow = pa.schema(native.changes_schema())
    result = spark_schema(result_arrow)
    target = spark_arrow_schema(spark, result)
    event_ranges = clip(log.ranges(split_bytes), start_key, end_key)

    skipped = (last_commit, offset, position)
    read = tasks.changes_reader(
        volumes, event_ranges, kwargs, shared, skipped, first_skipped, typed, target
    )
    return ranges_frame(spark, event_ranges, volumes.total_bytes).mapInArrow(read, result)


def end_cursor(
    spark,
    source,
    *,
    start=None,
    end=None,
    cursor=None,
    committed_only: bool = True,
    on_encrypted: str = "raise",
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    storage_options=None,
):
    """The cursor where :func:`read_changes` over the same window (``start`` or ``cursor``, and
    ``end``) ends: the next run passes it as ``cursor=`` and gets exactly the rest, no event
    lost or repeated. Equal to the local stream's :attr:`~walcdc.ChangeStream.cursor` at its
    end. Computed from the log's facts alone (no event is read), with the catalog checkpoint at
    its restart point (built on the driver from the class-record writes); give the next run the
    same ``end`` as this one (``end=cursor.position``) if the log may grow in between.
    """
    import walcdc._native as native
    from walcdc.changes import Cursor

    log, kwargs, skip, seed = facts_run(
        spark,
        source,
        storage_options,
        start=start,
        end=end,
        cursor=cursor,
        committed_only=committed_only,
        on_encrypted=on_encrypted,
    )
    inputs, [(restart, last_commit, position)] = cursors_at(
        spark, log, kwargs, skip, seed, split_bytes, [kwargs["end"]]
    )
    # The catalog at the next run's restart point (it reads nothing before it).
    checkpoint = native.catalog_checkpoint(log._native, inputs, restart, seed)
    engine = not kwargs["committed_only"]
    db_creation = log.header()["db_creation"]
    return Cursor(db_creation, restart, last_commit, 0, position, engine, checkpoint)


def source_plan(
    spark,
    source,
    *,
    start=None,
    end=None,
    cursor=None,
    committed_only: bool = True,
    on_encrypted: str = "raise",
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    storage_options=None,
) -> str:
    """The plan of a ``spark.read.format("walcdc")`` read over a large log (JSON text, for its
    ``plan`` option): the window cut into ranges of ``split_bytes`` and the catalog versions,
    read by Spark (one job, as :func:`read_changes` reads them). Each task of the data source
    then reads its range once, so the rows are exactly those of :func:`walcdc.read_changes`.
    Without a plan the data source reads the same catalog where it plans the read (range by
    range, on the driver)."""
    log, kwargs, skip, seed = facts_run(
        spark,
        source,
        storage_options,
        start=start,
        end=end,
        cursor=cursor,
        committed_only=committed_only,
        on_encrypted=on_encrypted,
    )
    volumes = log.volumes()
    catalog = read_catalog(spark, log, volumes, kwargs, seed, split_bytes, True)
    warn_left_out(catalog.left, kwargs)
    if not catalog.supplemental:
        _check_supplemental_logging(spark, log, volumes, kwargs, skip, seed, split_bytes)
    plan = range_plan(log, kwargs, skip, seed, split_bytes, catalog.versions)
    # Partitions for this session's task slots, not the planning process's cores.
    plan["tasks"] = _task_count(spark, len(plan["parts"]), 4, volumes.total_bytes)
    return json.dumps(plan)


def _check_supplemental_logging(spark, log, volumes, kwargs, skip, seed, split_bytes) -> None:
    """A window with no supplemental record: the facts say whether the log was written with
    ``supplemental_log=0`` (then :class:`walcdc.NoSupplementalLogError`, as locally)."""
    facts, _, _, plan = facts_and_plan(spark, log, volumes, kwargs, skip, seed, split_bytes)
    check_supplemental_logging(log, facts, plan.windowed, kwargs["start"], kwargs["end"])


@with_read_options("tables", "exclude_tables", "keys")
def read_table_changes(spark, source, table, **kwargs):
    """Changes of one table with typed ``before`` / ``after`` structs, as
    :func:`walcdc.read_table_changes` gives them, read in parallel (same rows, same columns).
    ``table`` and the other arguments are those of :func:`walcdc.read_table_changes` and
    :func:`read_changes` (``split_bytes``, ``cursor``)."""
    from walcdc.table_changes import _table_columns

    split_bytes = kwargs.pop("split_bytes", DEFAULT_SPLIT_BYTES)
    cursor = kwargs.pop("cursor", None)
    log = as_log(source, kwargs.pop("storage_options", None))
    class_oid, columns = _table_columns(log, table, {**kwargs, "cursor": cursor})
    fixed = ("tables", "exclude_tables", "keys", "cursor")
    unknown = set(kwargs) & set(fixed)
    if unknown:
        raise TypeError(f"read_table_changes() got unexpected arguments {sorted(unknown)}")
    options = read_options_of("read_table_changes", kwargs)
    options.update(tables=[class_oid], exclude_tables=None, keys="id", cursor=cursor)
    checked, skip, seed = checked_options(log, **options)
    return _changes_frame(spark, log, checked, skip, seed, split_bytes, typed=columns)
