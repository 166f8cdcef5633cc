"""Bad input gives a typed error, never a panic, a hang or a huge allocation.

Every case copies a real fixture's volumes into pytest's ``tmp_path`` and damages the copy with
plain file writes. Where the damage goes is computed from the records of the undamaged fixture
(the engine's layout rules, spec §5.3) and checked before writing: the bytes overwritten are the
bytes expected there, and they lie outside the checksum samples (bytes 0..15 and 4080..4095 of
every 4096-byte block, spec §3.4) unless the case means to break a checksum. Each case asserts the
exact exception class, the volume it names (``.file``) and, where one applies, the LSA (``.lsa``).
"""

from __future__ import annotations

import datetime
import decimal
import json
import random
import re
import resource
import shutil
import struct
import time
from functools import cache
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import pyarrow.compute as pc
import pytest

import walcdc
from conftest import fixture_dir
from walcdc import lsa as L

PAGE = 4096  # every fixture used here has 4 KiB log pages
PAGE_HDR = 16
AREA = PAGE - PAGE_HDR  # LOGAREA_SIZE
REC_HDR = 32  # sizeof(LOG_RECORD_HEADER)
SAMPLE = 16  # checksum samples: [0, 16) and [4080, 4096) of every 4096-byte block
# A generous sanity bound for "fails fast" (the reader must not hang or crawl through gigabytes
# a lying length field claims); not a benchmark.
FAST_S = 30.0
# Peak resident memory may not grow by this much while one damaged log is read.
MAX_RSS_GROWTH = 1 << 30

# Record type numbers and data header sizes of the types damaged here (spec §6.1, §6.3).
TYPE_NUMBER = {"LOG_UNDOREDO_DATA": 2, "LOG_UNDO_DATA": 3, "LOG_REDO_DATA": 4}
DATA_HEADER_SIZE = {"LOG_UNDOREDO_DATA": 20, "LOG_UNDO_DATA": 16, "LOG_REDO_DATA": 16}
# Offset of the (first) payload length field in those data headers.
LENGTH_FIELD = {"LOG_UNDOREDO_DATA": 12, "LOG_UNDO_DATA": 12, "LOG_REDO_DATA": 12}

# breadth holds logical pages 0..862 in one active volume; "the middle of the log" is here.
MID_PAGES = range(350, 651)

_VOLUME_NAME = re.compile(r".+_(lgat|lgar\d{3,})$")


# --------------------------------------------------------------------------------------------
# Copies, volume geometry, guarded writes


def copy_log(name: str, tmp_path: Path, skip: Tuple[str, ...] = ()) -> Path:
    """The fixture's log volumes, copied into ``tmp_path/name`` (minus the ``skip`` names)."""
    src = fixture_dir(name)
    dst = tmp_path / name
    dst.mkdir()
    for f in sorted(src.iterdir()):
        if _VOLUME_NAME.match(f.name) and f.name not in skip:
            shutil.copyfile(f, dst / f.name)
    return dst


