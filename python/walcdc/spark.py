"""walcdc on Spark: a log set read in parallel, one record-aligned range per task, through
``mapInArrow`` (Arrow batches built in Rust go straight to Spark; no Python per row).

The driver reads volume and page headers only (:meth:`walcdc.LogSet.ranges`) and never walks
the log; each task opens the volumes itself and reads its range. ``source`` must therefore be
readable at the same paths on every executor: local disk in local mode, or a shared mount (NFS,
a cluster file system mounted on every node). Object stores (s3://, abfs://) are not read
directly: copy or mount the archives first. Executors need walcdc installed (``pip install
walcdc`` on every node, or a packed environment shipped with ``spark.archives``); in local mode
the driver's interpreter serves.

Spark types come from the Arrow schemas of the local API through one mapping
(:func:`spark_schema`): unsigned integers widen to the next signed type (LSAs fit ``long``),
dictionary-encoded strings are strings, timestamps are UTC instants.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from collections import OrderedDict
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from walcdc.changes import OPTION_DEFAULTS
from walcdc.errors import InvalidArgumentError, argument_error
from walcdc.logset import LogSet, open_log

__all__ = [
    "end_cursor",
    "read_changes",
    "read_records",
    "read_table_changes",
    "source_plan",
    "spark_schema",
    "spark_type",
]

DEFAULT_SPLIT_BYTES = 64 << 20


def spark_type(t: pa.DataType):
    """The Spark type of an Arrow type of walcdc's schemas (the one mapping)."""
    from pyspark.sql import types as T

    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t) or pa.types.is_uint8(t):
        return T.ShortType()
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return T.IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return T.LongType()  # LSA keys are below 2**63
    if pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return T.StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return T.BinaryType()
    if pa.types.is_date(t):
        return T.DateType()
    if pa.types.is_time(t):
        return T.TimeType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(spark_type(t.value_type), True)
    if pa.types.is_struct(t):
        return T.StructType([_field(t.field(i)) for i in range(t.num_fields)])
    raise TypeError(f"no Spark type for Arrow type {t}")


def _field(f: pa.Field):
    from pyspark.sql import types as T

    return T.StructField(f.name, spark_type(f.type), True)


def spark_schema(schema: pa.Schema):
    """The Spark schema of one of walcdc's Arrow schemas (every field nullable in Spark)."""
    from pyspark.sql import types as T

    return T.StructType([_field(f) for f in schema])


