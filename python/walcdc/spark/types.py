"""The one mapping from the Arrow schemas of the local API to Spark's types, and the casts of
batches to the Arrow form Spark expects (used on the driver and in the tasks)."""

from __future__ import annotations

import pyarrow as pa


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


def spark_arrow_schema(spark, schema) -> pa.Schema:
    """The Arrow form Spark expects back from ``mapInArrow`` for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=large)


def cast_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    return pa.Table.from_batches([batch]).cast(target).combine_chunks().to_batches()[0]