def read_at(path: Path, offset: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(n)


def sampled(offset: int, n: int) -> bool:
    """Whether any of the bytes ``[offset, offset + n)`` is in a checksum sample."""
    return any(not (SAMPLE <= pos % 4096 < 4096 - SAMPLE) for pos in range(offset, offset + n))


def patch(
    path: Path,
    offset: int,
    data: bytes,
    *,
    expect: Optional[bytes] = None,
    break_checksum: bool = False,
) -> None:
    """Overwrites ``len(data)`` bytes at ``offset``. Refuses to touch a checksum sample unless
    ``break_checksum``; with ``expect``, first checks that the bytes there are those."""
    assert sampled(offset, len(data)) == break_checksum, (path.name, offset, len(data))
    if expect is not None:
        assert read_at(path, offset, len(expect)) == expect, (path.name, offset)
    assert read_at(path, offset, len(data)) != data, "the damage would change nothing"
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def truncate(path: Path, size: int) -> None:
    assert path.stat().st_size > size
    with open(path, "r+b") as f:
        f.truncate(size)


def page_location(logdir: Path, pageid: int) -> Tuple[Path, int]:
    """The volume and file offset of a logical page, as the reader finds it (an archive that
    holds it first, else the active ring: spec §4.3, §4.4); checked against the page header."""
    active = None
    for f in sorted(logdir.iterdir()):
        if f.name.endswith("_lgat"):
            active = f
            continue
        head = read_at(f, PAGE_HDR, 64)
        npages, fpageid = struct.unpack_from("<iq", head, 44)
        if fpageid <= pageid < fpageid + npages:
            return _checked(f, (pageid - fpageid + 1) * PAGE, pageid)
    assert active is not None, f"no volume of {logdir} holds page {pageid}"
    head = read_at(active, PAGE_HDR, 376)
    npages = struct.unpack_from("<i", head, 88)[0]
    fpageid = struct.unpack_from("<q", head, 96)[0]
    return _checked(active, ((pageid - fpageid) % npages + 1) * PAGE, pageid)


def _checked(path: Path, offset: int, pageid: int) -> Tuple[Path, int]:
    assert struct.unpack("<q", read_at(path, offset, 8))[0] == pageid, (path.name, pageid)
    return path, offset


def area_location(logdir: Path, pageid: int, off: int) -> Tuple[Path, int]:
    """Volume and file offset of byte ``off`` of the area of logical page ``pageid``."""
    path, page = page_location(logdir, pageid)
    return path, page + PAGE_HDR + off


def raw_lsa(key: Optional[int]) -> bytes:
    """The on-disk form of an LSA (spec §4.1); ``None`` is NULL_LSA."""
    if key is None:
        return b"\xff" * 8
    p, o = L.split(key)
    return struct.pack("<Q", (p & ((1 << 48) - 1)) | ((o & 0xFFFF) << 48))


# --------------------------------------------------------------------------------------------
# Layout of records (spec §5.3), computed for records of the undamaged fixture


def align(pageid: int, off: int) -> Tuple[int, int]:
    off = (off + 7) // 8 * 8
    return (pageid + 1, 0) if off >= AREA else (pageid, off)


def data_header_pos(rec: Dict, dh_len: int) -> Tuple[int, int]:
    p, o = L.split(rec["lsa"])
    p, o = align(p, o + REC_HDR)
    return (p + 1, 0) if o + dh_len >= AREA else (p, o)


def payload_pos(rec: Dict, slot: str) -> Tuple[int, int]:
    """Where the stored bytes of ``slot`` ("undo" or "redo") start."""
    dh_len = DATA_HEADER_SIZE[rec["type"]]
    p, o = data_header_pos(rec, dh_len)
    p, o = align(p, o + dh_len)
    if slot == "redo" and rec["undo_stored_length"]:
        p, o = align(p, o + rec["undo_stored_length"])
    return p, o


@cache
def fixture_records(name: str) -> Tuple[Dict, ...]:
    """Every record of the undamaged fixture (read from the shared cache, never damaged)."""
    log = walcdc.open_log(fixture_dir(name))
    return tuple(log.records().read_all().to_pylist())


def mid_records(name: str = "breadth") -> List[Dict]:
    return [r for r in fixture_records(name) if L.split(r["lsa"])[0] in MID_PAGES]


def header_offset(rec: Dict) -> int:
    """Area offset of a record's header; the header itself never straddles a sample here."""
    _, o = L.split(rec["lsa"])
    assert not sampled(PAGE_HDR + o, REC_HDR)
    return o


def pick(cond: Callable[[Dict], bool], name: str = "breadth") -> Dict:
    for r in mid_records(name):
        if cond(r):
            return r
    raise AssertionError(f"{name}: no record in pages {MID_PAGES} fits")


def same_page_forw(r: Dict, room: int = 0) -> bool:
    """``forw_lsa`` on the record's own page, with ``room`` bytes to spare before a next header
    would have to move to the next page."""
    if r["forw_lsa"] is None:
        return False
    p, o = L.split(r["lsa"])
    fp, fo = L.split(r["forw_lsa"])
    return fp == p and fo > o and fo + room + REC_HDR < AREA


def undoredo_with_lengths(r: Dict) -> bool:
    """A plain (unzipped) LOG_UNDOREDO_DATA with both payloads, its data header on its page, its
    ulength field outside the checksum samples, and room on its page to show a longer layout."""
    if r["type"] != "LOG_UNDOREDO_DATA" or r["undo_zipped"] or r["redo_zipped"]:
        return False
    if not (r["undo_stored_length"] and r["redo_stored_length"]):
        return False
    p, o = L.split(r["lsa"])
    dp, do = data_header_pos(r, DATA_HEADER_SIZE[r["type"]])
    return dp == p and not sampled(PAGE_HDR + do, 20) and same_page_forw(r, room=64)


# --------------------------------------------------------------------------------------------
# Running a read that must fail


def expect_error(cls, read: Callable[[], object]) -> walcdc.LogError:
    """Runs ``read``; it must raise exactly ``cls`` (or one of a tuple of classes): a typed walcdc
    error, not a panic (``pyo3_runtime.PanicException`` is no ``LogError`` and fails the test),
    fast and without a huge allocation."""
    classes = cls if isinstance(cls, tuple) else (cls,)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.monotonic()
    with pytest.raises(walcdc.LogError) as info:
        read()
    elapsed = time.monotonic() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    err = info.value
    names = "/".join(c.__name__ for c in classes)
    assert type(err) in classes, f"expected {names}, got {type(err).__name__}: {err}"
    assert elapsed < FAST_S, f"took {elapsed:.1f} s to fail"
    assert rss1 - rss0 < MAX_RSS_GROWTH, f"peak memory grew by {rss1 - rss0} bytes"
    return err


def walk(log, **kw):
    return log.records(**kw).read_all()


def fmt(key: Optional[int]) -> Optional[str]:
    return None if key is None else L.format_lsa(key)


def where(errors: Dict[str, walcdc.LogError]) -> Dict[str, Tuple[Optional[str], Optional[str]]]:
    """``{read: (file, "pageid|offset")}`` of errors, to compare every read in one assertion."""
    return {how: (e.file, fmt(e.lsa)) for how, e in errors.items()}


# --------------------------------------------------------------------------------------------
# 1. Truncated volumes


@pytest.mark.parametrize(
    "keep",
    [PAGE * 2560, PAGE * 400 + 123, 20971520 - 1, PAGE],
    ids=["half", "inside-the-data", "one-byte-short", "header-page-only"],
)
def test_truncated_active_volume(tmp_path, keep):
    d = copy_log("breadth", tmp_path)
    truncate(d / "breadth_lgat", keep)
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgat"
    assert err.lsa is None


P4K_ARCHIVES = {
    "p4k_lgar000": (0, 5117),
    "p4k_lgar001": (5118, 10235),
    "p4k_lgar002": (10236, 15353),
}


@pytest.mark.parametrize("archive", sorted(P4K_ARCHIVES))
@pytest.mark.parametrize("alone", [False, True], ids=["in-the-set", "alone"])
def test_truncated_archive(tmp_path, archive, alone):
    # "alone": the archive is the whole (archive-only) set; its header still says how long it is.
    d = copy_log("p4k", tmp_path)
    first, last = P4K_ARCHIVES[archive]
    truncate(d / archive, PAGE * 2000 + 100)
    target = [d / archive] if alone else d
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(target))
    assert err.file == archive
    # Where one is given, the LSA lies in the archive's page range.
    assert err.lsa is None or L.make(first, 0) <= err.lsa <= L.make(last, AREA - 1)


