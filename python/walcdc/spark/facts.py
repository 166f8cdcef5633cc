"""The log's facts on Spark (per range: starts, ends, users, class writes, ...; see
``walcdc_core::parallel``) and the questions still asked of them with joins on the driver's
side: the cursor where a run ends (:func:`cursors_at`) and whether a window with no
supplemental record was written without supplemental logging."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Iterator, List, Sequence, Tuple

import pyarrow as pa

from walcdc import _native
from walcdc.errors import InvalidArgumentError
from walcdc.logset import LogSet, Volumes, as_log
from walcdc.parallel import clip
from walcdc.plan import cut
from walcdc.spark import tasks
from walcdc.spark.plan import (
    KEPT,
    checked_options,
    ranges_frame,
    session_key,
    use_driver_python,
)
from walcdc.spark.types import spark_arrow_schema, spark_schema

# Kinds of the facts a range reports, and its counts row: codes from the core's one table.
_KIND = {name: code for code, name in _native.fact_kinds()}
_START, _COMMIT, _ABORT = _KIND["start"], _KIND["commit"], _KIND["abort"]
_CLASS_WRITE, _MVCC_DML, _FIRST = _KIND["class_write"], _KIND["mvcc_dml"], _KIND["first"]
_COUNTS = _KIND["counts"]


def _next_marker(rows, markers):
    """``rows`` (with ``trid`` and ``lsa``) each with the first marker of its trid after it —
    a transaction start or end — as ``end_lsa``, ``end_kind``, ``end_time``, ``end_vol``: the
    as-of join that gives a change its transaction instance. A trid reused later is another
    instance; a start before any end means the instance was abandoned; none means still open.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    m = markers.select(
        "trid",
        "lsa",
        F.struct(
            F.col("lsa").alias("end_lsa"),
            F.col("kind").alias("end_kind"),
            F.col("time").alias("end_time"),
            F.col("vol").alias("end_vol"),
        ).alias("_m"),
    )
    rows = rows.drop("end_lsa", "end_kind", "end_time", "end_vol")
    both = rows.unionByName(m, allowMissingColumns=True)
    # Latest first; at one LSA the row before the marker (a record starting a transaction
    # belongs to the new instance): the last marker seen so far is the next one in log order.
    w = Window.partitionBy("trid").orderBy(F.desc("lsa"), F.col("_m").isNotNull())
    nxt = F.last("_m", ignorenulls=True).over(w.rowsBetween(Window.unboundedPreceding, 0))
    return (
        both.withColumn("_next", nxt)
        .where(F.col("_m").isNull())
        .drop("_m")
        .select("*", "_next.*")
        .drop("_next")
    )


def catalog_inputs(facts, seed_trids: Sequence[int] = ()) -> List[Tuple[bool, int, int]]:
    """The records the catalog is built from, collected on the driver: every class-tracker
    write of the transaction instances that wrote a class-record image, and their end (or the
    start of the next instance under their trid, which drops what they staged). Bounded by the
    DDL in the log, not by its changes. ``seed_trids``: transactions with class work staged at
    the catalog checkpoint the facts start at (their instance goes on to their first marker)."""
    from pyspark.sql import functions as F

    markers = facts.where(F.col("kind").isin(_START, _COMMIT, _ABORT))
    writes = _next_marker(
        facts.where(F.col("kind") == _CLASS_WRITE).select("trid", "lsa", "class_record"), markers
    )
    involved = writes.where("class_record").select("trid", "end_lsa", "end_kind").distinct()
    if seed_trids:
        seeds = markers.where(F.col("trid").isin(list(seed_trids)))
        first = seeds.groupBy("trid").agg(F.min("lsa").alias("end_lsa"))
        first = first.join(
            seeds.select("trid", F.col("lsa").alias("end_lsa"), F.col("kind").alias("end_kind")),
            ["trid", "end_lsa"],
        )
        still_open = writes.where(
            F.col("trid").isin(list(seed_trids)) & F.col("end_lsa").isNull()
        ).select("trid", "end_lsa", "end_kind")
        involved = involved.unionByName(first).unionByName(still_open).distinct()
    key = involved.select(F.col("trid").alias("i_trid"), F.col("end_lsa").alias("i_end"))
    records = writes.join(
        key,
        (F.col("trid") == F.col("i_trid")) & F.col("end_lsa").eqNullSafe(F.col("i_end")),
        "left_semi",
    )
    ends = involved.where(F.col("end_lsa").isNotNull()).select(
        (F.col("end_kind") == _START).alias("restart"),
        "trid",
        F.col("end_lsa").alias("lsa"),
        "end_lsa",
    )
    both = records.select(F.lit(False).alias("restart"), "trid", "lsa", "end_lsa").union(ends)
    inputs = [(r.restart, r.trid, r.lsa, r.end_lsa) for r in both.collect()]
    # Log order; at one LSA a restart before the record.
    inputs.sort(key=lambda x: (x[2], not x[0]))
    return inputs


