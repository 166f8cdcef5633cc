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
        "ops": dict(ops=["delete", "commit", "abort"]),
        "mode": dict(mode="before"),
        "keys": dict(keys="name_now"),
        "decode": dict(decode=False),
        # Transactions spill to disk, before and after they are read back along their chains.
        "spill": dict(memory_limit=4096),
    }


@pytest.mark.parametrize("case", ["start", "tables", "ops", "mode", "keys", "decode", "spill"])
def test_options_read_by_range_equal_the_local_stream(options_log, case):
    log, versions, all_events = options_log
    options = _option_cases(all_events)[case]
    want = walcdc.read_changes(log, **options).read_all()
    assert want.num_rows
    for pages in (7, 1 << 20):
        got = read_ranges(log, pages, versions, **options)
        assert_same_rows(got, want, f"{case}, ranges of {pages} pages")


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
        stream = walcdc.read_changes(log, batch_size=7)
        seen = 0
        for batch in stream:
            seen += batch.num_rows
            if seen >= cut:
                break
        cursor = stream.cursor
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