# --------------------------------------------------------------------------------------------
# 2. Checksums


def _page_starting_with_a_record() -> int:
    """A mid-log page whose first record starts at area offset 0, and whose previous record
    lies on the page before (so no earlier record's layout reaches into this page)."""
    recs = fixture_records("breadth")
    for prev, r in zip(recs, recs[1:]):
        p, o = L.split(r["lsa"])
        if p in MID_PAGES and o == 0 and L.split(prev["lsa"])[0] == p - 1:
            assert prev["forw_lsa"] == r["lsa"]
            return p
    raise AssertionError("no such page")


def _record_spanning_a_page() -> Tuple[Dict, int]:
    """A mid-log record that continues on the next page (its layout ends there, past offset 0,
    so its own bytes are on that page), and the next page."""

    def spans(r: Dict) -> bool:
        if r["forw_lsa"] is None:
            return False
        p, _ = L.split(r["lsa"])
        fp, fo = L.split(r["forw_lsa"])
        return fp > p + 1 or (fp == p + 1 and fo > 0)

    r = pick(spans)
    return r, L.split(r["lsa"])[0] + 1


@pytest.mark.parametrize("spot", ["last-16-bytes", "stored-checksum"])
def test_bad_checksum_on_a_data_page(tmp_path, spot):
    d = copy_log("breadth", tmp_path)
    pageid = _page_starting_with_a_record()
    path, page = page_location(d, pageid)
    at = page + (4090 if spot == "last-16-bytes" else 13)
    patch(path, at, bytes([read_at(path, at, 1)[0] ^ 0x5A]), break_checksum=True)

    log = walcdc.open_log(d)  # only the header page is checked at open
    err = expect_error(walcdc.ChecksumError, lambda: walk(log))
    assert err.file == "breadth_lgat"
    assert err.lsa == L.make(pageid, 0)
    # Random access to the record there finds the same page.
    err = expect_error(walcdc.ChecksumError, lambda: log.record(L.make(pageid, 0)))
    assert err.file == "breadth_lgat"
    assert err.lsa == L.make(pageid, 0)


def test_bad_checksum_on_a_payload_page(tmp_path):
    d = copy_log("breadth", tmp_path)
    rec, pageid = _record_spanning_a_page()
    path, page = page_location(d, pageid)
    patch(path, page + 4085, bytes([read_at(path, page + 4085, 1)[0] ^ 0x01]), break_checksum=True)

    log = walcdc.open_log(d)
    # The record whose payload needs the page is the one that fails, even without payloads.
    err = expect_error(walcdc.ChecksumError, lambda: walk(log))
    assert err.file == "breadth_lgat"
    assert err.lsa == rec["lsa"]
    err = expect_error(walcdc.ChecksumError, lambda: log.record(rec["lsa"]))
    assert err.lsa == rec["lsa"]
    # Everything before it was read.
    before = walk(log, end=rec["lsa"])
    assert before.num_rows == [r["lsa"] for r in fixture_records("breadth")].index(rec["lsa"])


@pytest.mark.parametrize(
    "name,volume",
    [("breadth", "breadth_lgat"), ("p4k", "p4k_lgat"), ("p4k", "p4k_lgar001")],
)
def test_bad_checksum_on_a_header_page(tmp_path, name, volume):
    d = copy_log(name, tmp_path)
    path = d / volume
    patch(path, 4088, bytes([read_at(path, 4088, 1)[0] ^ 0x80]), break_checksum=True)
    err = expect_error(walcdc.ChecksumError, lambda: walcdc.open_log(d))
    assert err.file == volume
    assert err.lsa is None


# --------------------------------------------------------------------------------------------
# 3. Not a log volume


@pytest.mark.parametrize(
    "name,volume,magic",
    [
        ("breadth", "breadth_lgat", b"CUBRID/LogActive"),
        ("p4k", "p4k_lgat", b"CUBRID/LogActive"),
        ("p4k", "p4k_lgar001", b"CUBRID/LogArchive"),
    ],
)
def test_wrong_magic(tmp_path, name, volume, magic):
    d = copy_log(name, tmp_path)
    patch(d / volume, PAGE_HDR, b"CUBRID/DataVol\0\0", expect=magic)
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log(d))
    assert err.file == volume


def test_archive_magic_on_the_active_volume(tmp_path):
    # An active header that calls itself an archive is not a valid archive either.
    d = copy_log("breadth", tmp_path)
    patch(d / "breadth_lgat", PAGE_HDR, b"CUBRID/LogArchive\0", expect=b"CUBRID/LogActive\0\0")
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgat"


@pytest.mark.parametrize("size", [8192, 65536, 3 * PAGE + 17])
def test_random_file_in_an_explicit_list(tmp_path, size):
    d = copy_log("breadth", tmp_path)
    junk = tmp_path / "notes.bin"
    junk.write_bytes(random.Random(size).randbytes(size))
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log([d / "breadth_lgat", junk]))
    assert err.file == "notes.bin"
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log([junk]))
    assert err.file == "notes.bin"


def test_random_file_named_like_an_archive(tmp_path):
    d = copy_log("breadth", tmp_path)
    (d / "breadth_lgar000").write_bytes(random.Random(7).randbytes(5 * PAGE))
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgar000"