def _spark_arrow_schema(spark, schema) -> pa.Schema:
    """The Arrow form Spark expects back from ``mapInArrow`` for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=large)


def _use_driver_python(spark) -> None:
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


def _cast(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    return pa.Table.from_batches([batch]).cast(target).combine_chunks().to_batches()[0]


def _volume_paths(log: LogSet) -> List[str]:
    """Absolute volume paths the executors open (a directory was expanded on the driver)."""
    return [os.path.abspath(v["path"]) for v in log.header()["volumes"]]


def _clip(
    ranges: List[Tuple[Optional[int], Optional[int]]], start: Optional[int], end: Optional[int]
) -> List[Tuple[Optional[int], Optional[int]]]:
    """The ranges cut to ``[start, end)`` (LSA keys; None is open)."""
    out = []
    for s, e in ranges:
        if start is not None and (e is not None and e <= start):
            continue
        if end is not None and (s is not None and s >= end):
            continue
        if start is not None and (s is None or s < start):
            s = start
        if end is not None and (e is None or e > end):
            e = end
        out.append((s, e))
    return out


def read_records(
    spark,
    source,
    *,
    start: Union[int, str, None] = None,
    end: Union[int, str, None] = None,
    payloads: bool = False,
    on_encrypted: str = "raise",
    split_bytes: int = DEFAULT_SPLIT_BYTES,
):
    """One row per log record, as :meth:`walcdc.LogSet.records` gives them, read in parallel:
    a Spark DataFrame with the same columns (types by :func:`spark_schema`). ``split_bytes``
    is the log read by one task (cut at record boundaries)."""
    from walcdc.options import choice, position

    choice("on_encrypted", on_encrypted, ("raise", "skip"))
    log = source if isinstance(source, LogSet) else open_log(source)
    paths = _volume_paths(log)
    start_key = position(log, start, "start")
    end_key = position(log, end, "end")
    if start_key is not None:
        log.records(start=start_key, end=start_key).read_all()  # a record start, or the error
    ranges = _clip(log.ranges(split_bytes), start_key, end_key)
    arrow_schema = log.records(payloads=payloads).schema  # lazy: nothing is read
    schema = spark_schema(arrow_schema)
    target = _spark_arrow_schema(spark, schema)
    _use_driver_python(spark)

    def read(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc

        task_log = walcdc.open_log(paths)
        for t in tasks:
            for s, e in zip(t.column("start").to_pylist(), t.column("end").to_pylist()):
                reader = task_log._native.records(
                    start=s, end=e, payloads=payloads, on_encrypted=on_encrypted, range=True
                )
                for batch in reader:
                    yield _cast(pa.record_batch(batch), target)

    return _ranges_frame(spark, ranges, _log_bytes(paths)).mapInArrow(read, schema)


def _task_count(spark, ranges: int, per_core: int, log_bytes: Optional[int] = None) -> int:
    """Tasks for ``ranges`` ranges: ``per_core`` per core of the session (small tasks even
    out uneven ranges), at most one per range and, given the log's size, one per
    ``_TASK_BYTES`` of it (below that a task costs more to schedule than it reads)."""
    try:
        tasks = per_core * spark.sparkContext.defaultParallelism
    except Exception:  # noqa: BLE001 -- Spark Connect has no SparkContext: its shuffle width
        tasks = int(spark.conf.get("spark.sql.shuffle.partitions", "200"))
    if log_bytes is not None:
        tasks = min(tasks, -(-log_bytes // _TASK_BYTES))
    return max(1, min(ranges, tasks))


_TASK_BYTES = 8 << 20


def _spans(ranges: List[Tuple[Optional[int], Optional[int]]]):
    """Adjacent ranges (one's end the next one's start) joined: a task reads its consecutive
    ranges as one span, so a transaction crossing from one to the next is not read back along
    its chain at each edge."""
    spans: List[List[Optional[int]]] = []
    for s, e in ranges:
        if spans and spans[-1][1] is not None and spans[-1][1] == s:
            spans[-1][1] = e
        else:
            spans.append([s, e])
    return [(s, e) for s, e in spans]


def _spark_hash(value: int) -> int:
    """Spark's hash of an int column (Murmur3 x86_32 of its four bytes, seed 42), signed:
    ``repartition(n, col)`` puts a row in partition ``hash mod n``."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k = rotl((value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h = (rotl(42 ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & 0xFFFFFFFF
    h ^= h >> 13
    h = h * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def _partition_keys(parts: int) -> List[int]:
    """For each partition ``p`` of ``parts``, an int that ``repartition(parts, col)`` sends to
    ``p``: ranges given the key of ``i mod parts`` fill every partition evenly, which hashing
    the range numbers themselves does not (a third of the partitions empty, others doubled)."""
    keys: List[Optional[int]] = [None] * parts
    missing, k = parts, 0
    while missing:
        p = _spark_hash(k) % parts  # Python's % is Spark's pmod
        if keys[p] is None:
            keys[p] = k
            missing -= 1
        k += 1
    return keys  # type: ignore[return-value]


def _log_bytes(paths: List[str]) -> int:
    return sum(os.stat(p).st_size for p in paths)


def _ranges_frame(spark, ranges, log_bytes: int, parts: Optional[int] = None):
    """One row per range, spread over at most four tasks per core of the session and one per
    ``_TASK_BYTES`` of the log's ``log_bytes`` (ranges beyond that share a task: each stage
    over a small log is then one or two tasks, not eight); with ``parts``, a ``part`` column:
    the key that sends range ``i`` to partition ``i mod parts`` (see
    :func:`_partition_keys`)."""
    from pyspark.sql import types as T

    fields = [
        T.StructField("i", T.IntegerType(), False),
        T.StructField("start", T.LongType(), True),
        T.StructField("end", T.LongType(), True),
    ]
    rows = [(i, s, e) for i, (s, e) in enumerate(ranges)]
    if parts is not None:
        keys = _partition_keys(parts)
        rows = [(*r, keys[r[0] % parts]) for r in rows]
        fields.append(T.StructField("part", T.IntegerType(), False))
    schema = T.StructType(fields)
    try:
        tasks = _task_count(spark, len(rows), 4, log_bytes)
        return spark.createDataFrame(spark.sparkContext.parallelize(rows, tasks), schema)
    except Exception:  # noqa: BLE001 -- Spark Connect has no SparkContext
        return spark.createDataFrame(rows, schema)


