"""Change streams read with several threads give exactly what one thread gives: every
fixture's events (every column), in both streams, with 2, 3 and 8 threads over small ranges;
the cursor, the pending transactions, the counters, what the walk skipped and the warnings at
the end; windows, cursors and reader states to go on from; the read options, the envelope,
typed changes of one table, and logs whose oldest archive is gone."""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings

import pyarrow as pa
import pytest

import walcdc
from conftest import ALL_FIXTURES, fixture_dir

#: Counters that say how a stream was read rather than what it read (see walcdc.threaded).
_HOW = ("random_reads", "peak_buffered_bytes")
#: Threads and range sizes (pages): ranges far smaller than the fixtures' transactions.
_SPLITS = ((2, 64), (3, 32), (8, 16))


def _read(source, **kw):
    """A stream read to its end, and all it says there."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        stream = walcdc.read_changes(source, **kw)
        table = stream.read_all()
    return {
        "table": table,
        "cursor": stream.cursor,
        "pending": stream.pending,
        "stats": {k: v for k, v in stream.stats.items() if k not in _HOW},
        "walk": (stream.skipped, stream.unplaced, stream.beyond_end),
        "said": sorted((type(w.message).__name__, str(w.message)) for w in said),
    }, stream


def _assert_same(got: dict, want: dict, what: str) -> None:
    assert got["table"].schema == want["table"].schema, what
    assert got["table"].num_rows == want["table"].num_rows, what
    assert got["table"].equals(want["table"]), what
    for k in ("cursor", "pending", "stats", "walk", "said"):
        assert got[k] == want[k], f"{what}: {k}"


def _page(log) -> int:
    return log.header()["page_size"]


@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
@pytest.mark.parametrize("name", [n for n in ALL_FIXTURES if n != "nosupp"])
def test_threads_read_every_fixture_as_one_thread_does(name, committed_only):
    log = walcdc.open_log(fixture_dir(name))
    kw = dict(committed_only=committed_only, on_encrypted="skip")
    want, _ = _read(log, **kw)
    assert want["table"].num_rows > 0
    for threads, pages in _SPLITS:
        got, _ = _read(log, threads=threads, split_bytes=pages * _page(log), **kw)
        _assert_same(got, want, f"{name}: {threads} threads, ranges of {pages} pages")


def test_a_long_transaction_is_read_back_once_per_range_it_crosses():
    """CUBRID's stream learns a transaction begun before a range (its user) by reading it
    back; what one range learned, the next reuses (the chain memo), so tiny ranges over the
    fixture's huge transaction (50,000 inserts and 2,000 updates across two archives) read
    back each of its records about once in all, not all of it again in every range (without
    the memo: 330 times as much)."""
    log = walcdc.open_log(fixture_dir("p4k"))
    page = _page(log)
    whole = _read(log, committed_only=False, threads=2, split_bytes=1 << 40)[1].stats
    tiny = _read(log, committed_only=False, threads=3, split_bytes=8 * page)[1].stats
    assert whole["events"] == tiny["events"]
    # One range reads back nothing; what tiny ranges read beyond its chases is the read-back.
    read_back = tiny["random_reads"] - whole["random_reads"]
    assert read_back <= whole["records"], (tiny, whole)


def test_a_log_without_supplemental_records_is_an_error_with_threads():
    log = walcdc.open_log(fixture_dir("nosupp"))
    with pytest.raises(walcdc.NoSupplementalLogError):
        walcdc.read_changes(log, threads=2, split_bytes=16 * _page(log)).read_all()


@pytest.mark.parametrize("name", ["p4k", "crash"])
def test_windows_and_cursors_as_one_thread(name):
    """A window ending among open transactions: the same events, cursor and pending; resumed
    from the threads' cursor (its catalog checkpoint included) with threads or without, the
    rest of the log as one thread resumed from its own cursor reads it."""
    log = walcdc.open_log(fixture_dir(name))
    split = 32 * _page(log)
    lsas = log.records(columns=["lsa"]).read_all().column("lsa").to_pylist()
    start, end = lsas[len(lsas) // 5], lsas[len(lsas) // 2]
    for committed_only in (True, False):
        kw = dict(committed_only=committed_only)
        want, _ = _read(log, start=start, end=end, **kw)
        got, _ = _read(log, start=start, end=end, threads=3, split_bytes=split, **kw)
        _assert_same(got, want, f"{name} [{start}, {end})")
        assert got["pending"], "the window ends among open transactions"
        rest, _ = _read(log, cursor=want["cursor"], **kw)
        for threads in (1, 2):
            after, _ = _read(log, cursor=got["cursor"], threads=threads, split_bytes=split, **kw)
            _assert_same(after, rest, f"{name} after {end}: {threads} threads")


def test_a_cursor_inside_a_transaction_as_one_thread():
    """A stream stopped inside a large transaction resumes with threads where one thread
    does (the transaction's first events skipped)."""
    log = walcdc.open_log(fixture_dir("p4k"))
    stream = walcdc.read_changes(log, batch_size=1000)
    for _ in range(5):
        stream.read_next_batch()
    cursor = stream.cursor
    assert cursor.txn_offset > 0
    want, _ = _read(log, cursor=cursor)
    got, _ = _read(log, cursor=cursor, threads=3, split_bytes=16 * _page(log))
    _assert_same(got, want, "resumed inside a transaction")


def test_the_state_at_the_end_goes_on_as_one_threads():
    log = walcdc.open_log(fixture_dir("p4k"))
    lsas = log.records(columns=["lsa"]).read_all().column("lsa").to_pylist()
    end = lsas[len(lsas) // 2]
    one = walcdc.read_changes(log, end=end)
    one.read_all()
    many = walcdc.read_changes(log, end=end, threads=2, split_bytes=16 * _page(log))
    many.read_all()
    want, _ = _read(log, state=one.state())
    got, _ = _read(log, state=many.state())
    _assert_same(got, want, "from the state")


@pytest.mark.parametrize(
    "options",
    [
        dict(tables="t_chg"),
        dict(exclude_tables="t_chg", ops="insert,delete"),
        dict(mode="id", decode=False),
        dict(mode="before", keys="name_now"),
        dict(keys="id", include_ddl="all"),
        dict(committed_only=False, ops="update,commit,abort,timer"),
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_read_options_as_one_thread(options):
    log = walcdc.open_log(fixture_dir("breadth"))
    want, _ = _read(log, **options)
    assert want["table"].num_rows > 0
    got, _ = _read(log, threads=3, split_bytes=4 * _page(log), **options)
    _assert_same(got, want, str(options))


def test_the_envelope_with_threads():
    log = walcdc.open_log(fixture_dir("breadth"))
    kw = dict(envelope="debezium", envelope_options={"transactions": True})
    # Debezium's top-level ts_* say when the connector handled the event: not compared.
    when = ("ts_ms", "ts_us", "ts_ns")
    want = walcdc.read_changes(log, **kw).read_all().drop_columns(list(when))
    got = walcdc.read_changes(log, threads=2, split_bytes=4 * _page(log), **kw).read_all()
    assert want.num_rows > 0 and got.drop_columns(list(when)).equals(want)


def test_typed_changes_of_a_table_with_threads():
    log = walcdc.open_log(fixture_dir("p4k"))
    want = walcdc.read_table_changes(log, "t_big")
    want_rows = want.read_all()
    got = walcdc.read_table_changes(log, "t_big", threads=3, split_bytes=16 * _page(log))
    got_rows = got.read_all()
    assert want_rows.num_rows > 0 and got_rows.equals(want_rows)
    assert got.cursor == want.cursor and got.pending == want.pending


def _by_table(stream):
    """Each (kind, class, table, repid, columns)'s rows (the parts come in another order
    when the stream is cut elsewhere)."""
    parts = {}
    for b in stream:
        key = (b.kind, b.class_oid, b.table, b.repid, str(b.batch.schema))
        parts.setdefault(key, []).append(b.batch)
    return {k: pa.Table.from_batches(v) for k, v in parts.items()}


@pytest.mark.parametrize("name", ["p4k", "breadth"])
def test_typed_changes_by_table_with_threads(name):
    """Every table's typed rows, representation by representation, as one thread gives them
    (each range's tables are cut into batches of their own); the same end state."""
    log = walcdc.open_log(fixture_dir(name))
    one = walcdc.read_changes_by_table(log)
    want = _by_table(one)
    many = walcdc.read_changes_by_table(log, threads=3, split_bytes=32 * _page(log))
    got = _by_table(many)
    assert set(got) == set(want) and len(want) > 1
    for k in want:
        assert got[k].equals(want[k]), k
    assert many.cursor == one.cursor and many.pending == one.pending
    assert many.stats["events"] == one.stats["events"]


@pytest.mark.parametrize("on_partial", ["skip", "emit"])
@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
def test_a_log_whose_oldest_archive_is_gone(tmp_path, committed_only, on_partial):
    """Transactions begun in the deleted archive are left out or emitted marked, and counted
    and warned about, as one thread does; so are the tables whose schema is not in the log."""
    src = fixture_dir("p4k")
    for f in ("p4k_lgar001", "p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, tmp_path / f)
    log = walcdc.open_log(tmp_path)
    kw = dict(committed_only=committed_only, on_partial=on_partial)
    want, _ = _read(log, **kw)
    assert want["stats"]["partial_transactions"] > 0
    assert want["stats"]["unknown_schema_events"] > 0
    got, _ = _read(log, threads=3, split_bytes=32 * _page(log), **kw)
    _assert_same(got, want, f"{kw}")


def test_the_end_state_is_known_at_the_end():
    log = walcdc.open_log(fixture_dir("breadth"))
    stream = walcdc.read_changes(log, threads=2, split_bytes=4 * _page(log))
    with pytest.raises(RuntimeError, match="once every batch was read"):
        _ = stream.cursor
    stream.read_all()
    one = walcdc.read_changes(log)
    one.read_all()
    assert stream.cursor == one.cursor


def test_threads_must_be_at_least_one():
    with pytest.raises(walcdc.InvalidArgumentError, match="threads"):
        walcdc.read_changes(fixture_dir("breadth"), threads=0)


def test_a_threaded_stream_left_early_stops_its_threads():
    log = walcdc.open_log(fixture_dir("p4k"))
    before = threading.active_count()
    stream = walcdc.read_changes(log, threads=2, split_bytes=16 * _page(log), batch_size=64)
    assert stream.read_next_batch().num_rows > 0
    del stream
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


def test_batches_are_arrow_record_batches():
    log = walcdc.open_log(fixture_dir("breadth"))
    stream = walcdc.read_changes(log, threads=2, split_bytes=4 * _page(log))
    for batch in stream:
        assert isinstance(batch, pa.RecordBatch)
        assert batch.schema == stream.schema