@pytest.mark.parametrize(
    "field,value",
    [
        ("db_logpagesize", struct.pack("<h", 1000)),
        ("db_logpagesize", struct.pack("<h", 0)),
        ("db_logpagesize", struct.pack("<h", -4096)),
        ("npages", struct.pack("<i", 0)),
        ("npages", struct.pack("<i", -5)),
    ],
)
def test_impossible_active_header_fields(tmp_path, field, value):
    d = copy_log("breadth", tmp_path)
    offset = PAGE_HDR + {"db_logpagesize": 62, "npages": 88}[field]
    patch(d / "breadth_lgat", offset, value)
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgat"


def test_active_header_claims_more_pages_than_the_file_has(tmp_path):
    d = copy_log("breadth", tmp_path)
    patch(d / "breadth_lgat", PAGE_HDR + 88, struct.pack("<i", 0x7FFFFFFF), expect=b"\xff\x13\0\0")
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgat"
    # The message gives the page count the header implies (npages + 1 = 2**31), not an
    # overflowed 32-bit sum.
    counts = [int(n) for n in re.findall(r"says (-?\d+) pages", str(err))]
    assert counts == [2**31], str(err)


def test_active_header_claims_everything_is_archived(tmp_path):
    # nxarv_pageid (file offset 16 + 120) far past the append position of a cleanly shut down
    # log with no archives: the header contradicts itself. The pages are all still in the ring,
    # so reading them all is right, and so is a typed error; an empty walk is not.
    d = copy_log("breadth", tmp_path)
    patch(d / "breadth_lgat", PAGE_HDR + 120, struct.pack("<q", 1 << 40), expect=bytes(8))
    everything = len(fixture_records("breadth"))
    try:
        log = walcdc.open_log(d)
        rows = walk(log).num_rows
    except walcdc.LogError as err:
        assert err.file == "breadth_lgat"
        return
    assert rows == everything, f"{rows} records read, with no error; the log holds {everything}"


# --------------------------------------------------------------------------------------------
# 4. Volumes of another database


@pytest.mark.parametrize(
    "name,archive", [("crash", "crash4k_lgar000"), ("p4k", "p4k_lgar001"), ("p4k", "p4k_lgar002")]
)
def test_archive_of_another_database(tmp_path, name, archive):
    d = copy_log(name, tmp_path)
    path = d / archive
    # LOG_ARV_HEADER.db_creation: file offset 16 + 32, outside the checksum samples.
    created = struct.unpack("<q", read_at(path, PAGE_HDR + 32, 8))[0]
    assert created == walcdc.open_log(fixture_dir(name)).info()["db_creation"]
    patch(path, PAGE_HDR + 32, struct.pack("<q", created + 86400))
    err = expect_error(walcdc.MismatchedLogSetError, lambda: walcdc.open_log(d))
    assert err.file == archive


# --------------------------------------------------------------------------------------------
# 5. Missing archives


@pytest.mark.parametrize("as_list", [False, True], ids=["directory", "file-list"])
def test_missing_archive_in_the_middle(tmp_path, as_list):
    d = copy_log("p4k", tmp_path, skip=("p4k_lgar001",))
    target = sorted(d.iterdir()) if as_list else d
    err = expect_error(walcdc.MissingArchiveError, lambda: walcdc.open_log(target))
    # The archive after the gap (or the one before it) is named; the LSA is the first page the
    # missing archive held.
    assert err.file in ("p4k_lgar000", "p4k_lgar002")
    assert err.lsa == L.make(5118, 0)


# --------------------------------------------------------------------------------------------
# 6. Lying length fields


def _lying_length_target(d: Path) -> Tuple[Dict, Path, int]:
    rec = pick(undoredo_with_lengths)
    p, _ = L.split(rec["lsa"])
    dp, do = data_header_pos(rec, DATA_HEADER_SIZE[rec["type"]])
    path, at = area_location(d, dp, do + LENGTH_FIELD[rec["type"]])
    assert struct.unpack("<I", read_at(path, at, 4))[0] == rec["undo_stored_length"]
    return rec, path, at


@pytest.mark.parametrize(
    "lie",
    ["huge", "huge-zipped", "a-bit-too-large", "past-the-end"],
)
def test_lying_undo_length(tmp_path, lie):
    d = copy_log("breadth", tmp_path)
    rec, path, at = _lying_length_target(d)
    pageid = L.split(rec["lsa"])[0]
    value = {
        "huge": 0x7FFFFFF0,
        "huge-zipped": 0xFFFFFFF0,
        "a-bit-too-large": rec["undo_stored_length"] + 64,
        # Runs through every later page of the log and beyond its end (20 MiB volume).
        "past-the-end": (870 - pageid) * AREA,
    }[lie]
    patch(path, at, struct.pack("<I", value))
    log = walcdc.open_log(d)
    # A length running past the end of the files may also be reported as a truncation.
    cls = (
        (walcdc.CorruptRecordError, walcdc.TruncatedLogError)
        if lie == "past-the-end"
        else walcdc.CorruptRecordError
    )
    reads = {
        "records()": lambda: walk(log),
        "records(payloads=True)": lambda: walk(log, payloads=True),
        "record(lsa)": lambda: log.record(rec["lsa"]),
    }
    got = {how: expect_error(cls, read) for how, read in reads.items()}
    assert where(got) == {how: ("breadth_lgat", fmt(rec["lsa"])) for how in reads}