# Kinds of the facts a range reports (walcdc_core::parallel::FactKind), and its counts row.
_START, _COMMIT, _ABORT, _UNDONE, _USER, _CLASS_WRITE, _MVCC_DML, _TIMER, _FIRST = range(9)
_COUNTS = 15


def _cut(
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


def _catalog_inputs(facts, seed_trids: Sequence[int] = ()) -> List[Tuple[bool, int, int]]:
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


def read_changes(
    spark,
    source,
    *,
    start=None,
    end=None,
    tables=None,
    exclude_tables=None,
    users=None,
    ops=None,
    include_trigger: bool = True,
    include_ddl: str = "matching",
    committed_only: bool = True,
    mode: str = "full",
    keys: str = "name_then",
    schema=None,
    on_error: str = "raise",
    on_encrypted: str = "raise",
    on_partial: str = "skip",
    decode: bool = True,
    redact: bool = True,
    cursor=None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
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
    ``on_partial="skip"`` (``"emit"`` is read locally only, for now).
    """

    log = source if isinstance(source, LogSet) else open_log(source)
    kwargs, skip, seed = _checked_options(
        log,
        start=start,
        end=end,
        tables=tables,
        exclude_tables=exclude_tables,
        users=users,
        ops=ops,
        include_trigger=include_trigger,
        include_ddl=include_ddl,
        committed_only=committed_only,
        mode=mode,
        keys=keys,
        schema=schema,
        cursor=cursor,
        on_error=on_error,
        on_encrypted=on_encrypted,
        on_partial=on_partial,
        decode=decode,
        redact=redact,
    )
    return _changes_frame(spark, log, kwargs, skip, seed, split_bytes)


def _changes_frame(spark, log: LogSet, kwargs: dict, skip, seed, split_bytes: int, typed=None):
    """The plan of :func:`read_changes` (both streams); ``typed``: a table's columns, to give
    ``before`` / ``after`` as typed structs (:func:`read_table_changes`). Each task reads its
    ranges once with the range reader (``range_changes``) and the catalog versions built by
    one Spark job."""
    import walcdc._native as native

    paths = _volume_paths(log)
    _use_driver_python(spark)
    start_key, end_key = kwargs["start"], kwargs["end"]
    committed = kwargs["committed_only"]
    versions, supplemental = _committed_catalog(spark, log, paths, kwargs, seed, split_bytes)
    if not supplemental:
        # A window with no supplemental record: written with supplemental_log=0?
        facts, _, _, plan = _facts_and_plan(spark, log, paths, kwargs, skip, seed, split_bytes)
        _check_supplemental_logging(log, facts, plan.windowed, start_key, end_key)
    last_commit, offset, position = skip if skip is not None else (None, 0, None)
    # A cursor inside a committed transaction: the first commit after its last one skips
    # what the earlier run emitted of it.
    first_skipped = _first_commit_after(log, kwargs, last_commit) if committed and offset else None
    try:
        versions_shared = spark.sparkContext.broadcast(versions)
    except Exception:  # noqa: BLE001 -- Spark Connect: ship the bytes with the function
        versions_shared = None

    def versions_bytes() -> bytes:
        return versions_shared.value if versions_shared is not None else versions

    if typed is not None:
        result_arrow = pa.schema(native.table_changes_schema(typed))
    else:
        result_arrow = pa.schema(native.changes_schema())
    result = spark_schema(result_arrow)
    result_target = _spark_arrow_schema(spark, result)
    event_ranges = _clip(log.ranges(split_bytes), start_key, end_key)
    log_bytes = _log_bytes(paths)

    def read_ranges(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc
        import walcdc._native as n

        task_log = walcdc.open_log(paths)
        task_options = task_log._native.change_options(**kwargs)
        v = versions_bytes()
        mine = [
            (s, e)
            for t in tasks
            for s, e in zip(t.column("start").to_pylist(), t.column("end").to_pylist())
        ]
        for s, e in _spans(mine):
            holds = first_skipped is not None and (s is None or s <= first_skipped)
            holds = holds and (e is None or first_skipped < e)
            batches = n.range_changes(
                task_log._native,
                task_options,
                v,
                s,
                e,
                skip_commits_upto=last_commit,
                skip_before=position,
                skip_events=offset if holds else 0,
                columns=typed,
            )
            for b in batches:
                yield _cast(pa.record_batch(b), result_target)

    return _ranges_frame(spark, event_ranges, log_bytes).mapInArrow(read_ranges, result)


def _first_commit_after(log: LogSet, kwargs: dict, last_commit: Optional[int]) -> Optional[int]:
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


def _checked_options(log: LogSet, *, cursor, **options):
    """The keyword arguments of the native ``change_options`` (what tasks rebuild them from),
    checked once on the driver; ``skip``: a cursor becomes the start, and what the earlier
    run emitted (``(last_commit_lsa, txn_offset, position)``); ``seed``: the cursor's catalog
    checkpoint (the facts start there instead of at the beginning of the log), or None."""
    import walcdc._native as native
    from walcdc.changes import _native_options

    kwargs = _native_options(log, cursor=cursor, memory_limit=256 << 20, **options)
    if kwargs["on_partial"] != "skip":
        raise argument_error(
            "on_partial",
            '{}"emit" is read locally only (walcdc.read_changes); on Spark, transactions begun '
            "before the oldest volume are left out",
        )
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


#: Facts and catalog versions of recent reads, by session, volumes (with their sizes and
#: times) and ranges: several reads of one log (one per table, say) walk it once. A volume that
#: changed makes another key.
_FACTS: OrderedDict[tuple, Tuple[Any, bytes, list]] = OrderedDict()
_FACTS_KEPT = 4


def _session_key(spark):
    try:
        return spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001 -- Spark Connect
        return id(spark)


def _facts_and_plan(
    spark, log: LogSet, paths: List[str], kwargs: dict, skip, seed, split_bytes: int
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
    fact_ranges = _cut(_cut(_clip(log.ranges(split_bytes), seed_at, facts_end), start_key), end_key)
    stats = tuple((p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths)
    seed_key = hashlib.sha256(seed).digest() if seed is not None else None
    key = (_session_key(spark), stats, tuple(fact_ranges), kwargs["on_encrypted"], seed_key)
    if key in _FACTS:
        _FACTS.move_to_end(key)
        facts, versions, inputs = _FACTS[key]
    else:
        facts = _facts_frame(spark, paths, fact_ranges, kwargs["on_encrypted"]).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        # The catalog: built once on the driver from the class-record writes.
        inputs = _catalog_inputs(facts, seed_trids)
        versions, _ = native.catalog_versions(log._native, inputs, seed)
        _FACTS[key] = (facts, versions, inputs)
        while len(_FACTS) > _FACTS_KEPT:
            old = _FACTS.popitem(last=False)[1][0]
            old.unpersist()
    return facts, versions, inputs, _Plan(facts, start_key, end_key, kwargs, skip)


#: Catalog versions of recent committed reads (as ``_FACTS``).
_CATALOGS: OrderedDict[tuple, Tuple[bytes, int]] = OrderedDict()


def _committed_catalog(
    spark, log: LogSet, paths: List[str], kwargs: dict, seed, split_bytes, whole=None
):
    """The catalog versions of a committed read and the supplemental records in its window,
    from one Spark job: each range reduced where it is read to what the catalog needs
    (``RangeCatalog``: its DDL transactions' class-record writes, and the writes of the
    transactions open at its edges), joined on the driver in log order. What the driver holds
    is bounded by the DDL and the transactions open at range edges, not by the changes.
    ``whole``: the versions cover the log to its end (by default only with keys that are the
    names at the end of the log)."""
    if whole is None:
        whole = kwargs["decode"] and kwargs["keys"] == "name_now"
    ranges = _catalog_ranges(log, kwargs, seed, split_bytes, whole)
    stats = tuple((p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths)
    seed_key = hashlib.sha256(seed).digest() if seed is not None else None
    key = (_session_key(spark), stats, tuple(ranges), kwargs["on_encrypted"], seed_key)
    if key in _CATALOGS:
        _CATALOGS.move_to_end(key)
        return _CATALOGS[key]
    on_spark = _reduced_on_spark(spark, paths, ranges, kwargs)
    reduced = _catalog_of(log, kwargs, seed, ranges, on_spark)
    _CATALOGS[key] = reduced
    while len(_CATALOGS) > _FACTS_KEPT:
        _CATALOGS.popitem(last=False)
    return reduced


def _catalog_ranges(log: LogSet, kwargs: dict, seed, split_bytes: int, whole: bool):
    """The ranges the catalog is read from: from the beginning of the log (or the cursor's
    checkpoint) to the window's end (``whole``: the log's), cut at the window's edges."""
    import walcdc._native as native

    start_key, end_key = kwargs["start"], kwargs["end"]
    seed_at = native.checkpoint_info(seed)[0] if seed is not None else None
    if seed_at is not None and start_key is not None and seed_at > start_key:
        raise InvalidArgumentError("the cursor's catalog checkpoint is past its restart point")
    ranges = _clip(log.ranges(split_bytes), seed_at, None if whole else end_key)
    return _cut(_cut(ranges, start_key), end_key)


def _reduced_on_spark(spark, paths: List[str], ranges, kwargs: dict):
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
    target = _spark_arrow_schema(spark, schema)

    def reduce(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc
        import walcdc._native as n

        task_log = walcdc.open_log(paths)
        for t in tasks:
            rows = zip(*(t.column(c).to_pylist() for c in ("i", "start", "end")))
            for i, s, e in rows:
                catalog, supplemental = n.range_catalog(task_log._native, s, e, on_encrypted)
                yield pa.record_batch([[i], [catalog], [supplemental]], schema=target)

    frame = _ranges_frame(spark, ranges, _log_bytes(paths)).mapInArrow(reduce, schema)
    rows = sorted(frame.collect(), key=lambda r: r.i)
    if [r.i for r in rows] != list(range(len(ranges))):
        raise RuntimeError("walcdc: a range's catalog facts are missing or repeated")
    return [(bytes(r.catalog), r.supplemental) for r in rows]


def _reduced_here(log: LogSet, ranges, kwargs: dict):
    """As :func:`_reduced_on_spark`, read in this process."""
    import walcdc._native as native

    return [native.range_catalog(log._native, s, e, kwargs["on_encrypted"]) for s, e in ranges]


def _catalog_of(log: LogSet, kwargs: dict, seed, ranges, reduced) -> Tuple[bytes, int]:
    """The catalog versions from the ranges' reductions, and the supplemental records in the
    window."""
    import walcdc._native as native

    start_key, end_key = kwargs["start"], kwargs["end"]
    seed_trids = native.checkpoint_info(seed)[1] if seed is not None else []
    inputs = native.catalog_inputs_of([c for c, _ in reduced], seed_trids)
    versions, _ = native.catalog_versions(log._native, inputs, seed)
    in_window = [
        n
        for (_, n), (s, _) in zip(reduced, ranges)
        if (start_key is None or (s is not None and s >= start_key))
        and (end_key is None or s is None or s < end_key)
    ]
    return versions, sum(in_window)


class _Plan:
    """The log's facts in the window (what the cursor questions and the supplemental-logging
    check ask)."""

    def __init__(self, facts, start_key, end_key, kwargs, skip):
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


def _facts_frame(spark, paths: List[str], ranges, on_encrypted: str):
    """The facts of every range (``walcdc_core::parallel::range_facts``), one task per few
    ranges."""
    import walcdc._native as native

    schema = spark_schema(pa.schema(native.facts_schema()))
    target = _spark_arrow_schema(spark, schema)

    def read_facts(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc
        import walcdc._native as n

        task_log = walcdc.open_log(paths)
        for t in tasks:
            for s, e in zip(t.column("start").to_pylist(), t.column("end").to_pylist()):
                b = n.range_facts(task_log._native, s, e, on_encrypted)
                yield _cast(pa.record_batch(b), target)

    return _ranges_frame(spark, ranges, _log_bytes(paths)).mapInArrow(read_facts, schema)


def _check_supplemental_logging(log: LogSet, facts, windowed, start_key, end_key) -> None:
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

    log, kwargs, skip, seed = _facts_run(
        spark,
        source,
        start=start,
        end=end,
        cursor=cursor,
        committed_only=committed_only,
        on_encrypted=on_encrypted,
    )
    inputs, [(restart, last_commit, position)] = _cursors_at(
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
) -> str:
    """The plan of a ``spark.read.format("walcdc")`` read over a large log (JSON text, for its
    ``plan`` option): the window cut into ranges of ``split_bytes``, each with the cursor a run
    ending at its start leaves, computed from the log's facts by Spark (no event is read) as
    :func:`end_cursor` does, and the class-record writes the tasks rebuild each cursor's
    catalog checkpoint from. Each task of the data source then reads its range as the local
    stream resumed from that cursor does, so the rows are exactly those of
    :func:`walcdc.read_changes`, with no join. Without a plan the data source finds the same
    cursors itself by reading the log once where it plans (on the driver)."""
    from walcdc.changes import Cursor

    log, kwargs, skip, seed = _facts_run(
        spark,
        source,
        start=start,
        end=end,
        cursor=cursor,
        committed_only=committed_only,
        on_encrypted=on_encrypted,
    )
    paths = _volume_paths(log)
    catalog = _committed_catalog(spark, log, paths, kwargs, seed, split_bytes, whole=True)
    plan = _range_plan(log, kwargs, skip, seed, split_bytes, catalog)
    if plan is not None:
        return json.dumps(plan)
    bounds = [e for _, e in _clip(log.ranges(split_bytes), kwargs["start"], kwargs["end"])]
    inputs: list = []
    cursors: list = []
    if len(bounds) > 1:
        inputs, cursors = _cursors_at(spark, log, kwargs, skip, seed, split_bytes, bounds[:-1])
    if cursor is not None and not isinstance(cursor, Cursor):
        cursor = Cursor.load(cursor)
    first = {"start": None if cursor is not None else kwargs["start"], "cursor": None}
    if cursor is not None:
        first["cursor"] = cursor.to_json()
    parts = [dict(first, end=bounds[0])]
    parts += [{"at": list(c), "end": e} for c, e in zip(cursors, bounds[1:])]
    engine = not kwargs["committed_only"]
    return json.dumps(_plan_dict(log, engine, kwargs["on_encrypted"], parts, seed, inputs))


def _range_plan(log: LogSet, kwargs: dict, skip, seed, split_bytes: int, catalog) -> Optional[dict]:
    """A data source plan whose parts are the window's ranges, each read once by the range
    reader (``range_changes``) with the plan's catalog versions (``catalog``: ``(versions,
    supplemental records in the window)`` covering the log to its end, so that any read option
    fits). None where the cursor-per-part plan still decides: a window with no supplemental
    record (the one-pass reader's ``supplemental_log=0`` check)."""
    versions, supplemental = catalog
    if not supplemental:
        return None
    engine = not kwargs["committed_only"]
    ranges = _clip(log.ranges(split_bytes), kwargs["start"], kwargs["end"])
    plan = _plan_dict(
        log, engine, kwargs["on_encrypted"], [{"start": s, "end": e} for s, e in ranges]
    )
    last_commit, offset, position = skip if skip is not None else (None, 0, None)
    first_skipped = None
    if offset and not engine:
        first_skipped = _first_commit_after(log, kwargs, last_commit)
    plan.update(
        versions=base64.b64encode(versions).decode(),
        start=kwargs["start"],
        skip=None if skip is None else [last_commit, position, offset, first_skipped],
        seed=None if seed is None else base64.b64encode(seed).decode(),
    )
    return plan


def _plan_dict(
    log: LogSet, engine: bool, on_encrypted: str, parts: list, seed=None, inputs=()
) -> dict:
    """A data source plan (:func:`source_plan`, or the one the data source makes itself):
    its ``parts`` and what every part shares."""
    return {
        "walcdc_plan": 1,
        "paths": _volume_paths(log),
        "db_creation": log.header()["db_creation"],
        "engine": engine,
        "on_encrypted": on_encrypted,
        "seed": None if seed is None else base64.b64encode(seed).decode(),
        "inputs": [list(i) for i in inputs],
        "parts": parts,
    }


def _facts_run(spark, source, **options):
    """A run that only needs the log's facts (cursors, plans): the log, and the checked
    options of :func:`_checked_options` (``kwargs``, ``skip``, ``seed``)."""
    log = source if isinstance(source, LogSet) else open_log(source)
    checked = {k: v for k, v in OPTION_DEFAULTS.items() if k != "memory_limit"}
    checked.update(options, decode=False)
    kwargs, skip, seed = _checked_options(log, **checked)
    _use_driver_python(spark)
    return log, kwargs, skip, seed


def _bucket(df, column: str, bounds: List[int]):
    """``df`` with ``_k``: how many of ``bounds`` (sorted LSA keys) are at or before
    ``column`` (null stays null), computed per Arrow batch."""
    from pyspark.sql import types as T

    schema = T.StructType(df.schema.fields + [T.StructField("_k", T.IntegerType(), True)])
    target = _spark_arrow_schema(df.sparkSession, schema)

    def bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np

        edges = np.asarray(bounds, dtype=np.int64)
        for b in batches:
            values = b.column(column)
            k = np.searchsorted(edges, values.fill_null(0).to_numpy(), side="right")
            ks = pa.array(k.astype(np.int32), mask=values.is_null().to_numpy(zero_copy_only=False))
            yield pa.RecordBatch.from_arrays(b.columns + [ks.cast(pa.int32())], schema=target)

    return df.mapInArrow(bucket, schema)


def _cursors_at(spark, log: LogSet, kwargs: dict, skip, seed, split_bytes: int, bounds):
    """What a run over the window of ``kwargs`` ending at each of ``bounds`` (sorted LSA keys,
    range boundaries of ``split_bytes``; the last may be None, the end of the log) would leave
    for the next one, from the log's facts alone: ``(catalog inputs, [(restart, last_commit,
    position), ...])``, the fields of :class:`walcdc.Cursor` (the catalog checkpoint is built
    from the inputs at the restart point). Each is what :func:`end_cursor` gives with that
    ``end``: the window's last commit before it, where the walk of the range ending there
    stopped, and the first record of the oldest transaction still open there. One Spark job per
    question whatever the number of bounds; what reaches the driver is a row per bound."""
    from pyspark.sql import functions as F

    paths = _volume_paths(log)
    facts, _, inputs, plan = _facts_and_plan(spark, log, paths, kwargs, skip, seed, split_bytes)
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


def read_table_changes(spark, source, table, **kwargs):
    """Changes of one table with typed ``before`` / ``after`` structs, as
    :func:`walcdc.read_table_changes` gives them, read in parallel (same rows, same columns).
    ``table`` and the other arguments are those of :func:`walcdc.read_table_changes` and
    :func:`read_changes` (``split_bytes``, ``cursor``)."""
    from walcdc.table_changes import _table_columns

    split_bytes = kwargs.pop("split_bytes", DEFAULT_SPLIT_BYTES)
    cursor = kwargs.pop("cursor", None)
    log = source if isinstance(source, LogSet) else open_log(source)
    class_oid, columns = _table_columns(log, table, {**kwargs, "cursor": cursor})
    fixed = ("tables", "exclude_tables", "keys", "cursor", "memory_limit")
    options = {k: v for k, v in OPTION_DEFAULTS.items() if k not in fixed}
    unknown = set(kwargs) - set(options)
    if unknown:
        raise TypeError(f"read_table_changes() got unexpected arguments {sorted(unknown)}")
    options.update(kwargs)
    checked, skip, seed = _checked_options(
        log, tables=[class_oid], exclude_tables=None, keys="id", cursor=cursor, **options
    )
    return _changes_frame(spark, log, checked, skip, seed, split_bytes, typed=columns)
