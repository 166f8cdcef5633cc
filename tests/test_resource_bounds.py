"""Resource bounds on adversarial logs, measured by counts rather than time: the records a
change stream reads by random access stay proportional to the log, whatever its LSAs say
(no chain walked again per event, no cycle followed); a length field never allocates more than
the bytes that back it; file descriptors and maps are released."""

from __future__ import annotations

import gc
import os
import struct

import pytest

import walcdc
from walcdc.testing import (
    REC_HOME,
    REC_RELOCATION,
    RVHF_UPDATE,
    LogWriter,
    Workload,
    cdc_oid,
    heap_row,
    page_with_checksum,
)
from walcdc.testing import _native_oid as native_oid
from walcdc.testing import _raw_lsa as raw_lsa

TABLE = cdc_oid(0, 229, 1)
RVBT_NON_MVCC_INSERT_OBJECT = walcdc.testing.RCV_INDEXES["RVBT_NON_MVCC_INSERT_OBJECT"]


def test_chases_that_point_far_back_cost_no_walk_each(tmp_path):
    """Thousands of supplemental UPDATE records all lead to one moved-row record with a long
    run of the transaction's records before it. Following the row's forwarding from each of
    them would walk that run again per event (quadratic); the walk stays inside each event's
    own operation instead, so the random reads stay proportional to the log."""
    fillers, events = 5000, 2000
    w = LogWriter(page_size=4096, active_pages=2048, archive_pages=512)
    t = Workload(w).begin(1)
    for i in range(fillers):
        t._data(RVBT_NON_MVCC_INSERT_OBJECT, 300, i % 100, undo=b"k" * 8, redo=b"k" * 8,
                rectype="LOG_UNDOREDO_DATA")  # fmt: skip
    old = REC_HOME.to_bytes(2, "little") + heap_row(1, b"old row!")
    moved = REC_RELOCATION.to_bytes(2, "little") + native_oid(cdc_oid(0, 400, 1))
    home = t._data(RVHF_UPDATE, 229, 7, undo=old, redo=moved, rectype="LOG_UNDOREDO_DATA")
    for _ in range(events):
        t._supplement("update", native_oid(TABLE) + raw_lsa(home) + raw_lsa(home))
    t._append("LOG_COMMIT", at_time=1_700_000_000)
    w.finish(tmp_path)

    records = walcdc.open_log(tmp_path).records().read_all().num_rows
    stream = walcdc.read_changes(tmp_path, decode=False)
    got = stream.read_all()
    assert got.num_rows == events
    reads = stream.stats["random_reads"]
    # One walk of the run for the first event, a few reads per event after it.
    assert reads <= fillers + 10 * events, (reads, records)


def _small_log(tmp_path):
    w = LogWriter(page_size=4096, active_pages=16, archive_pages=8)
    t = Workload(w).begin(1)
    for slot in range(1, 4):
        t.insert(TABLE, b"row %d" % slot, page=300, slot=slot)
    events = t.commit()
    info = w.finish(tmp_path)
    return info, events


def _patch_record(log_dir, lsa: int, field_at: int, data: bytes):
    """Writes ``data`` into the record at ``lsa`` (``field_at`` bytes into its header) and
    recomputes its page's checksum."""
    page_size = 4096
    path = log_dir / "walcdc_lgat"
    raw = bytearray(path.read_bytes())
    pageid, offset = walcdc.lsa.split(lsa)
    # The test writer's ring: logical page p in slot p + 1 while the ring has not wrapped.
    at = (pageid + 1) * page_size
    assert struct.unpack_from("<q", raw, at)[0] == pageid
    pos = at + 16 + offset + field_at  # after the 16-byte page header
    raw[pos : pos + len(data)] = data
    raw[at : at + page_size] = page_with_checksum(bytes(raw[at : at + page_size]))
    path.write_bytes(bytes(raw))


