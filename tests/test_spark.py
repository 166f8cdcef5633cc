"""walcdc.spark on a real local[2] Spark session: the DataFrames equal the local streams,
every column of every row, over every fixture, with the default split and with ranges of a
few pages."""

from __future__ import annotations

import contextlib
import os
import warnings

import pyarrow as pa
import pytest

import walcdc
from conftest import copy_needed_volumes, fixture_dir

FIXTURES = ["p4k", "p16k", "crash", "breadth", "nosupp", "v11_2"]


def small_split(log) -> int:
    """Ranges far smaller than the largest transactions: a few pages, at most ~400 ranges per
    fixture (more only adds Spark tasks, each with its fixed cost, not other cases)."""
    page = log.header()["page_size"]
    pages = sum(os.path.getsize(v["path"]) for v in log.header()["volumes"]) // page
    return max(3, pages // 400) * page


def spans_ranges(rows: pa.Table, split_bytes: int) -> bool:
    """Whether some committed transaction's events lie further apart than a range is long."""
    if rows.num_rows == 0 or rows.column("commit_lsa").null_count == rows.num_rows:
        return False
    t = rows.group_by("commit_lsa").aggregate([("lsa", "min")])
    return max(c - lo for c, lo in zip(t["commit_lsa"].to_pylist(), t["lsa_min"].to_pylist())) > (
        split_bytes
    )


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


# --- read_changes -------------------------------------------------------------------------

CHANGE_FIXTURES = FIXTURES + ["tde"]
ORDER = [("commit_lsa", "ascending"), ("txn_seq", "ascending"), ("lsa", "ascending")]


@contextlib.contextmanager
def catalog_reduced(spark, where: str):
    """Reads in the block reduce their catalog ``where`` (``spark.walcdc.catalog``); each
    reduction is counted in the list given."""
    from walcdc.spark import plan

    jobs = []
    job = plan.reduced_on_spark

    def counted(*args, **kwargs):
        jobs.append(args)
        return job(*args, **kwargs)

    spark.conf.set(plan.CATALOG_SETTING, where)
    plan.reduced_on_spark = counted
    try:
        yield jobs
    finally:
        plan.reduced_on_spark = job
        spark.conf.unset(plan.CATALOG_SETTING)


def assert_same_changes(spark, name, split_pages=None, **kw) -> pa.Table:
    """``walcdc.spark.read_changes`` equals ``walcdc.read_changes`` on the fixture, every row
    and column (sorted by commit LSA and position in the transaction). Returns the rows.
    ``split_pages``: ranges of that many pages, ``"small"`` for :func:`small_split`."""
    from walcdc.spark import read_changes

    d = fixture_dir(name)
    log = walcdc.open_log(d)
    if split_pages == "small":
        split = {"split_bytes": small_split(log)}
    elif split_pages is None:
        split = {}
    else:
        split = {"split_bytes": split_pages * log.header()["page_size"]}
    # What the walk skipped is said alike: the same warnings, word for word.
    with warnings.catch_warnings(record=True) as local_said:
        warnings.simplefilter("always")
        want = walcdc.read_changes(log, **kw).read_all()
    # Small ranges reduce the catalog in a Spark job, the default ones in this process (a
    # local session's default): both are compared on every fixture.
    where = "spark" if split_pages is not None else "auto"
    with warnings.catch_warnings(record=True) as spark_said, catalog_reduced(spark, where) as jobs:
        warnings.simplefilter("always")
        df = read_changes(spark, d, **split, **kw)
    assert len(jobs) <= (where == "spark")  # none when kept from an earlier read
    assert _walk_warnings(spark_said) == _walk_warnings(local_said)
    if name == "tde" and kw.get("on_encrypted") == "skip":
        assert _walk_warnings(local_said), "tde's encrypted pages are skipped and said"
    want, got = local_as_spark(want, df)
    assert got.num_rows == want.num_rows
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))
    return want


