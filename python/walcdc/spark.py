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

import os
import sys
from typing import Iterator, List, Optional, Tuple, Union

import pyarrow as pa

from walcdc.logset import LogSet, open_log

__all__ = ["read_changes", "read_records", "spark_schema", "spark_type"]

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

    return _ranges_frame(spark, ranges).mapInArrow(read, schema)


def _ranges_frame(spark, ranges):
    """One row per range, spread over at most four tasks per core of the session (ranges
    beyond that share a task)."""
    from pyspark.sql import types as T

    rows = [(i, s, e) for i, (s, e) in enumerate(ranges)]
    schema = T.StructType(
        [
            T.StructField("i", T.IntegerType(), False),
            T.StructField("start", T.LongType(), True),
            T.StructField("end", T.LongType(), True),
        ]
    )
    try:
        tasks = max(1, min(len(rows), 4 * spark.sparkContext.defaultParallelism))
        return spark.createDataFrame(spark.sparkContext.parallelize(rows, tasks), schema)
    except Exception:  # noqa: BLE001 -- Spark Connect has no SparkContext
        return spark.createDataFrame(rows, schema)


# Kinds of the facts a range reports (walcdc_core::parallel::FactKind), and its counts row.
_START, _COMMIT, _ABORT, _UNDONE, _USER, _CLASS_WRITE, _MVCC_DML, _COUNTS = range(8)
# Operation numbers of the carrier batches (walcdc_core Op::ALL).
_OP_COMMIT, _OP_ABORT = 4, 5


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


