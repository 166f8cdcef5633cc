"""Property tests of the record layout rules: logs built by the project's writer with records of
random types and sizes, page sizes 4K/8K/16K, tiny rings that wrap and small archives (so records
span pages and volumes) read back record for record and byte for byte."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import walcdc
from walcdc.testing import RECORD_TYPES, LogWriter

# Which payload slots each type carries (undo, redo).
SLOTS = {
    "LOG_UNDOREDO_DATA": (True, True),
    "LOG_MVCC_UNDOREDO_DATA": (True, True),
    "LOG_DIFF_UNDOREDO_DATA": (True, True),
    "LOG_MVCC_DIFF_UNDOREDO_DATA": (True, True),
    "LOG_UNDO_DATA": (True, False),
    "LOG_MVCC_UNDO_DATA": (True, False),
    "LOG_REDO_DATA": (False, True),
    "LOG_MVCC_REDO_DATA": (False, True),
    "LOG_DBEXTERN_REDO_DATA": (False, True),
    "LOG_POSTPONE": (False, True),
    "LOG_RUN_POSTPONE": (True, False),
    "LOG_COMPENSATE": (True, False),
    "LOG_SAVEPOINT": (True, False),
    "LOG_SUPPLEMENTAL_INFO": (True, False),
    "LOG_SYSOP_END": (True, False),
    "LOG_COMMIT": (False, False),
    "LOG_ABORT": (False, False),
    "LOG_DUMMY_HA_SERVER_STATE": (False, False),
    "LOG_DUMMY_OVF_RECORD": (False, False),
    "LOG_SYSOP_ATOMIC_START": (False, False),
    "LOG_START_CHKPT": (False, False),
}
ZIPPABLE = {
    "LOG_UNDOREDO_DATA",
    "LOG_MVCC_UNDOREDO_DATA",
    "LOG_UNDO_DATA",
    "LOG_MVCC_UNDO_DATA",
    "LOG_REDO_DATA",
    "LOG_MVCC_REDO_DATA",
    "LOG_SUPPLEMENTAL_INFO",
}
DIFF = {"LOG_DIFF_UNDOREDO_DATA", "LOG_MVCC_DIFF_UNDOREDO_DATA"}


@st.composite
def payload(draw, page_size, min_size=0):
    size = draw(
        st.one_of(
            st.just(0),
            st.integers(1, 64),
            st.integers(65, 600),
            st.integers(601, int(page_size * 2.5)),
        ).map(lambda n: max(n, min_size))
    )
    if draw(st.booleans()):
        return draw(st.binary(min_size=size, max_size=size))
    seed = draw(st.binary(min_size=1, max_size=8))
    return (seed * (size // len(seed) + 1))[:size]


@st.composite
def record(draw, page_size):
    name = draw(st.sampled_from(sorted(SLOTS)))
    has_undo, has_redo = SLOTS[name]
    trid = draw(st.sampled_from([1, 2, 3, 7, 0, -2]))
    fields = {}
    if name in DIFF:
        # DIFF records hold an update: the redo image is the undo with a few bytes changed.
        undo = draw(payload(page_size, min_size=255))
        n = len(undo)
        edits = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 255)), max_size=8))
        redo = bytearray(undo + draw(st.binary(max_size=40)))
        for i, v in edits:
            redo[i] = v
        undo_b, redo_b = bytes(undo), bytes(redo)
    else:
        undo_b = draw(payload(page_size)) if has_undo else b""
        redo_b = draw(payload(page_size)) if has_redo else b""
    if name == "LOG_SYSOP_END":
        if undo_b:
            fields["sysop_type"] = 2
    if name in ("LOG_COMMIT", "LOG_ABORT"):
        fields["at_time"] = draw(st.integers(0, 253_402_300_799))  # up to 9999-12-31
    if name.endswith("_DATA") or name in ("LOG_POSTPONE", "LOG_RUN_POSTPONE", "LOG_COMPENSATE"):
        fields["rcvindex"] = draw(st.integers(0, 128))
        fields["pageid"] = draw(st.integers(-1, 2**31 - 1))
        fields["volid"] = draw(st.integers(-1, 100))
        fields["offset"] = draw(st.integers(-(2**15), 2**15 - 1))
    if name == "LOG_SUPPLEMENTAL_INFO":
        fields["supplement_type"] = draw(st.integers(0, 8))
    zip_undo = name in ZIPPABLE and draw(st.booleans())
    zip_redo = name in ZIPPABLE and draw(st.booleans())
    return name, trid, undo_b, redo_b, zip_undo, zip_redo, fields


@st.composite
def log_spec(draw):
    page_size = draw(st.sampled_from([4096, 8192, 16384]))
    active = draw(st.integers(2, 8))
    archive = draw(st.integers(1, active))
    records = draw(st.lists(record(page_size), min_size=1, max_size=40))
    return page_size, active, archive, records


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=log_spec(), data=st.data())
def test_written_logs_read_back_exactly(spec, data):
    page_size, active, archive, records = spec
    w = LogWriter(page_size=page_size, active_pages=active, archive_pages=archive)
    lsas = []
    for name, trid, undo, redo, zu, zr, fields in records:
        lsas.append(w.append(trid, name, undo=undo, redo=redo, zip_undo=zu, zip_redo=zr, **fields))
    with tempfile.TemporaryDirectory() as d:
        out = w.finish(d)
        log = walcdc.open_log(d)
        table = log.records(payloads=True).read_all()
        rows = table.to_pylist()
        assert [r["lsa"] for r in rows] == lsas
        assert log.last_walk["end_lsa"] == out["end_lsa"]
        assert log.last_walk["end_reason"] == "end_of_log"
        last_of = {}
        files = set()
        for i, (row, (name, trid, undo, redo, zu, zr, fields)) in enumerate(zip(rows, records)):
            assert row["type"] == name
            assert RECORD_TYPES[row["type"]] == RECORD_TYPES[name]
            assert row["trid"] == trid
            assert row["back_lsa"] == (lsas[i - 1] if i else None)
            assert row["prev_tranlsa"] == last_of.get(trid)
            last_of[trid] = row["lsa"]
            if name in ("LOG_COMMIT", "LOG_ABORT"):
                del last_of[trid]  # a transaction ends; its trid may start another
            assert row["forw_lsa"] == (lsas[i + 1] if i + 1 < len(lsas) else out["end_lsa"])
            assert row["undo"] == undo and row["redo"] == redo
            assert row["undo_length"] == len(undo) and row["redo_length"] == len(redo)
            if not zu and name not in DIFF:
                assert not row["undo_zipped"]
            if not zr and name not in DIFF:
                assert not row["redo_zipped"]
            if name in DIFF:
                assert row["redo_zipped"]
            if "rcvindex" in fields:
                assert row["rcvindex"] == fields["rcvindex"]
            if "rcvindex" in fields and name != "LOG_DBEXTERN_REDO_DATA":
                assert (row["data_volid"], row["data_pageid"], row["data_offset"]) == (
                    fields["volid"],
                    fields["pageid"],
                    fields["offset"],
                )
            if "supplement_type" in fields:
                assert row["supplement_type"] == fields["supplement_type"]
            if "at_time" in fields:
                assert int(row["at_time"].timestamp()) == fields["at_time"]
            files.add(row["file"])
            # Random access gives the same record and images.
            rec = log.record(row["lsa"])
            assert (rec["undo"], rec["redo"]) == (undo, redo)
        # A walk may start at any record and ends at the same end.
        k = data.draw(st.integers(0, len(lsas) - 1))
        tail = log.records(start=lsas[k]).read_all().column("lsa").to_pylist()
        assert tail == lsas[k:]


def _spanning_log(directory, page_size):
    """Records larger than a page, with archives of one page: every record spans volumes."""
    w = LogWriter(page_size=page_size, active_pages=3, archive_pages=1)
    big = bytes(range(256)) * (page_size // 128)
    lsas = [w.append(1, "LOG_UNDOREDO_DATA", undo=big, redo=big[::-1]) for _ in range(12)]
    out = w.finish(directory)
    return lsas, out


def test_records_span_archives_and_the_active_volume(tmp_path):
    for page_size in (4096, 8192, 16384):
        d = tmp_path / str(page_size)
        lsas, out = _spanning_log(d, page_size)
        assert len(out["archives"]) >= 5
        log = walcdc.open_log(d)
        rows = log.records(payloads=True).read_all().to_pylist()
        assert [r["lsa"] for r in rows] == lsas
        big = bytes(range(256)) * (page_size // 128)
        assert all(r["undo"] == big and r["redo"] == big[::-1] for r in rows)
        # Record headers sit in many archives; the last record continues into the active volume.
        assert len({r["file"] for r in rows}) >= 4
        assert "_lgar" in rows[-1]["file"]
        assert out["end_lsa"] >> 16 >= log.info()["nxarv_pageid"]