def test_where_the_catalog_is_reduced(spark):
    """A local session reduces the catalog in the driver's process by default (no job), a
    Spark job when told, and refuses other words."""
    from walcdc.spark import plan, read_changes

    log = walcdc.open_log(fixture_dir("p4k"))
    split = {"split_bytes": 97 * log.header()["page_size"]}  # ranges no other test reads
    kept = dict(plan.CATALOGS)
    try:
        plan.CATALOGS.clear()
        with catalog_reduced(spark, "auto") as jobs:
            here = read_changes(spark, log, **split).toArrow()
        assert jobs == []
        assert plan.reducing_threads_here(spark) == 2  # local[2]
        plan.CATALOGS.clear()
        with catalog_reduced(spark, "spark") as jobs:
            there = read_changes(spark, log, **split).toArrow()
        assert len(jobs) == 1
        assert here.sort_by(ORDER).equals(there.sort_by(ORDER))
        with catalog_reduced(spark, "driver"):
            assert plan.reducing_threads_here(spark) == 2
        with catalog_reduced(spark, "nowhere"), pytest.raises(walcdc.InvalidArgumentError):
            read_changes(spark, log, **split)
    finally:
        plan.CATALOGS.clear()
        plan.CATALOGS.update(kept)


def _walk_warnings(caught) -> list:
    kinds = (
        walcdc.EncryptedPagesSkipped,
        walcdc.UnplacedRecordsSkipped,
        walcdc.RecordsBeyondEndSkipped,
    )
    return sorted(
        (type(w.message).__name__, str(w.message)) for w in caught if isinstance(w.message, kinds)
    )


@pytest.mark.parametrize("name", CHANGE_FIXTURES)
@pytest.mark.parametrize(
    "split_pages,committed_only",
    [(None, True), ("small", True), ("small", False)],
    ids=["committed", "committed-small", "engine-small"],
)
def test_read_changes_equals_the_local_stream(spark, name, split_pages, committed_only):
    # With small ranges (3 to 50 pages) large transactions (p4k's has over 10,000 events) span
    # many ranges, and most chases reach into earlier ranges. committed_only=False is CUBRID's
    # own stream (every change at its record, markers, timers).
    if name == "nosupp":
        from walcdc.spark import read_changes

        with pytest.raises(walcdc.NoSupplementalLogError):
            walcdc.read_changes(fixture_dir(name), committed_only=committed_only).read_all()
        with pytest.raises(walcdc.NoSupplementalLogError):
            read_changes(spark, fixture_dir(name), committed_only=committed_only)
        return
    rows = assert_same_changes(
        spark, name, split_pages, on_encrypted="skip", committed_only=committed_only
    )
    assert rows.num_rows > 0
    if split_pages == "small" and committed_only and name != "tde":
        assert spans_ranges(rows, small_split(walcdc.open_log(fixture_dir(name))))


def _table_and_user(name):
    rows = walcdc.read_changes(fixture_dir(name)).read_all()
    tables = [t for t in rows.column("table").to_pylist() if t]
    users = [u for u in rows.column("user").to_pylist() if u]
    return max(set(tables), key=tables.count), users[0]


