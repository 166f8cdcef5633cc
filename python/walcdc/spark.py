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

__all__ = ["read_records", "spark_schema", "spark_type"]

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
                reader = task_log.records(
                    start=s, end=e, payloads=payloads, on_encrypted=on_encrypted
                )
                for batch in reader:
                    yield _cast(batch, target)

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