def test_zip_bit_on_an_empty_payload(tmp_path):
    # ulength = MAKE_ZIP_LEN(0): "zipped, 0 bytes stored" on a record whose undo slot is empty.
    # The layout still ends at forw_lsa, but no LZ4 payload (not even its 4-byte length prefix)
    # can be 0 bytes long.
    d = copy_log("breadth", tmp_path)

    def empty_undo(r: Dict) -> bool:
        if r["type"] != "LOG_UNDOREDO_DATA" or r["undo_stored_length"] != 0:
            return False
        p, _ = L.split(r["lsa"])
        dp, do = data_header_pos(r, DATA_HEADER_SIZE[r["type"]])
        return dp == p and not sampled(PAGE_HDR + do, 20) and same_page_forw(r)

    rec = pick(empty_undo)
    dp, do = data_header_pos(rec, DATA_HEADER_SIZE[rec["type"]])
    path, at = area_location(d, dp, do + LENGTH_FIELD[rec["type"]])
    patch(path, at, struct.pack("<I", 0x80000000), expect=bytes(4))
    log = walcdc.open_log(d)
    reads = {
        "records()": lambda: walk(log),
        "records(payloads=True)": lambda: walk(log, payloads=True),
        "record(lsa)": lambda: log.record(rec["lsa"]),
    }
    got = {how: expect_error(walcdc.CorruptRecordError, read) for how, read in reads.items()}
    assert where(got) == {how: ("breadth_lgat", fmt(rec["lsa"])) for how in reads}


def test_lying_length_fails_without_a_huge_allocation(tmp_path):
    d = copy_log("breadth", tmp_path)
    rec, path, at = _lying_length_target(d)
    patch(path, at, struct.pack("<I", 0x7FFFFFF0))
    log = walcdc.open_log(d)
    reads = {
        "records(payloads=True)": lambda: walk(log, payloads=True),
        "record(lsa)": lambda: log.record(rec["lsa"]),
    }
    got = {how: expect_error(walcdc.CorruptRecordError, read) for how, read in reads.items()}
    assert where(got) == {how: ("breadth_lgat", fmt(rec["lsa"])) for how in reads}


# --------------------------------------------------------------------------------------------
# 7. Garbage forw_lsa


@pytest.mark.parametrize(
    "garbage",
    ["back_lsa", "itself", "off-layout", "next-page", "far-beyond-the-end", "random", "null"],
)
def test_garbage_forw_lsa(tmp_path, garbage):
    d = copy_log("breadth", tmp_path)
    rec = pick(lambda r: r["back_lsa"] is not None and same_page_forw(r, room=8))
    p, o = L.split(rec["lsa"])
    fp, fo = L.split(rec["forw_lsa"])
    path, at = area_location(d, p, header_offset(rec) + 16)
    value = {
        "back_lsa": raw_lsa(rec["back_lsa"]),
        "itself": raw_lsa(rec["lsa"]),
        "off-layout": raw_lsa(L.make(fp, fo + 8)),
        "next-page": raw_lsa(L.make(fp + 1, 0)),
        "far-beyond-the-end": raw_lsa(L.make(100_000, 0)),
        "random": random.Random(42).randbytes(8),
        "null": raw_lsa(None),
    }[garbage]
    patch(path, at, value, expect=raw_lsa(rec["forw_lsa"]))
    log = walcdc.open_log(d)
    reads = {"records()": lambda: walk(log), "record(lsa)": lambda: log.record(rec["lsa"])}
    got = {how: expect_error(walcdc.CorruptRecordError, read) for how, read in reads.items()}
    assert where(got) == {how: ("breadth_lgat", fmt(rec["lsa"])) for how in reads}


# --------------------------------------------------------------------------------------------
# 8. Garbage record type


@pytest.mark.parametrize(
    "rectype",
    [0, 1, 9, 24, 53, 999, -1, 0x7FFFFFFF, -0x80000000, 17],
    ids=lambda t: f"type{t}",
)
def test_garbage_record_type(tmp_path, rectype):
    # 0 and 53 are the enum's bounds, 1, 9 and 24 obsolete values nothing writes; 17
    # (LOG_COMMIT) is a real type whose layout does not fit the record's bytes.
    d = copy_log("breadth", tmp_path)
    rec = pick(lambda r: r["type"] == "LOG_UNDOREDO_DATA" and same_page_forw(r))
    p, _ = L.split(rec["lsa"])
    path, at = area_location(d, p, header_offset(rec) + 28)
    patch(path, at, struct.pack("<i", rectype), expect=struct.pack("<i", TYPE_NUMBER[rec["type"]]))
    log = walcdc.open_log(d)
    reads = {"records()": lambda: walk(log), "record(lsa)": lambda: log.record(rec["lsa"])}
    got = {how: expect_error(walcdc.CorruptRecordError, read) for how, read in reads.items()}
    assert where(got) == {how: ("breadth_lgat", fmt(rec["lsa"])) for how in reads}


def test_end_of_log_marker_in_the_middle_of_a_clean_log(tmp_path):
    # A record's type overwritten with LOG_END_OF_LOG (35), far before the end of a log that was
    # shut down cleanly: its header's append_lsa (exact after a clean shutdown, spec §11.3) lies
    # hundreds of pages later, and everything up to there must be readable. Stopping at the
    # marker would silently drop the rest of the log.
    d = copy_log("breadth", tmp_path)
    rec = pick(lambda r: r["type"] == "LOG_UNDOREDO_DATA" and same_page_forw(r))
    p, _ = L.split(rec["lsa"])
    path, at = area_location(d, p, header_offset(rec) + 28)
    patch(path, at, struct.pack("<i", 35), expect=struct.pack("<i", TYPE_NUMBER[rec["type"]]))
    log = walcdc.open_log(d)
    info = log.info()
    assert info["is_shutdown"] and info["header_append_lsa"] > rec["lsa"]
    err = expect_error(walcdc.CorruptRecordError, lambda: walk(log))
    assert (err.file, fmt(err.lsa)) == ("breadth_lgat", fmt(rec["lsa"]))


