"""A range of the plan read once (``walcdc._native.range_changes``, the task reader of
``walcdc.spark``): the transactions that commit in it, with their earlier records read back
along their chains, equal the local one-pass stream's, row for row, whatever the ranges."""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_parallel_plan import _all_inputs

import walcdc
import walcdc._native as native
from conftest import assert_same_rows, fixture_dir, tiered
from walcdc.changes import OPTION_DEFAULTS, _native_options


def _versions(log, on_encrypted: str = "raise") -> bytes:
    facts = pa.record_batch(native.range_facts(log._native, on_encrypted=on_encrypted)).to_pylist()
    return native.catalog_versions(log._native, _all_inputs(facts))[0]


def read_ranges(log, pages: int, versions: bytes, skip=None, columns=None, **options):
    """The stream read range by range (``pages`` log pages each), concatenated in range order;
    ``skip``: ``(first commit after the cursor's last, events of it emitted)``."""
    opts = {**OPTION_DEFAULTS, **options}
    native_options = log._native.change_options(**_native_options(log, **opts))
    batches = []
    for start, end in log.ranges(pages * log.header()["page_size"]):
        holds = skip is not None and (start is None or start <= skip[0])
        holds = holds and (end is None or skip[0] < end)
        reader = native.range_changes(
            log._native,
            native_options,
            versions,
            start,
            end,
            skip_events=skip[1] if holds else 0,
            columns=columns,
        )
        batches += [pa.record_batch(b) for b in reader]
    return pa.Table.from_batches(batches)


#: Every fixture with change events; 7-page ranges are smaller than many transactions. p16k
#: (p4k's workload at 16 KiB pages) is the full tier's.
FIXTURES = tiered(
    ["breadth", "p4k", "crash", "v11_2", "tde"], ["breadth", "p4k", "p16k", "crash", "v11_2", "tde"]
)


@pytest.mark.parametrize("name", FIXTURES)
def test_ranges_read_once_equal_the_local_stream(name):
    log = walcdc.open_log(fixture_dir(name))
    on_encrypted = "skip" if name == "tde" else "raise"
    want = walcdc.read_changes(log, on_encrypted=on_encrypted).read_all()
    versions = _versions(log, on_encrypted)
    # Ranges of 7 pages are smaller than many transactions; p4k takes 64 pages in the default
    # tier (its tiny ranges, and the whole log as one range, are the full tier's).
    small = [64] if name == "p4k" else [7]
    for pages in tiered(small, [3, 7, 64, 1 << 20]):
        got = read_ranges(log, pages, versions, on_encrypted=on_encrypted)
        assert_same_rows(got, want, f"{name}, ranges of {pages} pages")


@pytest.fixture(scope="module")
def options_log():
    """v11_2's log, catalog versions and stream (the default tier reads breadth's instead:
    the same option paths over 144 events instead of 29,688)."""
    log = walcdc.open_log(fixture_dir(tiered("breadth", "v11_2")))
    return log, _versions(log), walcdc.read_changes(log).read_all()