#: Facts and catalog versions of recent reads, by session, volumes (with their sizes and
#: times) and ranges: several reads of one log (one per table, say) walk it once. A volume that
#: changed makes another key.
FACTS: OrderedDict[tuple, Tuple[Any, bytes, list]] = OrderedDict()


def facts_and_plan(
    spark, log: LogSet, volumes: Volumes, kwargs: dict, skip, seed, split_bytes: int
):
    """The facts of the log (persisted: several joins read them), the catalog versions built
    from them, the catalog inputs, and the plan over them."""
    from pyspark import StorageLevel

    import walcdc._native as native

    start_key, end_key = kwargs["start"], kwargs["end"]
    # Facts cover the log from its beginning (the catalog before the start) or from the
    # cursor's catalog checkpoint, to the end of the log when keys are the names at the end of
    # the log, or for CUBRID's stream (which looks for a transaction's user past the end of the
    # window).
    seed_at, seed_trids = native.checkpoint_info(seed) if seed is not None else (None, [])
    if seed_at is not None and start_key is not None and seed_at > start_key:
        raise InvalidArgumentError("the cursor's catalog checkpoint is past its restart point")
    whole = not kwargs["committed_only"] or (kwargs["decode"] and kwargs["keys"] == "name_now")
    facts_end = None if whole else end_key
    fact_ranges = cut(cut(clip(log.ranges(split_bytes), seed_at, facts_end), start_key), end_key)
    seed_key = hashlib.sha256(seed).digest() if seed is not None else None
    key = (
        session_key(spark),
        volumes.identity(),
        tuple(fact_ranges),
        kwargs["on_encrypted"],
        seed_key,
    )
    if key in FACTS:
        FACTS.move_to_end(key)
        facts, versions, inputs = FACTS[key]
    else:
        facts = facts_frame(spark, volumes, fact_ranges, kwargs["on_encrypted"]).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        # The catalog: built once on the driver from the class-record writes.
        inputs = catalog_inputs(facts, seed_trids)
        versions, _ = native.catalog_versions(log._native, inputs, seed)
        FACTS[key] = (facts, versions, inputs)
        while len(FACTS) > KEPT:
            old = FACTS.popitem(last=False)[1][0]
            old.unpersist()
    return facts, versions, inputs, Facts(facts, start_key, end_key)


class Facts:
    """The log's facts in the window (what the cursor questions and the supplemental-logging
    check ask)."""

    def __init__(self, facts, start_key, end_key):
        from pyspark.sql import functions as F

        in_window = F.lit(True)
        if start_key is not None:
            in_window = in_window & (F.col("lsa") >= start_key)
        if end_key is not None:
            in_window = in_window & (F.col("lsa") < end_key)
        self.facts = facts.where(F.col("kind") != _COUNTS)
        self.windowed = self.facts.where(in_window)

    @staticmethod
    def markers(facts):
        from pyspark.sql import functions as F

        return facts.where(F.col("kind").isin(_START, _COMMIT, _ABORT))


def facts_frame(spark, volumes: Volumes, ranges, on_encrypted: str):
    """The facts of every range (``walcdc_core::parallel::range_facts``), one task per few
    ranges."""
    import walcdc._native as native

    schema = spark_schema(pa.schema(native.facts_schema()))
    target = spark_arrow_schema(spark, schema)

    read_facts = tasks.facts_reader(volumes, ranges, on_encrypted, target)
    return ranges_frame(spark, ranges, volumes.total_bytes).mapInArrow(read_facts, schema)


def check_supplemental_logging(log: LogSet, facts, windowed, start_key, end_key) -> None:
    """As the one-pass stream: a window with no supplemental record but committed transactions
    that changed user rows was written with ``supplemental_log=0``."""
    from pyspark.sql import functions as F

    counts = facts.where(F.col("kind") == _COUNTS)
    if start_key is not None:
        counts = counts.where(F.col("lsa") >= start_key)
    if end_key is not None:
        counts = counts.where(F.col("lsa") < end_key)
    total = counts.agg(F.sum("count")).first()[0] or 0
    if total:
        return
    markers = windowed.where(F.col("kind").isin(_START, _COMMIT, _ABORT))
    dml = _next_marker(windowed.where(F.col("kind") == _MVCC_DML).select("trid", "lsa"), markers)
    if dml.where(F.col("end_kind") == _COMMIT).limit(1).count():
        import walcdc._native as native

        raise native.no_supplemental_log_error(log._native)