@pytest.mark.parametrize(
    "options",
    [
        {"ops": "insert,update,delete,ddl,commit,abort"},
        {"ops": "delete,abort"},
        {"mode": "id"},
        {"mode": "before", "keys": "name_now"},
        {"keys": "id", "include_trigger": False},
        {"decode": False, "mode": "after"},
        "table",
        "exclude_table",
        "user",
        "window",
        {"committed_only": False, "ops": "insert,delete,commit,timer"},
        {"committed_only": False, "mode": "before", "keys": "name_now"},
        "engine_user",
        "engine_window",
    ],
    ids=lambda o: o if isinstance(o, str) else ",".join(f"{k}={v}" for k, v in o.items()),
)
@pytest.mark.parametrize("name", ["breadth", "p4k"])
def test_read_changes_options_equal_the_local_stream(spark, name, options):
    if isinstance(options, str):
        table, user = _table_and_user(name)
        engine = options.startswith("engine_")
        kind = options.removeprefix("engine_")
        if kind == "table":
            options = {"tables": table, "include_ddl": "all"}
        elif kind == "exclude_table":
            options = {"exclude_tables": table}
        elif kind == "user":
            options = {"users": [user.lower()]}
        else:
            lsas = walcdc.open_log(fixture_dir(name)).records().read_all().column("lsa")
            n = len(lsas)
            options = {"start": lsas[n // 4].as_py(), "end": lsas[3 * n // 4].as_py()}
        if engine:
            options["committed_only"] = False
    # Ranges small enough that p4k's large transaction (6,900 pages) spans dozens of them.
    assert_same_changes(spark, name, 5 if name == "breadth" else 200, **options)


def test_read_changes_users_that_match_nothing(spark):
    rows = assert_same_changes(spark, "breadth", users="nobody")
    assert rows.num_rows == 0


def test_the_readmes_spark_examples_run(spark, tmp_path):
    import re
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme[readme.index("## Spark") : readme.index("## Command line")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 4
    scope: dict = {}
    for code in blocks:
        exec(code.replace("/tmp/walcdc-changes", str(tmp_path / "changes")), scope)
    import walcdc

    back = spark.read.parquet(str(tmp_path / "changes")).count()
    assert back == walcdc.read_changes(walcdc.samples.sample_path()).read_all().num_rows > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_read_changes_on_a_generated_multi_archive_log(spark, tmp_path, seed):
    """A written workload (the property tests' generator: interleaved transactions that commit,
    abort or stay open, savepoint rollbacks, failed statements, trid reuse, a 200-insert
    transaction, 2-page archives) read with one-page ranges: every transaction spans ranges and
    volumes. Spark's rows equal the local stream's, which equal the writer's model."""
    import random

    from test_change_properties import model_rows, rows, write

    from walcdc.spark import read_changes

    rnd = random.Random(seed)
    ops = ["insert", "insert", "update", "delete", "savepoint", "rollback", "failed"]
    outcomes = ["commit", "commit", "commit", "abort", "open"]
    txns = [
        ([rnd.choice(ops) for _ in range(rnd.randint(1, 10))], rnd.choice(outcomes))
        for _ in range(12)
    ]
    txns.append((["insert"] * 200, "commit"))
    schedule = [rnd.randint(0, 1000) for _ in range(400)]
    bodies = [rnd.randbytes(rnd.choice([40, 900, 2500])) for _ in range(8)]
    committed, _, _ = write((4096, 8, 2, txns, schedule, bodies), tmp_path)
    log = walcdc.open_log(tmp_path)
    assert len(log.header()["volumes"]) > 3
    want = walcdc.read_changes(log)
    assert rows(walcdc.read_changes(log)) == model_rows(committed)
    want, got = local_as_spark(want.read_all(), read_changes(spark, tmp_path, split_bytes=4096))
    assert got.num_rows == want.num_rows > 200
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))


@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
@pytest.mark.parametrize("name,fraction", [("p4k", 0.3), ("breadth", 0.5), ("crash", 0.7)])
def test_two_incremental_runs_give_exactly_one_runs_rows(spark, name, fraction, committed_only):
    """A daily job: the first run reads to a cut, ``end_cursor`` says where it ended (equal to
    the local stream's cursor there), the second run resumes from it. Together they give the
    rows of one run over the whole log: none lost, none twice (p4k's cut lies inside its
    10,000-event transaction)."""
    from walcdc.spark import end_cursor, read_changes

    d = fixture_dir(name)
    log = walcdc.open_log(d)
    lsas = log.records().read_all().column("lsa")
    cut = lsas[int(len(lsas) * fraction)].as_py()
    kw = {"committed_only": committed_only, "split_bytes": small_split(log)}
    local = walcdc.read_changes(log, end=cut, committed_only=committed_only)
    local.read_all()
    cursor = end_cursor(spark, d, end=cut, **kw)
    assert cursor == local.cursor
    first = read_changes(spark, d, end=cut, **kw)
    second = read_changes(spark, d, cursor=cursor, **kw)
    whole = walcdc.read_changes(log, committed_only=committed_only).read_all()
    want, got = local_as_spark(whole, first.unionByName(second))
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))
    rest = walcdc.read_changes(log, cursor=cursor, committed_only=committed_only)
    rest.read_all()
    assert end_cursor(spark, d, cursor=cursor, **kw) == rest.cursor


