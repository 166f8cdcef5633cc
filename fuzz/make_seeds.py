"""Seed corpora of the log-level fuzz targets (logset, walk_from, changes): small logs from the
test writer (typed tables with every column type, ALTERs, interleaved transactions, aborts,
savepoint rollbacks, failed statements, archives), in the input layout of
``walcdc_core::fuzzing::log_from_input``. The decoder-level seeds come from the fixtures
(``cargo run --example fuzz_seeds``). Usage: ``python fuzz/make_seeds.py [OUT_DIR] [COUNT]``;
``python fuzz/make_seeds.py --dict`` rewrites ``fuzz/log.dict`` (the format's magic values for
libFuzzer) from walcdc's own tables."""

from __future__ import annotations

import hashlib
import pathlib
import random
import struct
import sys
import tempfile
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis.errors import NonInteractiveExampleWarning  # noqa: E402

warnings.simplefilter("ignore", NonInteractiveExampleWarning)

import test_change_properties as plain  # noqa: E402
import test_typed_properties as typed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from walcdc.testing import LogWriter, Table, Workload  # noqa: E402

MAX_INPUT = 1 << 17


def as_input(directory: pathlib.Path, page_size: int) -> bytes | None:
    """The log in ``log_from_input``'s layout: the newest archive (if any) and the active
    volume."""
    active = directory / "walcdc_lgat"
    archives = sorted(directory.glob("walcdc_lgar*"))
    size_bits = {4096: 0, 8192: 1, 16384: 2}[page_size] << 3
    if archives:
        arv = archives[-1].read_bytes()
        data = bytes([size_bits | (1 << 1)]) + struct.pack("<I", len(arv)) + arv
    else:
        data = bytes([size_bits])
    data += active.read_bytes()
    return data if len(data) <= MAX_INPUT else None


def typed_log(rnd: random.Random, directory: pathlib.Path) -> int:
    page_size = rnd.choice([4096, 4096, 8192])
    w = LogWriter(page_size=page_size, active_pages=rnd.randint(4, 10), archive_pages=3)
    wl = Workload(w)
    cols = [
        dict(c, name=f"c{i}")
        for i, c in enumerate(st.lists(typed.column(), min_size=1, max_size=8).example())
    ]
    table = Table.create("dba.t_fz", typed.CLASS, cols)
    t = wl.begin(1)
    t.create_table(table, statement="create table t_fz (...)")
    t.commit()
    slot = 0
    for k in range(rnd.randint(1, 4)):
        t = wl.begin(2 + k % 2)
        for _ in range(rnd.randint(1, 4)):
            slot += 1
            values = typed.row_values(table.columns).example()
            t.insert_row(
                typed.CLASS, table.representation(), typed.as_texts(values), typed.ROW_PAGE, slot
            )
        if rnd.random() < 0.3:
            new = table.add_column(dict(typed.column().example(), name=f"a{k}"))
            t.alter_table(table, new, statement="alter table t_fz add column ...")
            table = new
        t.commit() if rnd.random() < 0.8 else t.abort()
    w.finish(directory)
    return page_size


def plain_log(rnd: random.Random, directory: pathlib.Path) -> int:
    spec = plain.workload().example()
    page_size, active, archive, txns, schedule, bodies = spec
    spec = (page_size, max(active, 6), archive, txns[:4], schedule, bodies)
    plain.write(spec, directory)
    return page_size


def write_dict(path: pathlib.Path) -> None:
    from walcdc import _native

    def q(b: bytes) -> str:
        return '"' + "".join(f"\\x{c:02x}" for c in b) + '"'

    lines = [
        "# Magic values of the CUBRID log format for libFuzzer (-dict=fuzz/log.dict).",
        "# Made by fuzz/make_seeds.py --dict; record types, recovery indexes and supplement",
        "# types as 4-byte little-endian integers, NULL LSAs, volume magics, heap record types.",
        'active_magic="CUBRID/LogActive"',
        'archive_magic="CUBRID/LogArchive"',
        "null_lsa=" + q(b"\xff" * 8),
    ]
    lines += [f"{name}={q(struct.pack('<i', n))}" for n, name in _native.record_types()]
    lines += [f"{name}={q(struct.pack('<i', n))}" for n, name in _native.rcv_indexes() if name]
    lines += [f"SUPP_{name}={q(struct.pack('<i', n))}" for n, name in _native.supplement_types()]
    heap = [
        "REC_UNKNOWN", "REC_ASSIGN_ADDRESS", "REC_HOME", "REC_NEWHOME", "REC_RELOCATION",
        "REC_BIGONE", "REC_MARKDELETED", "REC_DELETED_WILL_REUSE", "REC_MVCC_NEXT_VERSION",
    ]  # fmt: skip
    lines += [f"{name}={q(struct.pack('<h', n))}" for n, name in enumerate(heap)]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    if sys.argv[1:] == ["--dict"]:
        write_dict(ROOT / "fuzz" / "log.dict")
        return
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fuzz" / "corpus"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    rnd = random.Random(20261125)
    written = 0
    for i in range(count):
        with tempfile.TemporaryDirectory() as d:
            page_size = (typed_log if i % 2 == 0 else plain_log)(rnd, pathlib.Path(d))
            data = as_input(pathlib.Path(d), page_size)
        if data is None:
            continue
        name = hashlib.sha1(data).hexdigest()[:16]
        for target in ("logset", "changes"):
            (out / target).mkdir(parents=True, exist_ok=True)
            (out / target / name).write_bytes(data)
        (out / "walk_from").mkdir(parents=True, exist_ok=True)
        start = struct.pack("<Q", (2 << 16) | rnd.randrange(0, 4096, 8))
        (out / "walk_from" / name).write_bytes(start + data)
        written += 1
    print(f"{written} log seeds in {out}")


if __name__ == "__main__":
    main()
