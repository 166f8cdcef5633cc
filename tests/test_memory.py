"""Memory: a transaction whose buffered events exceed the bound spills to a temporary file and
comes back identical, and the reader's peak RSS stays bounded (measured in subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import fixture_dir

ROWS = 12_000
BODY = 6_000  # bytes of incompressible row data: ~72 MB of after images in one transaction

WRITE = textwrap.dedent(
    f"""
    import os, sys
    from walcdc.testing import LogWriter, Workload, cdc_oid
    w = LogWriter(page_size=16384, active_pages=1024, archive_pages=512)
    wl = Workload(w)
    t = wl.begin(7)
    for i in range({ROWS}):
        t.insert(cdc_oid(0, 229, 1), os.urandom({BODY}), page=100 + i // 100, slot=i % 100 + 1)
    t.commit()
    w.finish(sys.argv[1])
    """
)

READ = textwrap.dedent(
    """
    import hashlib, json, sys
    import walcdc
    log = walcdc.open_log(sys.argv[1])
    stream = walcdc.read_changes(log, memory_limit=int(sys.argv[2]), mode="after", batch_size=512)
    h = hashlib.sha256()
    n = 0
    for batch in stream:
        for col in ("lsa", "row_oid", "after_image"):
            for v in batch.column(col).to_pylist():
                h.update(repr(v).encode())
        n += batch.num_rows
    # VmHWM: this process's peak RSS (ru_maxrss would carry the parent's across exec).
    peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status")
                if l.startswith("VmHWM:"))
    print(json.dumps({"rows": n, "digest": h.hexdigest(), "peak_rss": peak,
                      "spilled": stream.stats["spilled_events"],
                      "peak_buffered": stream.stats["peak_buffered_bytes"]}))
    """
)


def run(code, *args):
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True, text=True
    )
    return out.stdout


def test_huge_transaction_spills_and_peak_memory_is_bounded(tmp_path):
    run(WRITE, tmp_path)
    bound = 8 << 20
    small = json.loads(run(READ, tmp_path, bound))
    large = json.loads(run(READ, tmp_path, 1 << 40))
    assert small["rows"] == large["rows"] == ROWS
    assert small["digest"] == large["digest"]
    assert small["spilled"] > 0 and large["spilled"] == 0
    images = ROWS * BODY
    # Unbounded, the whole transaction is held; bounded, never more than the bound.
    assert large["peak_buffered"] > images
    assert small["peak_buffered"] <= bound + 2 * BODY + 4096
    # Peak RSS (which also counts the mapped log pages both runs touch) differs by at least
    # most of the buffered images.
    assert large["peak_rss"] - small["peak_rss"] > images // 2, (small, large)
    print(
        f"\npeak RSS bounded {small['peak_rss'] >> 20} MiB, unbounded "
        f"{large['peak_rss'] >> 20} MiB, images {images >> 20} MiB"
    )


RESIDENT_AFTER_OPEN = textwrap.dedent(
    """
    import json, os, re, sys
    import walcdc
    log = walcdc.open_log(sys.argv[1])
    folder = os.path.realpath(sys.argv[1])
    # Every mapping of a volume file, and the memory of it resident in this process.
    resident, path = {}, None
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if re.fullmatch("[0-9a-f]+-[0-9a-f]+", parts[0]):  # a mapping (a file's, or none)
            path = parts[5] if len(parts) >= 6 and parts[5].startswith(folder) else None
        elif path and parts[0] == "Rss:":
            name = os.path.basename(path)
            resident[name] = resident.get(name, 0) + int(parts[1])
    print(json.dumps(resident))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_opening_a_log_set_leaves_none_of_its_volumes_resident():
    """Opening reads each volume's header page through its map, and the kernel maps what the
    page cache holds around it (about 1.7 MB a volume on this machine's kernel: 440 MB for a
    16 GB set of 258 volumes, held until a walk passed each volume): what opening mapped is
    dropped, so that resident memory does not grow with the number of volumes."""
    folder = fixture_dir("p4k")
    resident = json.loads(run(RESIDENT_AFTER_OPEN, folder))
    assert len(resident) >= 3, resident  # the volumes are mapped
    assert all(kb == 0 for kb in resident.values()), resident