# --------------------------------------------------------------------------------------------
# 9. Corrupt LZ4 payloads


def _zipped_target(d: Path, slot: str) -> Tuple[Dict, Path, int]:
    """A mid-log record with a zipped ``slot`` payload that lies whole on the record's page."""

    def fits(r: Dict) -> bool:
        if r["type"] not in DATA_HEADER_SIZE or not r[f"{slot}_zipped"]:
            return False
        n = r[f"{slot}_stored_length"]
        p, _ = L.split(r["lsa"])
        pp, po = payload_pos(r, slot)
        return n >= 24 and pp == p and not sampled(PAGE_HDR + po, n)

    rec = pick(fits)
    pp, po = payload_pos(rec, slot)
    path, at = area_location(d, pp, po)
    # The zip prefix holds the original length (spec §9.1): the damage lands on the payload.
    assert struct.unpack("<I", read_at(path, at, 4))[0] == rec[f"{slot}_length"]
    return rec, path, at


@pytest.mark.parametrize("slot", ["undo", "redo"])
@pytest.mark.parametrize("damage", ["lz4-block", "lz4-first-token", "prefix-huge", "prefix-zero"])
def test_corrupt_zipped_payload(tmp_path, slot, damage):
    d = copy_log("breadth", tmp_path)
    rec, path, at = _zipped_target(d, slot)
    n = rec[f"{slot}_stored_length"]
    if damage == "lz4-block":  # the whole LZ4 block: a literal run longer than the input
        patch(path, at + 4, b"\xff" * (n - 4))
    elif damage == "lz4-first-token":  # no literals first: a match with nothing to copy from
        patch(path, at + 4, b"\x00")
    elif damage == "prefix-huge":
        patch(path, at, struct.pack("<I", 0x7FFFFFFF))
    else:
        patch(path, at, struct.pack("<I", 0))
    log = walcdc.open_log(d)
    if damage.startswith("lz4"):
        # Without payloads nothing is decoded: the walk is whole.
        assert walk(log).num_rows == len(fixture_records("breadth"))
    reads = {
        "records(payloads=True)": lambda: walk(log, payloads=True),
        "record(lsa)": lambda: log.record(rec["lsa"]),
    }
    got = {how: expect_error(walcdc.CorruptRecordError, read) for how, read in reads.items()}
    # The error names the record (its LSA, as log.record() takes it) and its volume.
    assert where(got) == {how: ("breadth_lgat", fmt(rec["lsa"])) for how in reads}


def test_corrupt_zipped_payload_in_an_archive(tmp_path):
    # p4k: a record held by archive p4k_lgar001; the error names that volume.
    d = copy_log("p4k", tmp_path)
    pristine = walcdc.open_log(fixture_dir("p4k"))
    t = pristine.records(end=L.make(7300, 0)).read_all()
    t = t.filter(pc.greater_equal(t.column("lsa"), L.make(7000, 0)))

    def fits(r: Dict) -> bool:
        if r["type"] not in DATA_HEADER_SIZE or not r["redo_zipped"] or r["undo_stored_length"]:
            return False
        n = r["redo_stored_length"]
        p, _ = L.split(r["lsa"])
        pp, po = payload_pos(r, "redo")
        return n >= 24 and pp == p and not sampled(PAGE_HDR + po, n)

    rec = next(r for r in t.to_pylist() if fits(r))
    assert rec["file"] == "p4k_lgar001"
    pp, po = payload_pos(rec, "redo")
    path, at = area_location(d, pp, po)
    assert path.name == "p4k_lgar001"
    assert struct.unpack("<I", read_at(path, at, 4))[0] == rec["redo_length"]
    patch(path, at + 4, b"\xff" * (rec["redo_stored_length"] - 4))
    log = walcdc.open_log(d)
    reads = {
        "records(payloads=True)": lambda: walk(
            log, start=rec["lsa"], end=rec["forw_lsa"], payloads=True
        ),
        "record(lsa)": lambda: log.record(rec["lsa"]),
    }
    got = {how: expect_error(walcdc.CorruptRecordError, read) for how, read in reads.items()}
    assert where(got) == {how: ("p4k_lgar001", fmt(rec["lsa"])) for how in reads}


# --------------------------------------------------------------------------------------------
# 10. Empty and tiny files


def test_empty_active_volume(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    (d / "breadth_lgat").write_bytes(b"")
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgat"
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(d / "breadth_lgat"))
    assert err.file == "breadth_lgat"


