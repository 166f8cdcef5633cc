"""Records the reader cannot place or interpret never lose events silently: each one is an
error naming the file and the LSA, or a skip that is counted and warned about. The logs are
built with the test writer and edited under valid checksums (``walcdc.testing.patch_record``),
so each edit reaches the decoders."""

from __future__ import annotations

import re
import struct
import warnings

import pyarrow as pa
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


def test_a_change_turned_into_a_deleted_rows_image_is_an_error(tmp_path):
    # A DML supplement whose kind reads UNDO_RECORD (1): CUBRID writes that kind only right
    # before the DELETE supplement that uses it, so an unpaired one is damage.
    work = small_log(tmp_path)
    target = supplemental_lsas(work)[len(work.committed) // 4]
    patch_record(tmp_path, target, DATA_HEADER_AT, struct.pack("<i", 1), PAGE)
    for committed_only in (True, False):
        with pytest.raises(walcdc.CorruptRecordError, match="deleted row's image") as err:
            walcdc.read_changes(tmp_path, committed_only=committed_only).read_all()
        assert err.value.lsa > target and L.format_lsa(target) in str(err.value)


def test_a_record_that_breaks_its_transactions_chain_is_an_error(tmp_path):
    # A supplemental record's trid moved to another transaction (its prev_tranlsa then names
    # a record that is not that transaction's last), or its prev_tranlsa moved.
    work = small_log(tmp_path)
    lsas = supplemental_lsas(work)
    target = lsas[len(lsas) // 2]
    trids = [t[0]["trid"] for t in work.committed]
    own = next(e["trid"] for t in work.committed for e in t if e["lsa"] == target)
    other = next(t for t in trids if t != own)
    patch_record(tmp_path, target, TRID_AT, struct.pack("<i", other), PAGE)
    with pytest.raises(walcdc.CorruptRecordError, match="prev_tranlsa") as err:
        walcdc.read_changes(tmp_path).read_all()
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


# --------------------------------------------------------------------------------------------
# A deleted oldest archive: transactions begun in it are partial


def _without_oldest_archive(tmp_path):
    """p4k's volumes without archive 0 (symlinks), and the fixture's own directory."""
    import os

    from conftest import fixture_dir

    src = fixture_dir("p4k")
    for f in ("p4k_lgar001", "p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, tmp_path / f)
    return src


def _partial_instances(src, cut: int):
    """From the full log's records: the end records (commit or abort) at or after ``cut`` of
    transactions whose first record lies before it, by type, and the LSAs of their records at
    or after ``cut`` (a trid's transaction starts at its first record after its previous end)."""
    recs = walcdc.open_log(src).records(columns=["lsa", "trid", "type"]).read_all()
    first, members, ends, lsas = {}, {}, {"LOG_COMMIT": set(), "LOG_ABORT": set()}, set()
    for lsa, trid, rtype in zip(*(recs.column(c).to_pylist() for c in ("lsa", "trid", "type"))):
        if trid <= 0:
            continue
        first.setdefault(trid, lsa)
        if lsa >= cut:
            members.setdefault(trid, []).append(lsa)
        if rtype in ends:
            if lsa >= cut and first[trid] < cut:
                ends[rtype].add(lsa)
                lsas.update(members.get(trid, []))
            first.pop(trid)
            members.pop(trid, None)
    return ends, lsas


RAW = ["lsa", "commit_lsa", "trid", "op", "class_oid", "row_oid", "before_image", "after_image"]


def _rows(table, cols=RAW):
    return sorted(zip(*(table.column(c).to_pylist() for c in cols)), key=lambda r: r[0])


@pytest.mark.parametrize("committed_only", [True, False], ids=["committed", "engine"])
def test_transactions_begun_in_a_deleted_archive_are_not_passed_off_as_complete(
    tmp_path, committed_only
):
    import pyarrow.compute as pc

    src = _without_oldest_archive(tmp_path)
    cut = walcdc.open_log(tmp_path).info()["first_lsa"]
    assert L.split(cut)[0] == 5118
    ends, partial_lsas = _partial_instances(src, cut)
    # The huge transaction (first record 857|3008, committed at 7761|2296) is one of them.
    assert L.parse("7761|2296") in ends["LOG_COMMIT"]
    partial_ends = ends["LOG_COMMIT"] | (set() if committed_only else ends["LOG_ABORT"])
    full = walcdc.read_changes(src, committed_only=committed_only).read_all()
    # The full log's events the cut log still holds: those at or after the cut (whose
    # transaction committed after it); and those of transactions it holds whole.
    end_of = "commit_lsa" if committed_only else "lsa"
    held = full.filter(
        pc.and_(pc.greater_equal(full["lsa"], cut), pc.greater_equal(full[end_of], cut))
    )
    whole = [r for r in _rows(held) if r[0] not in partial_lsas]
    assert held.num_rows > len(whole) > 0

    # Left out (the default): counted and warned about, with the unknown schemas too.
    stream, _, caught = events(tmp_path, committed_only=committed_only)
    stats = stream.stats
    assert stats["partial_transactions"] == len(partial_ends)
    kinds = {type(w).__name__ for w in caught}
    assert {"PartialTransactionsSkipped", "SchemasUnknown"} <= kinds, kinds
    assert stats["unknown_schema_tables"] > 0 and stats["unknown_schema_events"] > 0
    kept = walcdc.read_changes(tmp_path, committed_only=committed_only)
    with pytest.warns(walcdc.PartialTransactionsSkipped):
        kept_rows = kept.read_all()
    assert not any(kept_rows["partial"].to_pylist())
    if committed_only:
        assert _rows(kept_rows) == whole
    else:
        # CUBRID's own stream reports a transaction once its user is known: the cut log's
        # whole transactions are those of the full log (the partial ones are left out).
        got_rows = _rows(kept_rows)
        at = {r[0] for r in got_rows}
        assert at <= {r[0] for r in whole}
        assert got_rows == [r for r in whole if r[0] in at]

    # Emitted, marked: exactly the partial transactions' events are marked.
    emitted = walcdc.read_changes(tmp_path, committed_only=committed_only, on_partial="emit")
    with pytest.warns(walcdc.PartialTransactionsEmitted):
        got = emitted.read_all()
    marked = got.filter(got["partial"])
    changes = pc.is_in(
        pc.cast(marked["op"], "string"), pa.array(["insert", "update", "delete", "ddl"])
    )
    assert pc.sum(changes).as_py() == emitted.stats["partial_events"] == stats["partial_events"] > 0
    assert set(marked["lsa"].to_pylist()) <= partial_lsas
    unmarked = got.filter(pc.invert(got["partial"]))
    assert _rows(unmarked) == _rows(kept_rows)
    if committed_only:
        assert _rows(got) == _rows(held)
        assert set(marked["commit_lsa"].to_pylist()) <= partial_ends


def test_the_cli_says_when_transactions_or_schemas_are_missing(tmp_path):
    from click.testing import CliRunner

    from walcdc.cli import main as cli_main

    _without_oldest_archive(tmp_path)
    out = tmp_path / "out.parquet"
    r = CliRunner().invoke(cli_main, ["extract", str(tmp_path), "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    assert "walcdc: note:" in r.stderr and "began before the oldest volume" in r.stderr
    assert "schema of" in r.stderr and "table(s) is not in the log" in r.stderr
    r = CliRunner().invoke(
        cli_main,
        ["extract", str(tmp_path), "-o", str(tmp_path / "all.parquet"), "--on-partial", "emit"],
    )
    assert r.exit_code == 0, r.stderr
    assert "partial = true" in r.stderr
