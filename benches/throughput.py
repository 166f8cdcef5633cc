"""Throughput against simply reading the same bytes, in one run.

    python benches/throughput.py                 # the largest fixture under ../shared
    python benches/throughput.py PATH [--json OUT] [--repeat N]

Measures, on one log set (warm page cache, one core, best of N runs):
  read      reading every volume file of the set start to end (1 MiB reads): the floor
  lsa_type  LogSet.records(columns=["lsa", "type"]): the walk building two columns
  walk      LogSet.records(): every record walked, checked and built into Arrow batches
  payloads  LogSet.records(payloads=True): also every payload gathered, unzipped, DIFF rebuilt
  changes   read_changes(decode=False): committed change events with full before/after images
            (chase, per-transaction buffers, partial-rollback filtering, Arrow batches)
  typed     read_changes(): the same, every image decoded to typed values (JSON) as well
  engine    read_changes(committed_only=False, decode=False): CUBRID's own CDC stream
  table     read_changes(tables=[T], decode=False) for the table T with the most events
  table_typed  read_table_changes(T): the same events, before/after typed Arrow structs
and reports MB/s (volume bytes / time), records/s or events/s, and the time ratio to `read`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def largest_fixture() -> Path:
    from conftest import ALL_FIXTURES, FIXTURES, fixture_dir

    def size(name: str) -> int:
        return sum(f.stat().st_size for f in (FIXTURES / name / "log").glob("*.xz"))

    return fixture_dir(max(ALL_FIXTURES, key=size))


def volume_files(path: Path) -> List[Path]:
    import walcdc

    return [Path(v["path"]) for v in walcdc.open_log(path)._native.header_info()["volumes"]]


def read_bytes(files: List[Path]) -> int:
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    n = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while True:
                k = fh.readinto(view)
                if not k:
                    break
                n += k
    return n


def walk(path: Path, payloads: bool) -> int:
    import walcdc

    log = walcdc.open_log(path)
    return sum(b.num_rows for b in log.records(payloads=payloads, on_encrypted="skip"))


def lsa_type(path: Path) -> int:
    import walcdc

    log = walcdc.open_log(path)
    return sum(b.num_rows for b in log.records(columns=["lsa", "type"], on_encrypted="skip"))


def busiest_table(path: Path) -> int:
    """The class OID of the table with the most row changes."""
    import pyarrow.compute as pc

    import walcdc

    t = walcdc.read_changes(path, decode=False, mode="id", on_encrypted="skip").read_all()
    counts = pc.value_counts(t.column("class_oid").drop_null())
    return max(counts.to_pylist(), key=lambda x: x["counts"])["values"]


def table_changes(path: Path, table: int, typed: bool) -> int:
    import walcdc

    if typed:
        stream = walcdc.read_table_changes(path, table, on_encrypted="skip")
    else:
        stream = walcdc.read_changes(path, tables=[table], decode=False, on_encrypted="skip")
    return sum(b.num_rows for b in stream)


def changes(path: Path, committed_only: bool, decode: bool) -> int:
    import walcdc

    stream = walcdc.read_changes(
        path, committed_only=committed_only, on_encrypted="skip", decode=decode
    )
    return sum(b.num_rows for b in stream)


def best_of(fn: Callable[[], int], repeat: int) -> Dict[str, float]:
    fn()  # warm the page cache and the code
    times = []
    result = 0
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return {"seconds": min(times), "median": sorted(times)[len(times) // 2], "result": result}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("path", nargs="?", help="log directory (default: largest fixture)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="also write the results as JSON here")
    args = ap.parse_args(argv)

    path = Path(args.path) if args.path else largest_fixture()
    files = volume_files(path)
    nbytes = sum(f.stat().st_size for f in files)
    mb = nbytes / 1e6

    read = best_of(lambda: read_bytes(files), args.repeat)
    two = best_of(lambda: lsa_type(path), args.repeat)
    walked = best_of(lambda: walk(path, False), args.repeat)
    full = best_of(lambda: walk(path, True), args.repeat)
    committed = best_of(lambda: changes(path, True, False), args.repeat)
    typed = best_of(lambda: changes(path, True, True), args.repeat)
    engine = best_of(lambda: changes(path, False, False), args.repeat)
    busiest = busiest_table(path)
    table = best_of(lambda: table_changes(path, busiest, False), args.repeat)
    table_typed = best_of(lambda: table_changes(path, busiest, True), args.repeat)
    records = walked["result"]

    rows = []
    cases = (
        ("read", read),
        ("lsa_type", two),
        ("walk", walked),
        ("payloads", full),
        ("changes", committed),
        ("typed", typed),
        ("engine", engine),
        ("table", table),
        ("table_typed", table_typed),
    )
    for name, r in cases:
        rows.append(
            {
                "case": name,
                "seconds": round(r["seconds"], 4),
                "MB_per_s": round(mb / r["seconds"], 1),
                "items": r["result"] if name != "read" else None,
                "items_per_s": None if name == "read" else round(r["result"] / r["seconds"]),
                "x_read_time": round(r["seconds"] / read["seconds"], 2),
            }
        )
    print(f"log set: {path}  ({len(files)} volumes, {mb:.1f} MB, {records:,} records)")
    cores = os.cpu_count()
    print(f"machine: {platform.machine()}, {cores} cores; one core used; best of {args.repeat}")
    print(f"{'case':<12} {'seconds':>9} {'MB/s':>9} {'items':>10} {'items/s':>12} {'x read':>8}")
    for r in rows:
        rps = f"{r['items_per_s']:,}" if r["items_per_s"] else "-"
        items = f"{r['items']:,}" if r["items"] is not None else "-"
        print(
            f"{r['case']:<12} {r['seconds']:>9.4f} {r['MB_per_s']:>9.1f} {items:>10} {rps:>12} "
            f"{r['x_read_time']:>8.2f}"
        )
    print("items: records for lsa_type/walk/payloads, change events for the others")
    if args.json:
        out = {"path": str(path), "bytes": nbytes, "records": records, "results": rows}
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
