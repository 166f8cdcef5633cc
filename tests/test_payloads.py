"""Payloads: every zipped payload of every fixture unzips to exactly its stated length, and DIFF
redo images rebuild into the heap records the workload wrote."""

from __future__ import annotations

import re
import struct

import pyarrow.compute as pc
import pytest

import walcdc
from conftest import fixture_dir

# Zipped payload parts per fixture, as counted independently when the format was verified
# (spec §5.9: every one decompressed with a plain LZ4 block decoder to its prefix length).
ZIPPED_PARTS = {"p4k": 133_613, "p16k": 133_325, "crash": 4_058}


@pytest.mark.parametrize("name", ["p4k", "p16k", "crash", "breadth", "nosupp", "v11_2"])
def test_every_zipped_payload_unzips_to_its_stated_length(name):
    log = walcdc.open_log(fixture_dir(name))
    zipped = 0
    rows = 0
    for batch in log.records(payloads=True, batch_size=16384):
        rows += batch.num_rows
        for slot in ("undo", "redo"):
            lengths = pc.binary_length(batch.column(slot))
            # Every payload comes back whole: unzipped ones at the length in their prefix.
            want = batch.column(f"{slot}_length")
            assert pc.all(pc.equal(pc.cast(lengths, "uint32"), want)).as_py()
            z = batch.column(f"{slot}_zipped")
            zipped += pc.sum(pc.cast(z, "int64")).as_py() or 0
            # The engine zips only parts of 255 bytes or more, and only when that shrinks them.
            zl = pc.filter(batch.column(f"{slot}_length"), z)
            zs = pc.filter(batch.column(f"{slot}_stored_length"), z)
            if len(zl):
                assert pc.min(zl).as_py() >= 255
                assert pc.all(pc.less(zs, zl)).as_py()
    assert rows > 10_000
    if name in ZIPPED_PARTS:
        assert zipped == ZIPPED_PARTS[name]
    else:
        assert zipped > 0


# Heap-update DIFF records whose rebuilt redo image carries a workload row tag, and how many the
# stored (XOR-ed) bytes show without the rebuild (spec §9.3, counted independently).
DIFF_TAGS = {
    "p4k": (rb"P4K-S\d-T\d{4}", 2386, 2035, 2),
    "p16k": (rb"P16K-S\d-T\d{4}", 2581, 2054, 5),
}


@pytest.mark.parametrize("name", sorted(DIFF_TAGS))
def test_diff_redo_images_rebuild(name):
    pattern, n_expected, tagged_expected, raw_expected = DIFF_TAGS[name]
    tag = re.compile(pattern)
    log = walcdc.open_log(fixture_dir(name))
    n = tagged = raw_tagged = 0
    diff_lsas = []
    for batch in log.records(payloads=True, batch_size=16384):
        d = batch.to_pydict()
        for i in range(batch.num_rows):
            if not d["type"][i].endswith("DIFF_UNDOREDO_DATA"):
                continue
            diff_lsas.append((d["lsa"][i], d["undo"][i], d["redo"][i]))
            if d["rcvindex_name"][i] not in ("RVHF_UPDATE", "RVHF_UPDATE_NOTIFY_VACUUM"):
                continue
            undo, redo = d["undo"][i], d["redo"][i]
            n += 1
            # A rebuilt heap image is a recdes: INT16 record type (REC_HOME or REC_NEWHOME).
            assert struct.unpack_from("<h", redo)[0] in (2, 3)
            tagged += bool(tag.search(redo))
            stored = bytes(a ^ b for a, b in zip(redo, undo)) + redo[len(undo) :]
            raw_tagged += bool(tag.search(stored))
    assert (n, tagged, raw_tagged) == (n_expected, tagged_expected, raw_expected)
    # Random access rebuilds the same images as the walk.
    for lsa, undo, redo in diff_lsas:
        rec = log.record(lsa)
        assert (rec["undo"], rec["redo"]) == (undo, redo)
