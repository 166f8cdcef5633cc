"""What the parallel plan (walcdc.spark) costs, measured with the log set's own counters: a
range's task reads its own pages and reaches earlier ones only by random access (chases); ten
times more ranges read the log hardly more; the catalog needs only the writes of the
transactions that changed class records."""

from __future__ import annotations

import pyarrow as pa
import pytest

import walcdc
import walcdc._native as native
from conftest import fixture_dir, tiered
from walcdc.changes import OPTION_DEFAULTS, _native_options

DEFAULTS = OPTION_DEFAULTS


def _versions(log) -> bytes:
    """Catalog versions from every class-tracker write and end record (a superset of what the
    Spark plan collects; the catalog is the same)."""
    facts = pa.record_batch(native.range_facts(log._native)).to_pylist()
    return native.catalog_versions(log._native, _all_inputs(facts))[0]


def _verdicts(lsas) -> pa.RecordBatch:
    """Verdicts emitting the events at ``lsas`` (as committed at their own LSA)."""
    n = len(lsas)
    return pa.record_batch(
        {
            "lsa": pa.array(lsas, pa.int64()),
            "user": pa.array(["DBA"] * n),
            "commit_lsa": pa.array(lsas, pa.int64()),
            "commit_time": pa.array([0] * n, pa.int64()),
            "txn_seq": pa.array(range(n), pa.int64()),
            "end_lsa": pa.array([None] * n, pa.int64()),
        }
    )


def _run_tasks(log, pages_per_range: int):
    """Runs each range's three task steps (facts, candidate events, the decided events read
    again with their images) as Spark would, counting the pages each fetches. Returns (pages
    fetched in all, ranges)."""
    options = log._native.change_options(**_native_options(log, **DEFAULTS))
    versions = _versions(log)
    ranges = log.ranges(pages_per_range * log.header()["page_size"])
    total = 0
    for start, end in ranges:
        log._native.watch_below(1 << 40)  # every page fetched from here on
        reads = log._native.random_reads()
        native.range_facts(log._native, start, end)
        lsas = []
        for b in native.range_events(log._native, options, versions, start, end):
            lsas += pa.record_batch(b).column("lsa").to_pylist()
        decided = native.decided_events(log._native, options, versions, _verdicts(lsas), start, end)
        assert sum(pa.record_batch(b).num_rows for b in decided) == len(lsas)
        pages = log._native.watched_pages()
        reads = log._native.random_reads() - reads
        first_page = start >> 16 if start is not None else -1
        before = [p for p in pages if p < first_page]
        # Nothing before the range but what random access (chases) reached: never a walk.
        assert len(before) <= reads, (start, end, len(before), reads)
        total += len(pages)
    return total, len(ranges)


@pytest.mark.parametrize("name,pages", [("breadth", 30), ("p4k", 300)])
def test_ten_times_more_ranges_read_the_log_hardly_more(name, pages):
    log = walcdc.open_log(fixture_dir(name))
    coarse, n_coarse = _run_tasks(log, pages)
    fine, n_fine = _run_tasks(log, pages // 10)
    assert n_fine >= 8 * n_coarse
    # Pages at range edges are fetched twice and chases reach across more edges: a few
    # percent (measured: breadth 886 -> 1,098 pages with 3-page ranges; p4k 15,478 -> 15,953).
    assert fine <= 1.3 * coarse, (coarse, fine)


def test_a_verdict_with_no_event_at_its_lsa_is_an_error_not_a_lost_row():
    log = walcdc.open_log(fixture_dir("breadth"))
    options = log._native.change_options(**_native_options(log, **DEFAULTS))
    versions = _versions(log)
    records = log.records().read_all()
    events = pa.concat_batches(
        [pa.record_batch(b) for b in native.range_events(log._native, options, versions)]
    ).column("lsa")
    first = events[0].as_py()
    # A record that is no change event (the one before the first event's).
    lsas = records.column("lsa").to_pylist()
    other = lsas[lsas.index(first) - 1]
    with pytest.raises(walcdc.CorruptRecordError) as caught:
        for _ in native.decided_events(log._native, options, versions, _verdicts([other, first])):
            pass
    assert caught.value.lsa == other and "did the log change" in str(caught.value)
    assert caught.value.file


@pytest.mark.parametrize("name", tiered(["v11_2"], ["v11_2", "p4k"]))
def test_the_driver_reads_only_the_catalogs_writes(spark, name):
    from walcdc.spark import _catalog_inputs, _facts_frame, _volume_paths

    log = walcdc.open_log(fixture_dir(name))
    facts_df = _facts_frame(spark, _volume_paths(log), log.ranges(1 << 20), "raise")
    inputs = _catalog_inputs(facts_df)
    facts = pa.record_batch(native.range_facts(log._native)).to_pylist()
    writes = [f for f in facts if f["kind"] == 5]
    ends = [f for f in facts if f["kind"] in (1, 2)]
    records = log.records().read_all().num_rows
    # The class-record images are among them; all is a small share of the log (DDL only).
    classish = {f["lsa"] for f in writes if f["class_record"]}
    assert classish <= {lsa for _, _, lsa, _ in inputs}
    assert len(inputs) <= len(writes) + len(ends)
    assert len(inputs) < records / 40, (len(inputs), records)  # v11_2: 2.0%, p4k: < 0.8%
    # The catalog from those inputs is the one the local reader learns.
    versions, commits = native.catalog_versions(log._native, inputs)
    assert commits == native.catalog_versions(log._native, _all_inputs(facts))[1]
    # The same inputs from each range reduced where it is read and joined in log order (the
    # committed stream's plan), ranges of 1 MiB and (full tier) of 3 pages alike; a unit test
    # (parallel.rs) cuts a fact list every way.
    for split in tiered([1 << 20], [1 << 20, 3 * 4096]):
        ranges = log.ranges(split)
        joins = (
            inputs
            if split == 1 << 20
            else _catalog_inputs(_facts_frame(spark, _volume_paths(log), ranges, "raise"))
        )
        reduced = [native.range_catalog(log._native, s, e)[0] for s, e in ranges]
        # A record's trid is not part of its input (0 from the reduction).
        want = [(r, t if r else 0, lsa, end) for r, t, lsa, end in joins]
        assert native.catalog_inputs_of(reduced) == want, split


def _all_inputs(facts):
    """Every class-tracker write and end record, in log order."""
    return sorted(
        ((False, f["trid"], f["lsa"], None) for f in facts if f["kind"] in (1, 2, 5)),
        key=lambda x: x[2],
    )
