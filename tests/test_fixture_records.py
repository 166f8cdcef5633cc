"""Every record walcdc reads equals the record in the engine's own dump (diagdb -d 8), for every
fixture, from the first record to the shipped end of the log, field for field; and walcdc reads
nothing past that end."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import walcdc
from conftest import (
    dump_data_page,
    dump_lengths,
    fixture_dir,
    read_dump,
    shipped_end,
)
from walcdc import lsa as L

# Fixtures whose whole shipped log is readable (tde has encrypted pages: tested separately).
CLEAR = ["p4k", "p16k", "crash", "breadth", "nosupp", "v11_2"]


#: Our column -> the dump's field, for what every record has.
HEADER_FIELDS = {
    "lsa": "lsa",
    "forw_lsa": "forw_lsa",
    "back_lsa": "back_lsa",
    "prev_tranlsa": "prev_tranlsa",
    "trid": "trid",
    "type": "type",
    "rcvindex_name": "rcvindex",
}
SOME_RECORDS = [
    "undo_stored_length", "redo_stored_length", "supplement_type", "undo_zipped",
    "data_volid", "data_pageid", "data_offset", "at_time",
]  # fmt: skip


def read_all(log, **kw) -> pa.Table:
    return log.records(**kw).read_all()


def assert_matches_dump(table: pa.Table, dump, name: str) -> None:
    """Field-for-field comparison of our rows with the dump records at the same positions."""
    n = table.num_rows
    assert n == len(dump), f"{name}: {n} records read, the dump has {len(dump)} before the end"
    # The fields every record has, column by column in Arrow; the first difference is named.
    for column, field in HEADER_FIELDS.items():
        got = table.column(column).combine_chunks()
        if pa.types.is_dictionary(got.type):
            got = got.dictionary_decode()
        want = pa.array([getattr(d, field) for d in dump], type=got.type)
        if not got.equals(want):
            same = pc.fill_null(pc.equal(got, want), False)
            both_null = pc.and_(got.is_null(), want.is_null())
            i = pc.index(pc.or_(same, both_null), False).as_py()
            where = f"{name} record {i} at {L.format_lsa(dump[i].lsa)}"
            got_i, want_i = got[i].as_py(), want[i].as_py()
            raise AssertionError(f"{where}: {column} {got_i!r}, the dump says {want_i!r}")
    # The fields some records have.
    cols = {c: table.column(c).to_pylist() for c in SOME_RECORDS}
    for i, d in enumerate(dump):
        where = f"{name} record {i} at {L.format_lsa(d.lsa)}"
        lengths = dump_lengths(d)
        if "undo" in lengths:
            assert cols["undo_stored_length"][i] == lengths["undo"], where
        if "redo" in lengths:
            assert cols["redo_stored_length"][i] == lengths["redo"], where
        if "supplement_type" in lengths:
            assert cols["supplement_type"][i] == lengths["supplement_type"], where
            raw = cols["undo_stored_length"][i] | (0x80000000 if cols["undo_zipped"][i] else 0)
            if raw >= 0x80000000:
                raw -= 1 << 32
            assert raw == lengths["supplement_raw_length"], where
        page = dump_data_page(d)
        if page is not None and cols["data_volid"][i] is not None:
            got = (cols["data_volid"][i], cols["data_pageid"][i], cols["data_offset"][i])
            assert got == page, where
        if d.type in ("LOG_COMMIT", "LOG_ABORT"):
            stamp = cols["at_time"][i]
            assert stamp is not None, where
            want = d.detail.split("Transaction finish time at = ")[1][:24]
            assert time.asctime(stamp.utctimetuple()) == want, where


@pytest.mark.parametrize("name", CLEAR)
def test_records_equal_engine_dump(name):
    log = walcdc.open_log(fixture_dir(name))
    end = shipped_end(name)
    dump = [d for d in read_dump(name) if d.lsa < end]
    table = read_all(log)
    assert_matches_dump(table, dump, name)
    # The walk ends exactly at the shipped end (an END_OF_LOG marker there), and invents nothing.
    assert log.last_walk["end_lsa"] == end
    assert log.last_walk["end_reason"] == "end_of_log"
    info = log.info()
    assert info["end_lsa"] == end
    assert info["first_lsa"] == dump[0].lsa
    assert info["last_lsa"] == dump[-1].lsa
    # Original lengths (a zipped payload's from its prefix, read with the record when its page is
    # at hand, else fetched) are the lengths of the payloads as unzipped, record for record.
    cols = ["lsa", "undo_length", "redo_length", "undo", "redo"]
    payloads = log.records(payloads=True, columns=cols).read_all()
    assert payloads.column("lsa").equals(table.column("lsa"))
    for side in ("undo", "redo"):
        lengths = pc.binary_length(payloads.column(side)).cast(pa.uint32())
        assert payloads.column(f"{side}_length").equals(lengths), f"{name}: {side}_length"


def test_crash_ignores_stale_header_and_stops_before_recovery():
    log = walcdc.open_log(fixture_dir("crash"))
    info = log.info()
    assert info["is_shutdown"] is False
    # The header is far behind the true end (it was last flushed at the ring wrap).
    assert info["header_append_lsa"] < L.parse("7714|1208")
    assert info["end_lsa"] == L.parse("7714|1208")
    # The dump's records from the recovery on were written later, not in the shipped files.
    recovery = [d for d in read_dump("crash") if d.lsa >= L.parse("7714|1208")]
    assert recovery[0].type == "LOG_DUMMY_CRASH_RECOVERY"
    table = read_all(log)
    assert max(table.column("lsa").to_pylist()) < L.parse("7714|1208")


def test_records_continue_across_volumes():
    # p16k: records continue across every archive boundary; p4k: from the last archive into the
    # active log (README). The full comparison above checks them; here we name them.
    for name, crossings in {
        "p16k": ["1277|16320", "2555|16248", "3833|16288"],
        "p4k": ["15353|4016"],
    }.items():
        log = walcdc.open_log(fixture_dir(name))
        for text in crossings:
            rec = log.record(text)
            nxt = log.record(rec["forw_lsa"])
            assert rec["file"] != nxt["file"], (name, text)


def test_tde_raises_by_default():
    log = walcdc.open_log(fixture_dir("tde"))
    with pytest.raises(walcdc.EncryptedPageError) as exc:
        read_all(log)
    assert exc.value.file == "tde4k_lgat"
    assert exc.value.lsa == L.parse("630|4008")
    assert isinstance(exc.value, walcdc.LogError)


def test_tde_skip_reports_range_and_reads_only_clear_records():
    log = walcdc.open_log(fixture_dir("tde"))
    first_encrypted = L.parse("630|4008")  # header on a clear page, payload on page 631
    dump = [d for d in read_dump("tde") if d.lsa < first_encrypted]
    with pytest.warns(walcdc.EncryptedPagesSkipped, match="631..645"):
        table = read_all(log, on_encrypted="skip")
    assert_matches_dump(table, dump, "tde")
    walk = log.last_walk
    assert walk["skipped"] == [
        {"from_lsa": first_encrypted, "first_pageid": 631, "last_pageid": 645, "resume_lsa": None}
    ]
    # The end-of-log marker is encrypted too; after a clean shutdown the header gives the end.
    assert walk["end_reason"] == "encrypted_tail"
    assert walk["end_lsa"] == L.parse("645|2512")


def test_start_and_end_bounds():
    log = walcdc.open_log(fixture_dir("p4k"))
    dump = read_dump("p4k")
    start, stop = dump[1000].lsa, dump[1500].lsa
    table = read_all(log, start=L.format_lsa(start), end=stop)
    assert table.column("lsa").to_pylist() == [d.lsa for d in dump[1000:1500]]
    # Start in the middle of a volume boundary-crossing region works the same.
    i = next(k for k, d in enumerate(dump) if d.lsa == L.parse("15353|4016"))
    table = read_all(log, start=dump[i].lsa, end=dump[i + 3].lsa)
    assert table.column("lsa").to_pylist() == [d.lsa for d in dump[i : i + 3]]