def test_volume_cut_to_100_bytes(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    (d / "breadth_lgat").write_bytes(read_at(fixture_dir("breadth") / "breadth_lgat", 0, 100))
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgat"


def test_100_random_bytes_named_like_an_archive(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    (d / "db_lgar000").write_bytes(random.Random(100).randbytes(100))
    with pytest.raises(walcdc.LogError) as info:
        walcdc.open_log(d)
    # Too short for a header and not a header either: both answers are right.
    assert type(info.value) in (walcdc.TruncatedLogError, walcdc.BadHeaderError)
    assert info.value.file == "db_lgar000"


@pytest.mark.parametrize("name", ["notes.txt", "db_lgat"])
def test_a_short_text_file_is_not_a_log_volume(tmp_path, name):
    # 25 bytes of text: the 9 bytes where the magic starts say "not a log", not "cut short".
    text = tmp_path / name
    text.write_bytes(b"hello, this is not a log\n")
    assert text.stat().st_size == 25
    err = expect_error(walcdc.BadHeaderError, lambda: walcdc.open_log(text))
    assert err.file == name and "not a CUBRID log volume" in str(err)


@pytest.mark.parametrize("size", [0, 100])
def test_empty_archive_next_to_a_good_volume(tmp_path, size):
    d = copy_log("breadth", tmp_path)
    (d / "breadth_lgar000").write_bytes(b"\0" * size)
    err = expect_error(walcdc.TruncatedLogError, lambda: walcdc.open_log(d))
    assert err.file == "breadth_lgar000"


# --------------------------------------------------------------------------------------------
# 11. Start LSAs that are not records


@pytest.mark.parametrize("start", ["3|5", "400|4", "3|4080", "3|4090", "400|32767"])
def test_start_lsa_that_cannot_hold_a_record(start, tmp_path):
    # A position no record starts at is the caller's mistake, and the same one everywhere:
    # records(), record() and read_changes() give the same error, naming the volume and LSA.
    d = copy_log("breadth", tmp_path)
    log = walcdc.open_log(d)
    for read in (
        lambda: walk(log, start=start),
        lambda: log.record(start),
        lambda: walcdc.read_changes(log, start=start),
    ):
        err = expect_error(walcdc.InvalidArgumentError, read)
        assert err.file == "breadth_lgat"
        assert err.lsa == L.parse(start)
        assert f"no record starts at LSA {start}" in str(err)


def test_start_lsa_inside_a_record(tmp_path):
    # Aligned, but in the middle of a record's header: no record starts there.
    d = copy_log("breadth", tmp_path)
    rec = pick(lambda r: r["type"] == "LOG_UNDOREDO_DATA" and same_page_forw(r))
    start = rec["lsa"] + 8
    log = walcdc.open_log(d)
    for read in (
        lambda: walk(log, start=start),
        lambda: log.record(start),
        lambda: walcdc.read_changes(log, start=start),
    ):
        err = expect_error(walcdc.InvalidArgumentError, read)
        assert err.file == "breadth_lgat"
        assert err.lsa == start


@pytest.mark.parametrize(
    "start", ["4000|0", "5200|0", "100000|0", f"{(1 << 47) - 1}|0", f"{(1 << 48) - 2}|8"]
)
def test_start_lsa_beyond_the_end(start, tmp_path):
    # A start past the end of the log is refused, fast, the same way by every reader.
    d = copy_log("breadth", tmp_path)
    log = walcdc.open_log(d)
    t0 = time.monotonic()
    for read in (lambda: walk(log, start=start), lambda: walcdc.read_changes(log, start=start)):
        err = expect_error(walcdc.InvalidArgumentError, read)
        assert err.lsa == L.parse(start)
        assert "beyond the end of the log" in str(err)
    assert time.monotonic() - t0 < FAST_S


@pytest.mark.parametrize("at", ["4000|0", "100000|0", f"{(1 << 47) - 1}|0"])
def test_random_access_beyond_the_end(at, tmp_path):
    # README / walcdc.errors: InvalidArgumentError is "an argument that does not fit the log (an
    # LSA outside it ...)"; the end of the log itself already gets it.
    d = copy_log("breadth", tmp_path)
    log = walcdc.open_log(d)
    expect_error(walcdc.InvalidArgumentError, lambda: log.record(log.info()["end_lsa"]))
    expect_error(walcdc.InvalidArgumentError, lambda: log.record(at))


def test_start_at_the_end_of_the_log(tmp_path):
    d = copy_log("breadth", tmp_path)
    log = walcdc.open_log(d)
    end = log.info()["end_lsa"]
    assert walk(log, start=end).num_rows == 0
    assert log.last_walk == {
        "end_lsa": end,
        "end_reason": "end_of_log",
        "skipped": [],
        "unplaced": [],
        "beyond_end": None,
    }


def test_garbled_values_are_flagged_not_passed_as_good(tmp_path):
    """A value whose bytes are not a value of its type (a DATE beyond year 9999, a NUMERIC
    wider than its precision) makes the event say so in decode_error, in read_changes and
    read_table_changes alike; good rows beside it decode."""
    from walcdc.testing import LogWriter, Table, Workload, cdc_oid, typed_row

    table_oid = cdc_oid(0, 229, 1)
    w = LogWriter(page_size=4096, active_pages=16, archive_pages=8)
    wl = Workload(w)
    table = Table.create(
        "dba.t_d",
        table_oid,
        [
            {"name": "id", "type": "INTEGER"},
            {"name": "n", "type": "NUMERIC", "precision": 4, "scale": 2},
            {"name": "d", "type": "DATE"},
        ],
    )
    t = wl.begin(1)
    t.create_table(table, statement="create table t_d (id int, n numeric(4,2), d date)")
    t.commit()
    rep = table.representation()
    assert [c["name"] for c in rep[1]] == ["d", "id", "n"]  # storage order: the bytes below
    good = typed_row(rep, ['"2020-01-02"', "1", '"12.34"'])[8:]  # the body after the header
    far_date = good[:0] + (0x7FFFFFF0).to_bytes(4, "big") + good[4:]
    wide_number = good[:8] + (10**6).to_bytes(16, "big") + good[24:]
    t = wl.begin(2)
    for slot, body in enumerate([good, far_date, wide_number], 1):
        t.insert(table_oid, body, page=100, slot=slot)
    t.commit()
    w.finish(tmp_path)

    plain = walcdc.read_changes(tmp_path, ops="insert").read_all().to_pylist()
    assert [json.loads(e["after"])["d"] for e in plain] == ["2020-01-02", None, "2020-01-02"]
    assert plain[0]["decode_error"] is None
    assert "column d" in plain[1]["decode_error"] and "9999" in plain[1]["decode_error"]
    typed = walcdc.read_table_changes(tmp_path, "t_d", ops="insert").read_all().to_pylist()
    assert typed[0]["after"] == {
        "id": 1,
        "n": decimal.Decimal("12.34"),
        "d": datetime.date(2020, 1, 2),
    }
    assert typed[0]["decode_error"] is None
    assert typed[1]["decode_error"] == plain[1]["decode_error"]
    # 10000.00 does not fit NUMERIC(4,2).
    assert json.loads(plain[2]["after"])["n"] is None and "4 digits" in plain[2]["decode_error"]
    assert typed[2]["decode_error"] == plain[2]["decode_error"]


def _hostile_copy(tmp_path, name):
    """A copy of a fixture's volumes with one of ``../shared/hostile/``'s edits applied, the
    checksums of the pages it names recomputed."""
    from conftest import SHARED
    from walcdc.testing import page_with_checksum

    spec = json.loads((SHARED / "hostile" / name).read_text())
    src = fixture_dir(spec["fixture"])
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    for volume, offset, data in spec["edits"]:
        with open(tmp_path / volume, "r+b") as fh:
            fh.seek(offset)
            fh.write(bytes.fromhex(data))
    ps = spec["ps"]
    for volume, offset in spec["fixpages"]:
        with open(tmp_path / volume, "r+b") as fh:
            fh.seek(offset)
            page = fh.read(ps)
            fh.seek(offset)
            fh.write(page_with_checksum(page))
    return src


def test_record_with_null_forward_on_an_archived_page_is_warned(tmp_path):
    """../shared/hostile/p4k_archived_null_forw.json: a supplemental record on an archived page
    with a NULL forw_lsa. The walk goes on at the next page; the record (and the rest of its
    page) is reported, not skipped silently."""
    fixture_dir("p4k")  # skips (fails in CI) without the shared fixtures
    src = _hostile_copy(tmp_path, "p4k_archived_null_forw.json")
    log = walcdc.open_log(tmp_path)
    with pytest.warns(walcdc.UnplacedRecordsSkipped, match=re.escape("3846|1048")):
        log.records().read_all()
    assert log.last_walk["unplaced"] == [L.parse("3846|1048")]
    stream = walcdc.read_changes(tmp_path)
    with pytest.warns(walcdc.UnplacedRecordsSkipped):
        damaged = stream.read_all().num_rows
    assert stream.unplaced == [L.parse("3846|1048")]
    assert damaged < walcdc.read_changes(src).read_all().num_rows


def test_unfinished_transaction_restarted_is_warned_and_counted(tmp_path):
    """../shared/hostile/p4k_null_prev_tranlsa.json: one record inside the huge transaction
    claims to start a new transaction under the same trid. The events dropped with the
    unfinished one are counted and warned about, never lost silently."""
    from walcdc.cli import main as cli_main

    fixture_dir("p4k")  # skips (fails in CI) without the shared fixtures
    src = _hostile_copy(tmp_path, "p4k_null_prev_tranlsa.json")
    clean = walcdc.read_changes(src).read_all().num_rows
    stream = walcdc.read_changes(tmp_path)
    with pytest.warns(walcdc.UnfinishedTransactionDropped, match="dropped"):
        damaged = stream.read_all().num_rows
    stats = stream.stats
    assert stats["restarted_transactions"] == 1
    assert 0 < stats["abandoned_events"] and damaged < clean
    # The command line says so too.
    from click.testing import CliRunner

    r = CliRunner().invoke(cli_main, ["extract", str(tmp_path), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 0 and "walcdc: note:" in r.stderr and "dropped" in r.stderr


def test_readable_records_after_a_torn_end_are_warned(tmp_path):
    """../shared/hostile/crash_relabelled_pages_after_append.json: two pages past the header's
    append LSA of the crashed log swapped and relabelled. The walk ends at the torn record, as
    the engine's recovery would; the readable pages after it are reported, not lost silently."""
    from click.testing import CliRunner

    from walcdc.cli import main as cli_main

    fixture_dir("crash")  # skips (fails in CI) without the shared fixtures
    src = _hostile_copy(tmp_path, "crash_relabelled_pages_after_append.json")
    clean = walcdc.open_log(src)
    clean.records().read_all()
    assert clean.last_walk["beyond_end"] is None  # the real crash end: nothing readable after it
    log = walcdc.open_log(tmp_path)
    with pytest.warns(walcdc.RecordsBeyondEndSkipped, match="later page"):
        log.records().read_all()
    walk = log.last_walk
    assert walk["end_reason"] == "torn_record"
    beyond = walk["beyond_end"]
    assert beyond["end_lsa"] == walk["end_lsa"]
    assert beyond["first_lsa"] > walk["end_lsa"] and beyond["pages"] >= 2
    # Every page from the first readable one to the real end holds records.
    real_end = L.split(clean.last_walk["end_lsa"])[0]
    assert beyond["pages"] >= real_end - L.split(beyond["first_lsa"])[0]

    stream = walcdc.read_changes(tmp_path)
    with pytest.warns(walcdc.RecordsBeyondEndSkipped):
        damaged = stream.read_all().num_rows
    assert stream.beyond_end == beyond
    assert stream.stats["pages_beyond_end"] == beyond["pages"]
    assert damaged < walcdc.read_changes(src).read_all().num_rows

    r = CliRunner().invoke(cli_main, ["extract", str(tmp_path), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 0 and "walcdc: note:" in r.stderr and "readable records" in r.stderr