def facts_run(spark, source, storage_options=None, **options):
    """A run that only needs the log's facts (cursors, plans): the log, and the checked
    options of :func:`checked_options` (``kwargs``, ``skip``, ``seed``)."""
    log = as_log(source, storage_options)
    kwargs, skip, seed = checked_options(log, **{**options, "decode": False})
    use_driver_python(spark)
    return log, kwargs, skip, seed


def _bucket(df, column: str, bounds: List[int]):
    """``df`` with ``_k``: how many of ``bounds`` (sorted LSA keys) are at or before
    ``column`` (null stays null), computed per Arrow batch."""
    from pyspark.sql import types as T

    schema = T.StructType(df.schema.fields + [T.StructField("_k", T.IntegerType(), True)])
    target = spark_arrow_schema(df.sparkSession, schema)

    def bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np

        edges = np.asarray(bounds, dtype=np.int64)
        for b in batches:
            values = b.column(column)
            k = np.searchsorted(edges, values.fill_null(0).to_numpy(), side="right")
            ks = pa.array(k.astype(np.int32), mask=values.is_null().to_numpy(zero_copy_only=False))
            yield pa.RecordBatch.from_arrays(b.columns + [ks.cast(pa.int32())], schema=target)

    return df.mapInArrow(bucket, schema)


def cursors_at(spark, log: LogSet, kwargs: dict, skip, seed, split_bytes: int, bounds):
    """What a run over the window of ``kwargs`` ending at each of ``bounds`` (sorted LSA keys,
    range boundaries of ``split_bytes``; the last may be None, the end of the log) would leave
    for the next one, from the log's facts alone: ``(catalog inputs, [(restart, last_commit,
    position), ...])``, the fields of :class:`walcdc.Cursor` (the catalog checkpoint is built
    from the inputs at the restart point). Each is what :func:`end_cursor` gives with that
    ``end``: the window's last commit before it, where the walk of the range ending there
    stopped, and the first record of the oldest transaction still open there. One Spark job per
    question whatever the number of bounds; what reaches the driver is a row per bound."""
    from pyspark.sql import functions as F

    facts, _, inputs, plan = facts_and_plan(
        spark, log, log.volumes(), kwargs, skip, seed, split_bytes
    )
    huge = (1 << 63) - 1
    edges = [huge if b is None else b for b in bounds]
    n = len(edges)
    # Where the walk stops: the end of the last range before each bound (counts rows carry a
    # range's start as ``lsa`` and where its walk stopped as ``lo``; one per range).
    counts = sorted(
        (r["lsa"], r["lo"])
        for r in facts.where(F.col("kind") == _COUNTS).select("lsa", "lo").collect()
    )
    positions = []
    for b in edges:
        before = [lo for lsa, lo in counts if lsa < b]
        positions.append(
            before[-1] if before and before[-1] is not None else (None if b == huge else b)
        )
    # The window's last commit before each bound: a maximum per bucket, then a running one.
    commits = _bucket(plan.windowed.where(F.col("kind") == _COMMIT).select("lsa"), "lsa", edges)
    last_in = dict(commits.groupBy("_k").agg(F.max("lsa").alias("m")).select("_k", "m").collect())
    # The oldest transaction still open at each bound: an instance (its first record f, its
    # next start or end marker e) is open at the bounds in (f, e]; a transaction spanning k
    # bounds makes k rows.
    markers = plan.markers(plan.windowed)
    seen = plan.windowed.where(F.col("kind").isin(_START, _FIRST)).select("trid", "lsa")
    inst = _next_marker(seen, markers).select("lsa", "end_lsa")
    inst = _bucket(inst, "lsa", edges).withColumnRenamed("_k", "_kf")
    inst = _bucket(inst, "end_lsa", edges).withColumn("_ke", F.coalesce(F.col("_k"), F.lit(n)))
    open_at = (
        inst.where(F.col("_ke") > F.col("_kf"))
        .select("lsa", F.explode(F.sequence(F.col("_kf") + 1, F.col("_ke"))).alias("_b"))
        .groupBy("_b")
        .agg(F.min("lsa").alias("f"))
    )
    oldest = dict(open_at.select("_b", "f").collect())
    skipped_commit = skip[0] if skip else None
    out = []
    running = None
    for k in range(1, n + 1):
        got = last_in.get(k - 1)
        if got is not None:
            running = got if running is None else max(running, got)
        position = positions[k - 1]
        first = oldest.get(k)
        restart = (
            position if first is None else (first if position is None else min(first, position))
        )
        if running is not None:
            last_commit = max(running, skipped_commit or 0)
        else:
            last_commit = skipped_commit
        out.append((restart, last_commit, position))
    return inputs, out