def test_the_next_run_reads_only_the_new_archives(spark, tmp_path):
    """``end_cursor`` carries the catalog at its restart point: the next run starts its facts
    there, needs no archive before it (gone here), and gives the local stream's rows."""
    from walcdc.spark import end_cursor, read_changes

    d = fixture_dir("p4k")
    log = walcdc.open_log(d)
    lsas = log.records().read_all().column("lsa")
    split = small_split(log)
    cursor = end_cursor(spark, d, end=lsas[int(len(lsas) * 0.6)].as_py(), split_bytes=split)
    assert cursor.catalog is not None
    assert copy_needed_volumes(log, cursor, tmp_path) > 0
    want = walcdc.read_changes(log, cursor=cursor).read_all()
    want, got = local_as_spark(
        want, read_changes(spark, str(tmp_path), cursor=cursor, split_bytes=split)
    )
    assert got.num_rows == want.num_rows > 1000
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))


@pytest.mark.parametrize("name,fraction", [("breadth", 0.4), ("breadth", 0.45), ("v11_2", 0.07)])
def test_a_local_cursor_with_a_checkpoint_inside_ddl_resumes_on_spark(
    spark, monkeypatch, name, fraction
):
    """A local cursor's catalog checkpoint may lie where a DDL transaction is open (its class
    changes staged): the Spark run seeded with it equals the local one, and so do the cursors
    where they end."""
    import walcdc._native as native
    import walcdc.changes
    from walcdc.spark import end_cursor, read_changes

    monkeypatch.setattr(walcdc.changes, "_CHECKPOINT_EVERY", 4096)
    d = fixture_dir(name)
    log = walcdc.open_log(d)
    lsas = log.records().read_all().column("lsa")
    head = walcdc.read_changes(log, end=lsas[int(len(lsas) * fraction)].as_py())
    head.read_all()
    cursor = head.cursor
    assert native.checkpoint_info(cursor.catalog)[1]  # transactions with class work staged
    rest = walcdc.read_changes(log, cursor=cursor)
    want, got = local_as_spark(
        rest.read_all(), read_changes(spark, d, cursor=cursor, split_bytes=small_split(log))
    )
    assert got.num_rows == want.num_rows > 0
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))
    ended = end_cursor(spark, d, cursor=cursor, split_bytes=small_split(log))
    assert ended == rest.cursor
    # The checkpoint the Spark run made resumes the local stream exactly as the local one.
    again = walcdc.read_changes(log, cursor=ended).read_all()
    assert again.equals(walcdc.read_changes(log, cursor=rest.cursor).read_all())


def test_a_local_cursor_inside_a_transaction_resumes_on_spark(spark):
    # The local stream stopped between two batches inside p4k's large transaction: its cursor
    # has a txn_offset, which the Spark read honours exactly as the local one.
    from walcdc.spark import read_changes

    d = fixture_dir("p4k")
    stream = walcdc.read_changes(d, batch_size=1000)
    for _ in range(30):
        stream.read_next_batch()
    cursor = stream.cursor
    assert cursor.txn_offset > 0
    want = walcdc.read_changes(d, cursor=cursor).read_all()
    want, got = local_as_spark(want, read_changes(spark, d, cursor=cursor))
    assert got.num_rows == want.num_rows > 0
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))


def _tables(name):
    return sorted(s["name"] for s in walcdc.open_log(fixture_dir(name)).schemas())


def _covering_tables(name):
    """Tables that between them have every column type of the fixture (in any of their
    representations), and the table with the most changes."""
    log = walcdc.open_log(fixture_dir(name))
    types = {
        s["name"]: {c["type"] for r in s["representations"] for c in r["columns"]}
        for s in log.schemas()
    }
    chosen, missing = [], set().union(*types.values())
    while missing:
        best = max(sorted(types), key=lambda t: len(types[t] & missing))
        chosen.append(best)
        missing -= types[best]
    rows = walcdc.read_changes(log).read_all().select(["table", "op", "ddl_type"]).to_pylist()
    tables = [r["table"] for r in rows if r["table"]]
    chosen.append(max(sorted(set(tables)), key=tables.count))
    # Tables altered in the log: rows before and after the ALTER (older representations).
    chosen += [r["table"] for r in rows if r["op"] == "ddl" and r["ddl_type"] == 1 and r["table"]]
    return sorted(set(chosen))