def _catalog_inputs(facts) -> List[Tuple[bool, int, int]]:
    """The records the catalog is built from, collected on the driver: every class-tracker
    write of the transaction instances that wrote a class-record image, and their end (or the
    start of the next instance under their trid, which drops what they staged). Bounded by the
    DDL in the log, not by its changes."""
    from pyspark.sql import functions as F

    markers = facts.where(F.col("kind").isin(_START, _COMMIT, _ABORT))
    writes = _next_marker(
        facts.where(F.col("kind") == _CLASS_WRITE).select("trid", "lsa", "class_record"), markers
    )
    involved = writes.where("class_record").select("trid", "end_lsa", "end_kind").distinct()
    key = involved.select(F.col("trid").alias("i_trid"), F.col("end_lsa").alias("i_end"))
    records = writes.join(
        key,
        (F.col("trid") == F.col("i_trid")) & F.col("end_lsa").eqNullSafe(F.col("i_end")),
        "left_semi",
    )
    inputs = [(False, r.trid, r.lsa) for r in records.select("trid", "lsa").collect()]
    for r in involved.where(F.col("end_lsa").isNotNull()).collect():
        inputs.append((r.end_kind == _START, r.trid, r.end_lsa))
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
    decode: bool = True,
    redact: bool = True,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
):
    """The committed change events of :func:`walcdc.read_changes`, read in parallel: a Spark
    DataFrame with the same rows and columns (types by :func:`spark_schema`). Options mean what
    they mean there.

    The driver reads volume and page headers, and the few records that write class records (to
    build the catalog once); every other record is read by the tasks, each over its own range
    of ``split_bytes`` of log. What a range cannot know alone is settled by joins (see
    ``docs/design.md``): an event belongs to the first end record of its trid after it, changes
    undone by a partial rollback are removed, the transaction's user and ``txn_seq`` are
    computed per transaction, and images are decoded with the catalog as of the commit.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from walcdc.changes import _native_options
    from walcdc.errors import InvalidArgumentError

    if not committed_only:
        raise InvalidArgumentError(
            "walcdc.spark.read_changes reads the committed-only stream; for CUBRID's own stream "
            "use walcdc.read_changes(..., committed_only=False)"
        )
    log = source if isinstance(source, LogSet) else open_log(source)
    kwargs = _native_options(
        log,
        start=start,
        end=end,
        tables=tables,
        exclude_tables=exclude_tables,
        users=users,
        ops=ops,
        include_trigger=include_trigger,
        include_ddl=include_ddl,
        committed_only=True,
        mode=mode,
        keys=keys,
        schema=schema,
        cursor=None,
        on_error=on_error,
        memory_limit=256 << 20,
        on_encrypted=on_encrypted,
        decode=decode,
        redact=redact,
    )
    log._native.change_options(**kwargs)  # checked once on the driver (tasks rebuild them)
    start_key, end_key = kwargs["start"], kwargs["end"]
    if start_key is not None:
        log.records(start=start_key, end=start_key).read_all()  # a record start, or the error
    paths = _volume_paths(log)
    _use_driver_python(spark)
    all_ranges = log.ranges(split_bytes)
    # Facts cover the log from its beginning (the catalog before the start), to its end when
    # keys are the names at the end of the log.
    facts_end = None if (decode and keys == "name_now") else end_key
    fact_ranges = _cut(_cut(_clip(all_ranges, None, facts_end), start_key), end_key)
    event_ranges = _clip(all_ranges, start_key, end_key)

    import walcdc._native as native

    facts = _facts_frame(spark, paths, fact_ranges, on_encrypted).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    in_window = F.lit(True)
    if start_key is not None:
        in_window = in_window & (F.col("lsa") >= start_key)
    if end_key is not None:
        in_window = in_window & (F.col("lsa") < end_key)
    windowed = facts.where(F.col("kind") != _COUNTS).where(in_window)

    # The catalog: built once on the driver from the class-record writes, shipped to tasks.
    versions, _ = native.catalog_versions(log._native, _catalog_inputs(facts))
    _check_supplemental_logging(log, facts, windowed, start_key, end_key)
    try:
        versions_shared = spark.sparkContext.broadcast(versions)
    except Exception:  # noqa: BLE001 -- Spark Connect: ship the bytes with the function
        versions_shared = None

    def versions_bytes() -> bytes:
        return versions_shared.value if versions_shared is not None else versions

    carrier_arrow = pa.schema(native.carrier_events_schema())
    carrier = spark_schema(carrier_arrow)
    carrier_target = _spark_arrow_schema(spark, carrier)

    def read_events(tasks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc
        import walcdc._native as n

        task_log = walcdc.open_log(paths)
        task_options = task_log._native.change_options(**kwargs)
        v = versions_bytes()
        for t in tasks:
            for s, e in zip(t.column("start").to_pylist(), t.column("end").to_pylist()):
                for b in n.range_events(task_log._native, task_options, v, s, e):
                    yield _cast(pa.record_batch(b), carrier_target)

    events = _ranges_frame(spark, event_ranges).mapInArrow(read_events, carrier)

    markers = windowed.where(F.col("kind").isin(_START, _COMMIT, _ABORT))
    events = _next_marker(events, markers)
    instance = ["trid", "end_lsa"]
    # Changes undone by rollbacks to a savepoint and failed statements.
    undone = (
        _next_marker(windowed.where(F.col("kind") == _UNDONE).select("trid", "lsa", "lo"), markers)
        .where(F.col("end_kind") == _COMMIT)
        .select(
            F.col("trid").alias("u_trid"),
            F.col("end_lsa").alias("u_end"),
            F.col("lo").alias("u_lo"),
            F.col("lsa").alias("u_hi"),
        )
    )
    # The transaction's user: its first TRAN_USER record.
    user_rows = _next_marker(
        windowed.where(F.col("kind") == _USER).select("trid", "lsa", "user"), markers
    )
    tx_users = user_rows.groupBy(*instance).agg(F.min_by("user", "lsa").alias("tx_user"))
    user_list = kwargs["users"]

    def user_passes(col):
        if user_list is None:
            return F.lit(True)
        return F.lower(col).isin([u.lower() for u in user_list]) & col.isNotNull()

    ended = events.where(F.col("end_kind").isin(_COMMIT, _ABORT)).join(tx_users, instance, "left")
    ended = ended.withColumn("user", F.col("tx_user")).where(user_passes(F.col("user")))
    committed = ended.where(F.col("end_kind") == _COMMIT)
    committed = committed.join(
        undone,
        (F.col("trid") == F.col("u_trid"))
        & (F.col("end_lsa") == F.col("u_end"))
        & (F.col("u_lo").isNull() | (F.col("u_lo") < F.col("lsa")))
        & (F.col("lsa") < F.col("u_hi")),
        "left_anti",
    )
    seq = Window.partitionBy("end_lsa").orderBy("lsa")
    committed = committed.withColumn("txn_seq", (F.row_number().over(seq) - 1).cast("long"))
    committed = committed.withColumn("commit_lsa", F.col("end_lsa")).withColumn(
        "commit_time", F.col("end_time")
    )
    columns = [f.name for f in carrier_arrow]
    out = committed.select(*columns)
    wanted = set(kwargs["ops"] or ())

    def marker(df, op, committed_marker):
        return df.select(
            F.col("end_lsa").alias("lsa"),
            F.col("end_vol").alias("vol"),
            "trid",
            F.lit(op).cast("byte").alias("op"),
            F.lit(False).alias("trigger"),
            "user",
            F.col("end_time").alias("time"),
            (F.col("end_lsa") if committed_marker else F.lit(None).cast("long")).alias(
                "commit_lsa"
            ),
            (F.col("end_time") if committed_marker else F.lit(None).cast("long")).alias(
                "commit_time"
            ),
            (F.col("n") if committed_marker else F.lit(0)).cast("long").alias("txn_seq"),
        )

    group = ["trid", "end_lsa", "end_vol", "end_time", "user"]
    if "commit" in wanted:
        counts = committed.groupBy(*group).agg(F.count(F.lit(1)).alias("n"))
        out = out.unionByName(marker(counts, _OP_COMMIT, True), allowMissingColumns=True)
    if "abort" in wanted:
        aborted = ended.where(F.col("end_kind") == _ABORT).groupBy(*group).count()
        out = out.unionByName(marker(aborted, _OP_ABORT, False), allowMissingColumns=True)

    result_arrow = pa.schema(native.changes_schema())
    result = spark_schema(result_arrow)
    result_target = _spark_arrow_schema(spark, result)

    def finish(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import walcdc
        import walcdc._native as n

        task_log = walcdc.open_log(paths)
        task_options = task_log._native.change_options(**kwargs)
        v = versions_bytes()
        for b in batches:
            if b.num_rows:
                done = n.finish_events(task_log._native, task_options, v, b)
                yield _cast(pa.record_batch(done), result_target)

    return out.select(*columns).mapInArrow(finish, result)


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

    return _ranges_frame(spark, ranges).mapInArrow(read_facts, schema)


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