def _option_cases(all_events):
    lsas = all_events.column("lsa").to_pylist()
    tables = sorted(set(all_events.column("table").to_pylist()) - {None})
    return {
        "start": dict(start=lsas[len(lsas) // 2]),
        "tables": dict(tables=tables[:2]),
        "users": dict(users=sorted(set(all_events.column("user").to_pylist()) - {None})[:1]),
        "ops": dict(ops=["delete", "commit", "abort"]),
        "mode": dict(mode="before"),
        "keys": dict(keys="name_now"),
        "decode": dict(decode=False),
        # Transactions spill to disk, before and after they are read back along their chains.
        "spill": dict(memory_limit=4096),
    }


@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
@pytest.mark.parametrize(
    "case", ["start", "tables", "users", "ops", "mode", "keys", "decode", "spill"]
)
def test_options_read_by_range_equal_the_local_stream(options_log, case, committed_only):
    log, versions, all_events = options_log
    options = {**_option_cases(all_events)[case], "committed_only": committed_only}
    want = walcdc.read_changes(log, **options).read_all()
    assert want.num_rows
    for pages in (7, 1 << 20):
        got = read_ranges(log, pages, versions, **options)
        assert_same_rows(got, want, f"{case}, ranges of {pages} pages")


def _cursor_after(log, rows: int, **options):
    """The cursor of a local stream stopped (between batches of 7) once it gave ``rows``."""
    stream = walcdc.read_changes(log, batch_size=7, **options)
    seen = 0
    for batch in stream:
        seen += batch.num_rows
        if seen >= rows:
            break
    return stream.cursor


@pytest.mark.parametrize("name", tiered(["breadth"], ["breadth", "v11_2"]))
def test_a_cursor_in_the_middle_of_a_transaction_resumes_exactly(name):
    """The range holding the first commit after the cursor's last commit skips what the
    earlier run emitted of it; every range skips the commits before."""
    log = walcdc.open_log(fixture_dir(name))
    versions = _versions(log)
    all_events = walcdc.read_changes(log).read_all()
    commits = all_events.column("commit_lsa").to_pylist()
    offsets = set()
    for cut in (len(commits) // 3, 2 * len(commits) // 3 - 1):
        cursor = _cursor_after(log, cut)
        offsets.add(cursor.txn_offset > 0)
        want = walcdc.read_changes(log, cursor=cursor).read_all()
        last = cursor.last_commit_lsa
        first = min(c for c in commits if c is not None and (last is None or c > last))
        for pages in (7, 1 << 20):
            got = read_ranges(log, pages, versions, skip=(first, cursor.txn_offset), cursor=cursor)
            assert_same_rows(got, want, f"{name}, cut {cut}, ranges of {pages} pages")
    assert True in offsets  # at least one cut lies inside a transaction


def test_a_tables_typed_changes_read_by_range_equal_the_local_ones(options_log):
    log, versions, all_events = options_log
    counts = (
        all_events.group_by("table")
        .aggregate([("lsa", "count")])
        .sort_by([("lsa_count", "descending")])
    )
    table = counts.column("table")[0].as_py()
    want = walcdc.read_table_changes(log, table).read_all()
    from walcdc.table_changes import _table_columns

    class_oid, columns = _table_columns(log, table, {})
    for pages in (7, 1 << 20):
        got = read_ranges(log, pages, versions, columns=columns, tables=[class_oid], keys="id")
        assert_same_rows(got, want, f"{table}, ranges of {pages} pages")


def _pages_of(log, versions, spans, committed_only=True):
    """Reads each ``(start, end)`` span once with the range reader, counting the pages each
    read fetches. Checks on the way that a read reaches before its span only by random access
    (a transaction's chain read back, an image chased), never by a walk, and past its end only
    for the record that crosses it. Returns the pages fetched in all."""
    opts = {**OPTION_DEFAULTS, "committed_only": committed_only}
    options = log._native.change_options(**_native_options(log, **opts))
    total = 0
    for start, end in spans:
        log._native.watch_below(1 << 40)  # every page fetched from here on
        reads = log._native.random_reads()
        for _ in native.range_changes(log._native, options, versions, start, end):
            pass
        pages = log._native.watched_pages()
        reads = log._native.random_reads() - reads
        first = start >> 16 if start is not None else -1
        before = [p for p in pages if p < first]
        assert len(before) <= reads, (start, end, len(before), reads)
        if end is not None:
            assert [p for p in pages if p > end >> 16] <= [(end >> 16) + 1], (start, end)
        total += len(pages)
    return total


def _task_spans(ranges, tasks: int):
    """The ranges as ``tasks`` Spark tasks get them (consecutive slices), each task's joined
    into one span (``walcdc.spark.tasks.spans``)."""
    from walcdc.spark.tasks import spans

    n = len(ranges)
    return [
        span for i in range(tasks) for span in spans(ranges[i * n // tasks : (i + 1) * n // tasks])
    ]


@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
@pytest.mark.parametrize("name", tiered(["breadth", "v11_2"], ["breadth", "v11_2", "p4k"]))
def test_tasks_read_their_ranges_once_and_ten_times_more_ranges_hardly_more(name, committed_only):
    """Each range's read reaches before it only by random access (the chains of transactions
    that commit in it, or in CUBRID's stream that change or end in it; chased images), never by
    a walk; a task reads its consecutive ranges as one span, so ten times more ranges over the
    same tasks add only what moves with the task edges. Measured, pages fetched (one pass; four
    tasks over ranges of used/40 pages; over ranges ten times smaller), committed stream:
    breadth 863, 1,164, 1,158; v11_2 5,239, 6,968, 6,982; p4k 15,424, 22,244, 22,257; CUBRID's
    stream: breadth the same; v11_2 5,239, 7,401, 7,415; p4k 15,424, 25,228, 25,230. Read one
    range per task instead, ten times more ranges cost 13-35% more (committed, p4k 8 -> 76
    ranges: 20,779 -> 23,624 pages): a transaction crossing an edge is read again from where
    it began."""
    log = walcdc.open_log(fixture_dir(name))
    versions = _versions(log)
    one_pass = _pages_of(log, versions, [(None, None)], committed_only)
    used = one_pass  # pages holding records: the one-pass read's
    coarse_pages = max(3, used // 40)
    coarse = log.ranges(coarse_pages * log.header()["page_size"])
    fine = log.ranges(coarse_pages // 10 * log.header()["page_size"])
    assert len(fine) >= 8 * len(coarse)
    # Every range read on its own: no walk before any of them.
    _pages_of(log, versions, fine, committed_only)
    tasks = 4
    by_coarse = _pages_of(log, versions, _task_spans(coarse, tasks), committed_only)
    by_fine = _pages_of(log, versions, _task_spans(fine, tasks), committed_only)
    assert by_fine <= 1.05 * by_coarse, (one_pass, by_coarse, by_fine)


@pytest.mark.parametrize("name", FIXTURES)
def test_cubrids_own_stream_read_by_range_equals_the_local_one(name):
    """CUBRID's stream emits each change where it lies: a range emits its own, learning the
    user of a transaction begun before it from that transaction's chain (its first TRAN_USER),
    and decodes with the transaction's own DDL from the catalog versions."""
    log = walcdc.open_log(fixture_dir(name))
    on_encrypted = "skip" if name == "tde" else "raise"
    want = walcdc.read_changes(log, committed_only=False, on_encrypted=on_encrypted).read_all()
    assert want.num_rows
    versions = _versions(log, on_encrypted)
    small = [64] if name == "p4k" else [7]
    for pages in tiered(small, [3, 7, 64, 1 << 20]):
        got = read_ranges(log, pages, versions, committed_only=False, on_encrypted=on_encrypted)
        assert_same_rows(got, want, f"{name}, ranges of {pages} pages")


@pytest.mark.parametrize("name", tiered(["breadth"], ["breadth", "v11_2"]))
def test_cubrids_own_stream_resumed_by_range_from_a_cursor(name):
    """Every range drops what the earlier run emitted (the events and markers before its
    position) and learns the users of transactions open at the restart point."""
    log = walcdc.open_log(fixture_dir(name))
    versions = _versions(log)
    total = walcdc.read_changes(log, committed_only=False).read_all().num_rows
    for cut in (total // 3, 2 * total // 3 - 1):
        cursor = _cursor_after(log, cut, committed_only=False)
        want = walcdc.read_changes(log, committed_only=False, cursor=cursor).read_all()
        assert want.num_rows
        for pages in (7, 1 << 20):
            got = read_ranges(log, pages, versions, committed_only=False, cursor=cursor)
            assert_same_rows(got, want, f"{name}, cut {cut}, ranges of {pages} pages")