RESIDENT_AFTER_THREADS = RESIDENT_AFTER_OPEN.replace(
    "log = walcdc.open_log(sys.argv[1])",
    "log = walcdc.open_log(sys.argv[1])\n"
    "page = log.header()['page_size']\n"
    "for _ in walcdc.read_changes(log, threads=2, split_bytes=16 * page, decode=False):\n"
    "    pass",
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_a_threaded_read_leaves_little_of_the_log_mapped():
    """A plan's ranges release their pages when they end, with those before them that they
    read back (the transactions open at their starts), and the catalog's reduction walks are
    released once the catalog is built: what stays mapped is the end state's own tail read.
    Without it, each of hundreds of tiny ranges left pages mapped around it (54 of the
    fixture's 80 MB; at 16 GB, the threaded stream's RSS grew by 150-320 MB over 4 GB)."""
    folder = fixture_dir("p4k")
    log_kb = sum(p.stat().st_size for p in folder.iterdir()) // 1024
    resident = json.loads(run(RESIDENT_AFTER_THREADS, folder))
    assert len(resident) >= 3, resident
    assert sum(resident.values()) < log_kb // 10, (resident, log_kb)


def test_a_batch_of_decoded_rows_is_bounded_by_its_json_too(tmp_path):
    """A change batch ends past 8 MiB of event bytes, decoded rows' JSON counted: text that
    compresses well in the log (an image of a few bytes) can be many times longer as JSON (a
    control character is six bytes escaped), and a batch bounded by its images alone would
    hold all of it."""
    from walcdc.testing import LogWriter, Table, Workload, cdc_oid

    klass = cdc_oid(0, 300, 1)
    table = Table.create(
        "dba.t_wide", klass, [{"name": "a", "type": "INT"}, {"name": "b", "type": "VARCHAR"}]
    )
    text = "\x01" * 4000
    rows = 3000
    w = LogWriter(page_size=16384, active_pages=1024, archive_pages=512)
    t = Workload(w).begin(1)
    t.create_table(table)
    for i in range(rows):
        values = {"a": str(i), "b": json.dumps(text)}
        t.insert_row(klass, table.representation(), values, 500 + i // 100, i % 100 + 1)
    t.commit()
    w.finish(tmp_path)

    import walcdc

    one_row = len(json.dumps({"a": rows, "b": text}))
    assert one_row > 6 * len(text)
    batches = list(walcdc.read_changes(walcdc.open_log(tmp_path), batch_size=1 << 16))
    afters = [
        json.loads(after)
        for b in batches
        for op, after in zip(b.column("op").to_pylist(), b.column("after").to_pylist())
        if op == "insert"
    ]
    assert afters == [{"a": i, "b": text} for i in range(rows)]
    # Each batch's JSON column: at most 8 MiB and the event that crossed it.
    for b in batches:
        after = sum(len(v) for v in b.column("after").to_pylist() if v is not None)
        assert after <= (8 << 20) + one_row, (b.num_rows, after)
    assert len(batches) >= rows * one_row // (8 << 20)
    # A typed table's batch: its values counted alike.
    batches = list(walcdc.read_table_changes(walcdc.open_log(tmp_path), "dba.t_wide"))
    texts = [r["b"] for b in batches for r in b.column("after").to_pylist() if r is not None]
    assert texts == [text] * rows
    for b in batches:
        held = sum(len(r["b"]) for r in b.column("after").to_pylist() if r is not None)
        assert held <= (8 << 20) + len(text), (b.num_rows, held)
    assert len(batches) >= rows * len(text) // (8 << 20)
