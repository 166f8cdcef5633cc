"""``spark.read.format("walcdc")``: the batch data source. Each of its partitions reads one
range as the local stream resumed from the cursor where a run ending there stops, so its rows
are exactly those of ``walcdc.read_changes``; filters on ``table``, ``op`` and ``user`` narrow
what the tasks read (Spark still applies them). Compared every row and column, on every
fixture, with ranges smaller than the largest transactions."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_spark import CHANGE_FIXTURES, ORDER, local_as_spark, small_split

import walcdc
from conftest import fixture_dir, tiered


def load(spark, d, **options):
    import walcdc.spark_source

    walcdc.spark_source.register(spark)
    reader = spark.read.format("walcdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(d))


def same(want: pa.Table, df) -> None:
    want, got = local_as_spark(want, df)
    assert got.num_rows == want.num_rows
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))


@pytest.mark.parametrize("name", [n for n in CHANGE_FIXTURES if n != "nosupp"])
def test_the_format_equals_the_local_stream(spark, name):
    """Planned where the read is planned, ranges of a few pages, one partition per range:
    transactions span many partitions; and in the default partitions (runs of ranges)."""
    d = fixture_dir(name)
    log = walcdc.open_log(d)
    split = small_split(log) * 4
    ranges = len(log.ranges(split))
    want = walcdc.read_changes(log, on_encrypted="skip").read_all()
    df = load(spark, d, split_bytes=split, on_encrypted="skip", partitions=10**6)
    assert df.rdd.getNumPartitions() == ranges > 10
    same(want, df)
    df = load(spark, d, split_bytes=split, on_encrypted="skip")
    assert df.rdd.getNumPartitions() < ranges
    same(want, df)


def test_whole_number_options_are_checked():
    """``split_bytes``, ``partitions`` and the integer read options are whole numbers (the
    first two at least 1); anything else is an ``InvalidArgumentError`` naming the option."""
    from walcdc.spark.plan import DEFAULT_SPLIT_BYTES
    from walcdc.spark_source import _partitions, _read_options, _split_bytes

    assert _split_bytes({}) == DEFAULT_SPLIT_BYTES
    assert _split_bytes({"split_bytes": "4096"}) == 4096
    assert _partitions({}) is None and _partitions({"partitions": "3"}) == 3
    assert _read_options({"memory_limit": "1000"})["memory_limit"] == 1000
    for bad in ("x", "0", "-1", "1.5", "4k"):
        with pytest.raises(walcdc.InvalidArgumentError, match="split_bytes must be a whole"):
            _split_bytes({"split_bytes": bad})
        with pytest.raises(walcdc.InvalidArgumentError, match="partitions must be a whole"):
            _partitions({"partitions": bad})
    with pytest.raises(walcdc.InvalidArgumentError, match="memory_limit must be a whole"):
        _read_options({"memory_limit": "lots"})


def test_partitions_are_runs_of_ranges(spark):
    """A plan's ranges are read in ``partitions`` runs of consecutive ranges (the plan's
    ``tasks`` by default: four per task slot), each range in exactly one run, in order."""
    import json

    from walcdc.spark import source_plan
    from walcdc.spark.plan import grouped

    d = fixture_dir("p4k")
    log = walcdc.open_log(d)
    plan = json.loads(source_plan(spark, d, split_bytes=small_split(log)))
    assert plan["tasks"] == 8  # four per slot of local[2]: p4k is more than 64 MiB
    parts = plan["parts"]
    for n in (1, 3, 8, len(parts), len(parts) + 5):
        runs = grouped(parts, n)
        assert len(runs) == min(n, len(parts))
        assert [r for run in runs for r in run] == parts
        assert max(map(len, runs)) - min(map(len, runs)) <= 1
    assert load(spark, d, plan=json.dumps(plan)).rdd.getNumPartitions() == 8
    assert load(spark, d, plan=json.dumps(plan), partitions=3).rdd.getNumPartitions() == 3
    for bad in ("0", "-1", "many"):
        with pytest.raises(Exception, match="partitions must be a whole number"):
            load(spark, d, plan=json.dumps(plan), partitions=bad).rdd.getNumPartitions()


@pytest.mark.parametrize("name", ["p4k", "breadth", "v11_2"])
@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
def test_a_plan_made_by_spark_reads_each_range_once(spark, name, committed_only):
    """``walcdc.spark.source_plan``: the window's ranges with the catalog versions, each
    range read once (both streams): the rows of the local stream."""
    from walcdc.spark import source_plan

    d = fixture_dir(name)
    log = walcdc.open_log(d)
    split = small_split(log) * 4
    text = source_plan(spark, d, split_bytes=split, committed_only=committed_only)
    plan = json.loads(text)
    parts = plan["parts"]
    assert len(parts) > 10
    assert plan["versions"] and [(p["start"], p["end"]) for p in parts] == log.ranges(split)
    want = walcdc.read_changes(log, committed_only=committed_only).read_all()
    same(want, load(spark, d, plan=text, committed_only=str(committed_only).lower()))


def test_filters_narrow_the_read_and_rows_stay_exact(spark):
    """``where table = … and op in (…)`` and ``user = …``: the rows of the local stream that
    pass the same filters; the tasks read with the filters pushed (tables resolved to OIDs)."""
    d = fixture_dir("breadth")
    log = walcdc.open_log(d)
    whole = walcdc.read_changes(log).read_all()
    tables = [t for t in pc.unique(whole.column("table")).to_pylist() if t]
    users = [u for u in pc.unique(whole.column("user")).to_pylist() if u]
    assert tables and users
    split = small_split(log) * 4
    df = load(spark, d, split_bytes=split)
    for table in tables[:3]:
        want = whole.filter(
            pc.and_(
                pc.equal(whole.column("table"), table),
                pc.is_in(whole.column("op").cast(pa.string()), pa.array(["insert", "update"])),
            )
        )
        assert want.num_rows > 0
        same(want, df.where(f"table = '{table}' and op in ('insert', 'update')"))
    want = whole.filter(pc.equal(whole.column("user"), users[0]))
    same(want, df.where(f"user = '{users[0]}'"))
    # A name no table had, an operation that does not exist: nothing, no error.
    assert df.where("table = 'no_such_table'").count() == 0
    assert df.where("op = 'INSERT'").count() == 0


def test_pushed_filters_reach_the_tasks():
    """The reader (as Spark's planner drives it): pushed filters become what every partition
    reads with (tables resolved to class OIDs), Spark is still given every filter to apply,
    and the partitions' rows are the whole stream's rows that pass, ``txn_seq`` included."""
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import EqualTo, In

    from walcdc.spark_source import WalcdcDataSource

    d = fixture_dir("breadth")
    log = walcdc.open_log(d)
    whole = walcdc.read_changes(log).read_all()
    inserts = whole.filter(pc.equal(whole.column("op").cast(pa.string()), "insert"))
    name = inserts.column("table")[0].as_py()
    oid = inserts.column("class_oid")[0].as_py()
    source = WalcdcDataSource({"path": str(d), "split_bytes": str(small_split(log) * 8)})
    reader = source.reader(source.schema())
    filters = [EqualTo(("table",), name), In(("op",), ("insert", "nope"))]
    assert list(reader.pushFilters(filters)) == filters
    parts = reader.partitions()
    assert len(parts) > 1
    assert parts[0].narrow == {"tables": [oid], "ops": ["insert"]}
    got = pa.Table.from_batches([b for p in parts for b in reader.read(p)])
    want = inserts.filter(pc.equal(inserts.column("table"), name))
    # (Reading with the filters as options numbers the events among those that pass.)
    renumbered = walcdc.read_changes(log, tables=[oid], ops=["insert"]).read_all()
    assert not renumbered.column("txn_seq").equals(want.column("txn_seq"))
    # The partitions in order are the one-pass stream, in its order.
    assert got.equals(want.cast(got.schema))
    nothing = WalcdcDataSource({"path": str(d)}).reader(source.schema())
    list(nothing.pushFilters([EqualTo(("table",), "no_such_table")]))
    assert nothing.partitions() == []


def test_every_table_and_operation_narrowed_on_spark(spark):
    """Every table of a fixture (partitioned ones, altered ones, DDL rows) and every
    operation, pushed, against the whole stream filtered; both streams. (The default tier
    narrows to a seeded sample of the tables, 8 for the committed stream and 4 for CUBRID's:
    every table goes through the same pushed class-OID filter.)"""
    d = fixture_dir("breadth")
    log = walcdc.open_log(d)
    for committed_only in (True, False):
        whole = walcdc.read_changes(log, committed_only=committed_only).read_all()
        df = load(
            spark, d, split_bytes=small_split(log) * 8, committed_only=str(committed_only).lower()
        )
        tables = sorted(t for t in pc.unique(whole.column("table")).to_pylist() if t)
        sample = random.Random(7).sample(tables, 8 if committed_only else 4)
        tables = tiered(sorted(sample), tables)
        for table in tables:
            want = whole.filter(pc.equal(whole.column("table"), table))
            same(want, df.where(f"table = '{table}'"))
        ops = pc.unique(whole.column("op").cast(pa.string())).to_pylist()
        for op in ops:
            want = whole.filter(pc.equal(whole.column("op").cast(pa.string()), op))
            same(want, df.where(f"op = '{op}'"))


@pytest.mark.parametrize("name,fraction", [("p4k", 0.3), ("crash", 0.7)])
def test_a_cursor_option_reads_the_rest(spark, name, fraction):
    """``option("cursor", …)``: the rows after an earlier local run, exactly."""
    d = fixture_dir(name)
    log = walcdc.open_log(d)
    lsas = log.records().read_all().column("lsa")
    cut = lsas[int(len(lsas) * fraction)].as_py()
    head = walcdc.read_changes(log, end=cut)
    head.read_all()
    rest = walcdc.read_changes(log, cursor=head.cursor).read_all()
    df = load(spark, d, cursor=head.cursor.to_json(), split_bytes=small_split(log) * 4)
    same(rest, df)


def test_a_plan_that_does_not_fit_is_refused():
    """A plan from elsewhere, for the other stream or another database: InvalidArgumentError
    where the read is planned, not rows of the wrong log."""
    pytest.importorskip("pyspark")
    from walcdc.spark_source import WalcdcDataSource, _local_plan

    d = fixture_dir("breadth")
    log = walcdc.open_log(d)
    engine = _local_plan(log, {"committed_only": "false", "split_bytes": str(1 << 20)})
    other = dict(_local_plan(log, {"split_bytes": str(1 << 20)}), db_creation=1)
    for plan in ({"walcdc_plan": 0}, engine, other):
        source = WalcdcDataSource({"path": str(d), "plan": json.dumps(plan)})
        with pytest.raises(walcdc.InvalidArgumentError):
            source.reader(source.schema()).partitions()


def test_a_window_with_no_supplemental_record(spark):
    """A log written without supplemental logging is the same error as locally, planned by
    Spark or where the read is planned; a window of a log written with it that holds no
    supplemental record gives what the local stream gives (its timer rows)."""
    from walcdc.spark import source_plan

    d = fixture_dir("nosupp")
    with pytest.raises(walcdc.NoSupplementalLogError):
        source_plan(spark, d)
    from walcdc.spark_source import WalcdcDataSource

    source = WalcdcDataSource({"path": str(d)})
    with pytest.raises(walcdc.NoSupplementalLogError):  # (Spark wraps what its planner raises)
        source.reader(source.schema()).partitions()
    d = fixture_dir("breadth")
    records = walcdc.open_log(d).records(columns=["lsa", "supplement_type"]).read_all()
    kinds = records.column("supplement_type")
    end = records.column("lsa")[pc.index(pc.is_valid(kinds), True).as_py()].as_py()
    ops = "insert,update,delete,ddl,commit,abort,timer"
    want = walcdc.read_changes(d, end=end, ops=ops.split(",")).read_all()
    from walcdc.lsa import format_lsa

    same(want, load(spark, d, end=format_lsa(end), ops=ops))
    same(want, load(spark, d, plan=source_plan(spark, d, end=end), ops=ops))
