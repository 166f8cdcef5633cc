"""Records the reader cannot place or interpret never lose events silently: each one is an
error naming the file and the LSA, or a skip that is counted and warned about. The logs are
built with the test writer and edited under valid checksums (``walcdc.testing.patch_record``),
so each edit reaches the decoders."""

from __future__ import annotations

import re
import struct
import warnings

import pytest

import walcdc
from walcdc import lsa as L
from walcdc.testing import RECORD_TYPES, LogWriter, Workload, cdc_oid, patch_record

PAGE = 4096
AREA = PAGE - 16
CLASS = cdc_oid(0, 500, 1)
TRID_AT, TYPE_AT, DATA_HEADER_AT = 24, 28, 32


def small_log(directory, transactions: int = 400):
    """A log of single-insert transactions over a tiny ring, so most pages are archived.
    Returns the workload's model (committed events, in commit order)."""
    w = LogWriter(page_size=PAGE, active_pages=16, archive_pages=4)
    work = Workload(w)
    for i in range(transactions):
        t = work.begin(10 + i % 7)
        t.insert(CLASS, b"row %05d " % i + bytes(40), page=600 + i // 50, slot=i % 50)
        t.commit(at_time=1_700_000_000 + i)
    w.finish(directory)
    return work


def events(directory, **kw):
    stream = walcdc.read_changes(directory, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = stream.read_all().num_rows
    return stream, rows, [w.message for w in caught]


def supplemental_lsas(work):
    """The LSAs of the INSERT supplemental records of committed transactions, whose data
    header lies on their first page."""
    out = []
    for txn in work.committed:
        for e in txn:
            _, off = L.split(e["lsa"])
            if off + DATA_HEADER_AT + 8 <= AREA:
                out.append(e["lsa"])
    return out


def archived_pages(directory):
    info = walcdc.open_log(directory).info()
    return [(a["first_pageid"], a["last_pageid"]) for a in info["archives"]]


def test_a_supplement_of_an_unknown_kind_is_an_error(tmp_path):
    work = small_log(tmp_path)
    _, clean, _ = events(tmp_path)
    assert clean == sum(len(t) for t in work.committed)
    target = supplemental_lsas(work)[len(work.committed) // 2]
    for kind in (9, 22, 0x40000003):
        patch_record(tmp_path, target, DATA_HEADER_AT, struct.pack("<i", kind), PAGE)
        for committed_only in (True, False):
            with pytest.raises(walcdc.CorruptRecordError, match=f"kind {kind}") as err:
                walcdc.read_changes(tmp_path, committed_only=committed_only).read_all()
            assert err.value.lsa == target and err.value.file


@pytest.mark.parametrize("trid", [0, -1, -2, -100])
def test_a_supplement_of_a_system_transaction_is_an_error(tmp_path, trid):
    work = small_log(tmp_path)
    target = supplemental_lsas(work)[len(work.committed) // 3]
    patch_record(tmp_path, target, TRID_AT, struct.pack("<i", trid), PAGE)
    for committed_only in (True, False):
        with pytest.raises(walcdc.CorruptRecordError, match="system transaction") as err:
            walcdc.read_changes(tmp_path, committed_only=committed_only).read_all()
        assert err.value.lsa == target


def test_an_end_marker_on_an_archived_page_is_a_counted_skip(tmp_path):
    work = small_log(tmp_path)
    _, clean, _ = events(tmp_path)
    archived = archived_pages(tmp_path)
    assert archived, "the log must have archives"

    def on_archive(lsa):
        page = L.split(lsa)[0]
        return any(lo <= page <= hi for lo, hi in archived)

    # A supplemental record on an archived page with more records after it on that page.
    candidates = [x for x in supplemental_lsas(work) if on_archive(x)]
    target = next(
        x
        for x in candidates
        if any(y > x and L.split(y)[0] == L.split(x)[0] for y in supplemental_lsas(work))
    )
    patch_record(tmp_path, target, TYPE_AT, struct.pack("<i", RECORD_TYPES["LOG_END_OF_LOG"]), PAGE)

    stream, damaged, caught = events(tmp_path)
    assert damaged < clean  # the rest of the page is not read...
    assert stream.unplaced == [target]  # ...and that is said, in the count and the warning
    assert any(isinstance(w, walcdc.UnplacedRecordsSkipped) for w in caught), caught
    log = walcdc.open_log(tmp_path)
    with pytest.warns(walcdc.UnplacedRecordsSkipped, match=re.escape(L.format_lsa(target))):
        log.records().read_all()
    assert log.last_walk["unplaced"] == [target]
