"""The catalog of the parallel plan (walcdc.spark): the driver needs only the writes of the
transactions that changed class records, and each range reduced where it is read gives the
same inputs as the facts' joins. (What a range's task reads: tests/test_range_reader.py.)"""

from __future__ import annotations

import pyarrow as pa
import pytest

import walcdc
import walcdc._native as native
from conftest import fixture_dir, tiered
from walcdc.changes import OPTION_DEFAULTS

DEFAULTS = OPTION_DEFAULTS


def _versions(log) -> bytes:
    """Catalog versions from every class-tracker write and end record (a superset of what the
    Spark plan collects; the catalog is the same)."""
    facts = pa.record_batch(native.range_facts(log._native)).to_pylist()
    return native.catalog_versions(log._native, _all_inputs(facts))[0]


@pytest.mark.parametrize("name", tiered(["v11_2"], ["v11_2", "p4k"]))
def test_the_driver_reads_only_the_catalogs_writes(spark, name):
    from walcdc.spark.facts import catalog_inputs, facts_frame

    log = walcdc.open_log(fixture_dir(name))
    facts_df = facts_frame(spark, log.volumes(), log.ranges(1 << 20), "raise")
    inputs = catalog_inputs(facts_df)
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
            else catalog_inputs(facts_frame(spark, log.volumes(), ranges, "raise"))
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
