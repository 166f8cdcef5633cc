"""walcdc.spark on a real local[2] Spark session: the DataFrames equal the local streams,
every column of every row, over every fixture, with the default split and with ranges of a
few pages."""

from __future__ import annotations

import pyarrow as pa
import pytest

import walcdc
from conftest import fixture_dir

FIXTURES = ["p4k", "p16k", "crash", "breadth", "nosupp", "v11_2"]


def local_as_spark(table: pa.Table, df):
    """The local table in the Arrow types Spark hands back (the one mapping), and what Spark
    handed back."""
    from walcdc.spark import spark_schema

    got = df.toArrow()
    assert spark_schema(table.schema) == df.schema
    return table.cast(got.schema), got


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("split_pages", [None, 3])
def test_read_records_equals_the_local_walk(spark, name, split_pages):
    from walcdc.spark import read_records

    d = fixture_dir(name)
    log = walcdc.open_log(d)
    kw = {} if split_pages is None else {"split_bytes": split_pages * log.header()["page_size"]}
    df = read_records(spark, d, on_encrypted="skip", **kw)
    want, got = local_as_spark(log.records(on_encrypted="skip").read_all(), df)
    got = got.sort_by("lsa")
    assert got.num_rows == want.num_rows
    assert got.equals(want)


def test_read_records_with_payloads_and_a_window(spark):
    from walcdc.spark import read_records

    d = fixture_dir("breadth")
    log = walcdc.open_log(d)
    lsas = log.records().read_all().column("lsa").to_pylist()
    start, end = lsas[1000], lsas[5000]
    df = read_records(spark, d, start=start, end=end, payloads=True, split_bytes=8 * 4096)
    want, got = local_as_spark(log.records(start=start, end=end, payloads=True).read_all(), df)
    assert got.sort_by("lsa").equals(want)


def test_read_records_start_must_be_a_record_start(spark):
    from walcdc.spark import read_records

    d = fixture_dir("breadth")
    lsas = walcdc.open_log(d).records().read_all().column("lsa").to_pylist()
    with pytest.raises(walcdc.InvalidArgumentError, match="no record starts"):
        read_records(spark, d, start=lsas[10] + 1)