@pytest.mark.parametrize("name", ["breadth", "v11_2", "p4k"])
def test_read_table_changes_equals_the_local_typed_stream(spark, name):
    """Typed structs equal, value for value, on the tables that between them hold every column
    type of the fixture, the busiest table, and every altered table (rows of older
    representations). (Spark's typed form is the local converter applied to batches of
    read_changes, which is compared in full on every fixture above.)"""
    from walcdc.spark import read_table_changes

    d = fixture_dir(name)
    log = walcdc.open_log(d)
    split = {"split_bytes": (20 if name == "breadth" else 200) * log.header()["page_size"]}
    compared = 0
    for table in _covering_tables(name):
        want = walcdc.read_table_changes(log, table).read_all()
        df = read_table_changes(spark, d, table, **split)
        want, got = local_as_spark(want, df)
        assert got.num_rows == want.num_rows, table
        assert got.sort_by(ORDER).equals(want.sort_by(ORDER)), table
        compared += want.num_rows
    assert compared > 0


def test_read_table_changes_arguments(spark):
    from walcdc.spark import read_table_changes

    d = fixture_dir("breadth")
    with pytest.raises(walcdc.InvalidArgumentError, match="tables"):
        read_table_changes(spark, d, _tables("breadth")[0], tables="x")
    with pytest.raises(walcdc.InvalidArgumentError, match="no_such_table"):
        read_table_changes(spark, d, "no_such_table")


def test_a_transaction_cut_short_by_a_restart_is_said_on_spark(spark, tmp_path):
    # p4k with a record inside the huge transaction claiming to start a new one under its
    # trid (../shared/hostile/p4k_null_prev_tranlsa.json): the same rows as locally, and the
    # same warning, with its count, from the catalog job's ranges (one range, and many).
    from test_bad_input import _hostile_copy

    from walcdc.spark import read_changes

    _hostile_copy(tmp_path, "p4k_null_prev_tranlsa.json")
    local = walcdc.read_changes(tmp_path)
    with pytest.warns(walcdc.UnfinishedTransactionDropped):
        want = local.read_all()
    n = local.stats["restarted_transactions"]
    assert n == 1
    log = walcdc.open_log(tmp_path)
    for split in ({}, {"split_bytes": small_split(log) * 8}):
        with pytest.warns(walcdc.UnfinishedTransactionDropped, match=f"^{n} transaction"):
            df = read_changes(spark, tmp_path, **split)
        expected, got = local_as_spark(want, df)
        assert got.sort_by(ORDER).equals(expected.sort_by(ORDER)), split


@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
def test_transactions_begun_in_a_deleted_archive_are_left_out_on_spark(
    spark, tmp_path, committed_only
):
    # p4k without its oldest archive: the huge transaction began there. Spark leaves out the
    # partial transactions as the local stream does by default, rows and columns alike.

    from walcdc.spark import read_changes

    src = fixture_dir("p4k")
    for f in ("p4k_lgar001", "p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, tmp_path / f)
    local = walcdc.read_changes(tmp_path, committed_only=committed_only)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = local.read_all()
    assert local.stats["partial_transactions"] > 0
    log = walcdc.open_log(tmp_path)
    # And says so, as the local stream does: the same number of transactions, found from the
    # catalog job's ranges.
    n = local.stats["partial_transactions"]
    with pytest.warns(walcdc.PartialTransactionsSkipped, match=f"^{n} transaction"):
        df = read_changes(
            spark, tmp_path, committed_only=committed_only, split_bytes=small_split(log) * 8
        )
    want, got = local_as_spark(want, df)
    assert got.num_rows == want.num_rows
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))
    with pytest.raises(walcdc.InvalidArgumentError, match="on_partial"):
        read_changes(spark, tmp_path, on_partial="emit")
