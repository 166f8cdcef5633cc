"""The driver's side of a parallel read: the ranges and how they spread over tasks, the read
options checked once, the catalog (one Spark job, each range reduced where it is read, joined
here) and the data source's plans. Every Spark job the plan runs, and every collect, is here
or in :mod:`walcdc.spark.facts`."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from collections import OrderedDict
from typing import List, Optional

from walcdc.errors import InvalidArgumentError, argument_error
from walcdc.logset import LogSet, Volumes
from walcdc.parallel import clip, default_threads
from walcdc.plan import (
    Catalog,
    catalog_of,
    catalog_ranges,
    check_supplemental_logging_here,
    first_commit_after,
    reduced_here,
    resolved,
    warn_left_out,
)
from walcdc.spark import tasks
from walcdc.spark.types import spark_arrow_schema

DEFAULT_SPLIT_BYTES = 64 << 20


def use_driver_python(spark) -> None:
    """In local mode, Python workers run the driver's own interpreter (where walcdc is
    installed) unless PYSPARK_PYTHON or spark.pyspark.python says otherwise: PySpark's default
    is whatever ``python3`` is first on the PATH."""
    try:
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 -- Spark Connect: the server decides
        return
    configured = os.environ.get("PYSPARK_PYTHON") or sc.getConf().get("spark.pyspark.python")
    if sc.master.startswith("local") and not configured:
        sc.pythonExec = sys.executable


def _task_count(spark, ranges: int, per_core: int, log_bytes: Optional[int] = None) -> int:
    """Tasks for ``ranges`` ranges: ``per_core`` per core of the session (small tasks even
    out uneven ranges), at most one per range and, given the log's size, one per
    ``_TASK_BYTES`` of it (below that a task costs more to schedule than it reads)."""
    try:
        slots = spark.sparkContext.defaultParallelism
    except Exception:  # noqa: BLE001 -- Spark Connect has no SparkContext: its shuffle width
        return task_count(ranges, int(spark.conf.get("spark.sql.shuffle.partitions", "200")), 1)
    return task_count(ranges, slots, per_core, log_bytes)


def task_count(ranges: int, slots: int, per_core: int = 4, log_bytes: Optional[int] = None) -> int:
    """:func:`_task_count` for ``slots`` task slots."""
    tasks = per_core * slots
    if log_bytes is not None:
        tasks = min(tasks, -(-log_bytes // _TASK_BYTES))
    return max(1, min(ranges, tasks))


def grouped(parts: list, tasks: int) -> List[list]:
    """A plan's ranges (``parts``) in at most ``tasks`` runs of consecutive ranges, as even in
    number as they divide: a data source partition reads its run as spans (one reader, the
    transactions crossing from one range to the next not read back), so a partition's fixed
    cost (a task, opening the volumes, the catalog versions) is paid per run, not per range."""
    n = max(1, min(len(parts), tasks))
    return [parts[i * len(parts) // n : (i + 1) * len(parts) // n] for i in range(n)]


_TASK_BYTES = 8 << 20


def ranges_frame(spark, ranges, log_bytes: int):
    """One row per range, its number ``i`` (the tasks take the range itself from the list they
    are made with), spread over at most four tasks per core of the session and one per
    ``_TASK_BYTES`` of the log's ``log_bytes`` (ranges beyond that share a task: each stage
    over a small log is then one or two tasks, not eight); a task's ranges are consecutive.
    ``spark.range`` makes the rows in the JVM: a Python RDD of the ranges cost 0.8 s more on a
    new session (its conversion's first use)."""
    tasks = _task_count(spark, len(ranges), 4, log_bytes)
    return spark.range(0, len(ranges), 1, tasks).withColumnRenamed("id", "i")


def checked_options(log: LogSet, **options):
    """The keyword arguments of the native ``change_options`` (what tasks rebuild them from),
    checked once on the driver; ``skip``: a cursor becomes the start, and what the earlier
    run emitted (``(last_commit_lsa, txn_offset, position)``); ``seed``: the cursor's catalog
    checkpoint (the facts start there instead of at the beginning of the log), or None."""
    from walcdc.changes import _native_options

    kwargs = _native_options(log, **options)
    if kwargs["on_partial"] != "skip":
        raise argument_error(
            "on_partial",
            '{}"emit" is read locally only (walcdc.read_changes); on Spark, transactions begun '
            "before the oldest volume are left out",
        )
    return resolved(log, kwargs)


KEPT = 4


def session_key(spark):
    try:
        return spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001 -- Spark Connect
        return id(spark)


#: Catalog versions of recent committed reads (as ``FACTS``).
CATALOGS: OrderedDict[tuple, Catalog] = OrderedDict()


def read_catalog(spark, log: LogSet, volumes: Volumes, kwargs: dict, seed, split_bytes, whole=None):
    """The catalog versions of a committed read and the supplemental records in its window,
    from one Spark job (or in this process: :func:`reducing_threads_here`): each range
    reduced where it is read to what the catalog needs
    (``RangeCatalog``: its DDL transactions' class-record writes, and the writes of the
    transactions open at its edges), joined on the driver in log order. What the driver holds
    is bounded by the DDL and the transactions open at range edges, not by the changes.
    ``whole``: the versions cover the log to its end (by default only with keys that are the
    names at the end of the log)."""
    if whole is None:
        whole = kwargs["decode"] and kwargs["keys"] == "name_now"
    ranges = catalog_ranges(log, kwargs, seed, split_bytes, whole)
    seed_key = hashlib.sha256(seed).digest() if seed is not None else None
    threads = reducing_threads_here(spark)
    key = (session_key(spark), volumes.identity(), tuple(ranges), kwargs["on_encrypted"], seed_key)
    key += (threads > 0,)  # reduced here or by a job: both kept, so each path can be compared
    if key in CATALOGS:
        CATALOGS.move_to_end(key)
        return CATALOGS[key]
    if threads:
        reductions = reduced_here(log, ranges, kwargs, threads)
    else:
        reductions = reduced_on_spark(spark, volumes, ranges, kwargs)
    reduced = catalog_of(log, kwargs, seed, ranges, reductions)
    CATALOGS[key] = reduced
    while len(CATALOGS) > KEPT:
        CATALOGS.popitem(last=False)
    return reduced


#: Spark setting: where a read's catalog is reduced. ``auto`` (the default): in this process
#: when the session runs in local mode, by a Spark job otherwise; ``spark`` or ``driver``.
CATALOG_SETTING = "spark.walcdc.catalog"


def reducing_threads_here(spark) -> int:
    """Threads to reduce the catalog's ranges with in this process, or 0 for a Spark job. A
    session in local mode runs its tasks on this machine's cores anyway; reducing here with
    as many threads as it has task slots is the same walk without a job's start-up (a first
    job costs seconds: Python workers, JIT), with the bytes the tasks would read."""
    try:
        where = spark.conf.get(CATALOG_SETTING, "auto")
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 -- Spark Connect: the cluster is elsewhere
        return 0
    if where not in ("auto", "spark", "driver"):
        raise InvalidArgumentError(f"{CATALOG_SETTING}={where!r}: one of auto, spark, driver")
    if where == "spark" or (where == "auto" and not sc.master.startswith("local")):
        return 0
    return max(1, min(sc.defaultParallelism, default_threads()))


def reduced_on_spark(spark, volumes: Volumes, ranges, kwargs: dict):
    """Each range's ``(RangeCatalog bytes, supplemental records)``, in order, from one job."""
    from pyspark.sql import types as T

    on_encrypted = kwargs["on_encrypted"]
    schema = T.StructType(
        [
            T.StructField("i", T.IntegerType(), False),
            T.StructField("catalog", T.BinaryType(), False),
            T.StructField("supplemental", T.LongType(), False),
        ]
    )
    target = spark_arrow_schema(spark, schema)

    reduce = tasks.catalog_reducer(volumes, ranges, on_encrypted, target)
    frame = ranges_frame(spark, ranges, volumes.total_bytes).mapInArrow(reduce, schema)
    rows = sorted(frame.collect(), key=lambda r: r.i)
    if [r.i for r in rows] != list(range(len(ranges))):
        raise RuntimeError("walcdc: a range's catalog facts are missing or repeated")
    return [(bytes(r.catalog), r.supplemental) for r in rows]


def range_plan(log: LogSet, kwargs: dict, skip, seed, split_bytes: int, versions: bytes) -> dict:
    """A data source plan whose parts are the window's ranges, each read once by the range
    reader (``range_changes``) with the plan's catalog ``versions`` (covering the log to its
    end, so that any read option fits); ``tasks``: how many partitions read the ranges
    (:func:`grouped`), four per core of the process that plans the read."""
    engine = not kwargs["committed_only"]
    ranges = clip(log.ranges(split_bytes), kwargs["start"], kwargs["end"])
    tasks = task_count(len(ranges), default_threads(), 4, log.volumes().total_bytes)
    plan = plan_dict(
        log, engine, kwargs["on_encrypted"], [{"start": s, "end": e} for s, e in ranges]
    )
    last_commit, offset, position = skip if skip is not None else (None, 0, None)
    first_skipped = None
    if offset and not engine:
        first_skipped = first_commit_after(log, kwargs, last_commit)
    plan.update(
        tasks=tasks,
        versions=base64.b64encode(versions).decode(),
        start=kwargs["start"],
        skip=None if skip is None else [last_commit, position, offset, first_skipped],
        seed=None if seed is None else base64.b64encode(seed).decode(),
    )
    return plan


def plan_dict(log: LogSet, engine: bool, on_encrypted: str, parts: list) -> dict:
    """A data source plan (:func:`walcdc.spark.source_plan`, or the one the data source makes
    itself): its ``parts`` and what every part shares."""
    return {
        "walcdc_plan": 2,
        "paths": log.volumes().paths,
        "db_creation": log.header()["db_creation"],
        "engine": engine,
        "on_encrypted": on_encrypted,
        "parts": parts,
    }


def range_plan_here(
    log: LogSet,
    split_bytes: int,
    *,
    cursor=None,
    start=None,
    end=None,
    committed_only: bool = True,
    on_encrypted: str = "raise",
    whole: bool = True,
) -> dict:
    """:func:`range_plan` with its catalog read in this process (each range reduced, with
    every core it may use, then joined), where there is no Spark session (a data source's
    planner, a streaming micro-batch); ``whole``: the catalog to the end of the log (else to
    ``end``)."""
    kwargs, skip, seed = checked_options(
        log,
        start=start,
        end=end,
        cursor=cursor,
        committed_only=committed_only,
        on_encrypted=on_encrypted,
        decode=False,
    )
    ranges = catalog_ranges(log, kwargs, seed, split_bytes, whole)
    reduced = reduced_here(log, ranges, kwargs, default_threads())
    catalog = catalog_of(log, kwargs, seed, ranges, reduced)
    warn_left_out(catalog.left, kwargs)
    if not catalog.supplemental:
        check_supplemental_logging_here(log, kwargs)
    return range_plan(log, kwargs, skip, seed, split_bytes, catalog.versions)