def test_a_cycle_in_the_transaction_chain_is_an_error_not_a_walk(tmp_path):
    """A supplemental record whose prev_tranlsa points forward (to the next operation's
    supplemental record) makes a cycle in the transaction's chain. The chase reports the
    damaged record instead of walking the cycle."""
    _, events = _small_log(tmp_path)
    supp, later = events[1]["lsa"], events[2]["lsa"]
    _patch_record(tmp_path, supp, 0, raw_lsa(later))
    with pytest.raises(walcdc.CorruptRecordError) as e:
        walcdc.read_changes(tmp_path).read_all()
    assert e.value.file == "walcdc_lgat" and e.value.lsa == supp
    assert "does not lie before" in str(e.value)


def test_a_supplemental_record_pointing_forward_is_corrupt(tmp_path):
    """A supplemental record's image LSA must lie before it (the engine logs the change first):
    one that points at a later record is reported, never chased."""
    _, events = _small_log(tmp_path)
    first, last = events[0]["lsa"], events[-1]["lsa"]
    # INSERT payload: class OID (8 bytes), then the redo LSA.
    recs = walcdc.open_log(tmp_path).records().read_all().to_pylist()
    rec = next(r for r in recs if r["lsa"] == first)
    assert rec["type"] == "LOG_SUPPLEMENTAL_INFO"
    stream = walcdc.read_changes(tmp_path)
    assert stream.read_all().num_rows == 3
    log = walcdc.open_log(tmp_path)
    payload = log.record(first)["undo"]
    assert payload[8:16] != raw_lsa(last)
    # The payload follows the record header (32 bytes) and its data header (8 bytes).
    _patch_record(tmp_path, first, 32 + 8 + 8, raw_lsa(last))
    with pytest.raises(walcdc.CorruptRecordError, match="does not lie before it") as e:
        walcdc.read_changes(tmp_path).read_all()
    assert e.value.lsa == first


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _maps(path) -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if str(path) in line)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_files_and_maps_are_released(tmp_path):
    """Opening, reading and dropping log sets and streams many times leaves no file descriptor
    and no mapping of the volumes behind."""
    _small_log(tmp_path)
    gc.collect()
    fds = _fds()
    for _ in range(200):
        log = walcdc.open_log(tmp_path)
        log.records(payloads=True).read_all()
        stream = walcdc.read_changes(tmp_path)
        stream.read_all()
        stream.state().to_bytes()
        del log, stream
    gc.collect()
    assert _fds() <= fds
    assert _maps(tmp_path) == 0
    # A stream abandoned half way releases its volumes too.
    stream = walcdc.read_changes(tmp_path, batch_size=1)
    next(iter(stream))
    assert _maps(tmp_path) > 0
    stream.close()
    del stream
    gc.collect()
    assert _maps(tmp_path) == 0


def test_the_log_writer_streams_large_logs_in_constant_memory(tmp_path):
    """A streaming writer holds about a ring and an archive, however long the log it writes;
    its files read back exactly as those of the writer that keeps everything in memory."""

    def workload(w):
        wl = Workload(w)
        body = bytes(range(256)) * 3
        for i in range(600):
            t = wl.begin(1 + i % 7)
            for j in range(5):
                t.insert(TABLE, body[j:], page=1000 + i, slot=j + 1)
            t.commit(1_700_000_000 + i)
            held.append(w.buffered_bytes())

    held: list = []
    ring, archive = 8, 4
    streamed = LogWriter(active_pages=ring, archive_pages=archive, stream_to=tmp_path / "s")
    workload(streamed)
    streamed.finish(tmp_path / "s")
    assert max(held) <= (ring + archive + 2) * 4096
    held.clear()
    whole = LogWriter(active_pages=ring, archive_pages=archive)
    workload(whole)
    whole.finish(tmp_path / "m")
    assert max(held) > 50 * max(held[:10])  # the in-memory writer grows with the log
    names = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert len(names) > 50 and names == sorted(p.name for p in (tmp_path / "s").iterdir())
    for name in names:
        assert (tmp_path / "s" / name).read_bytes() == (tmp_path / "m" / name).read_bytes(), name
    with pytest.raises(OSError, match="where it wrote its archives"):
        w = LogWriter(active_pages=ring, archive_pages=archive, stream_to=tmp_path / "x")
        workload(w)
        w.finish(tmp_path / "elsewhere")
