"""walcdc at scale: every way of reading a log, on generated logs of growing size, one process
per case (so that each peak memory is the case's own), against reading the same bytes.

    python benches/harness.py --sizes 1GB,4GB,16GB [--cache DIR] [--out DIR] [--spark]

For each size a log is generated once by benches/workload.py into ``--cache`` (default
``~/.cache/walcdc-bench``, outside the repository) and reused. Cases:

  read          reading every volume file start to end (the ceiling on this machine; the
                active volume is read whole, written or not)
  walk          LogSet.records(): every record walked into Arrow batches
  payloads      LogSet.records(payloads=True): also every payload unzipped, DIFF rebuilt
  changes       read_changes(decode=False): committed events with their images
  typed         read_changes(): the same, rows decoded (JSON text)
  table_typed   read_table_changes("dba.w_00"): one table as typed Arrow structs
  filtered      read_changes(tables="dba.w_03"): one table of twenty, decoded
  engine        read_changes(committed_only=False, decode=False): CUBRID's own stream
  walk_N, payloads_N, changes_N, typed_N, table_typed_N, engine_N
                the same with a thread per core (threads=N): the same rows
  spark_1/_N    walcdc.spark.read_changes on local[1] and local[N] (with --spark; with
                --pin-one the _1 cases run on one CPU, the JVM and its workers with them)
  format_1/_N   spark.read.format("walcdc") with a plan from walcdc.spark.source_plan (timed
                with it), on local[1] and local[N] (with --spark)
  table_1/_N    walcdc.spark.read_table_changes("dba.w_00") (typed structs; with --spark)
  stream_1/_N   spark.readStream.format("walcdc"), one available-now micro-batch over the
                whole log (the driver finds its end cursor, the tasks read the ranges; with
                --spark)

Each case reports seconds, MB/s of log written, items/s (records or events), MB/s per core,
the time ratio to ``read``, the peak RSS of its process (which counts the pages of the
memory-mapped volumes it touched: they grow with the log but belong to the page cache) and its
peak heap (anonymous) memory, sampled while it runs (for Spark, of the driver's Python
process). Written to ``--out``: ``results.json``, ``results.md`` (a table per size) and
``results.png`` (throughput per core, peak RSS and peak heap memory against log size; needs
matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CASES = ["read", "walk", "payloads", "changes", "typed", "table_typed", "filtered", "engine"]
# The cases read with a thread per core (threads=N): the same rows as one thread's.
THREAD_CASES = ["walk_N", "payloads_N", "changes_N", "typed_N", "table_typed_N", "engine_N"]
SPARK_CASES = [f"{kind}_{n}" for kind in ("spark", "format", "table", "stream") for n in ("1", "N")]
# Writers of every table's rows (--cases): typed Parquet by table (extract --by-table), and the
# mirrors (items: rows written and keys deleted).
WRITE_CASES = ["by_table", "mirror_delta", "mirror_iceberg"]
# Set (by --pin-one) for the case processes: local[1] runs on one CPU.
PIN_ONE = "WALCDC_BENCH_PIN_ONE"
# Cores of the Spark cases.
CORES = {
    case: 1 if case.endswith("_1") else os.cpu_count() or 1 for case in SPARK_CASES + THREAD_CASES
}


def log_for(size: int, cache: Path, seed: int, page_size: int) -> Path:
    """The generated log of ``size`` bytes (made once, kept in the cache)."""
    from workload import VERSION, Generator

    path = cache / f"workload-v{VERSION}-{size}-s{seed}-p{page_size}"
    done = path / "workload.json"
    if not done.exists():
        path.mkdir(parents=True, exist_ok=True)
        for old in path.glob("*_lg*"):
            old.unlink()
        stats = Generator(path, size, seed=seed, page_size=page_size).run(progress=True)
        done.write_text(json.dumps(stats))
    return path


def run_case(case: str, path: str) -> Dict[str, Any]:
    """In this process: one case, timed."""
    t = time.perf_counter()
    items = 0
    if case == "read":
        buf = memoryview(bytearray(1 << 20))
        for f in sorted(Path(path).glob("*_lg*")):
            with open(f, "rb", buffering=0) as fh:
                while fh.readinto(buf):
                    pass
    elif case in WRITE_CASES:
        import tempfile

        import walcdc

        # walcdc imports its modules when first used (see the local cases below).
        _ = (walcdc.open_log, walcdc.read_changes, walcdc.read_changes_by_table, walcdc.mirror)
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()  # imports are not the work
            if case == "by_table":
                from walcdc.sinks.tables import write_tables

                items = write_tables(walcdc.read_changes_by_table(path), out).rows
            else:
                done = walcdc.mirror(path, f"{case.split('_', 1)[1]}:{out}")
                items = done.rows + done.deleted
            seconds = time.perf_counter() - t
        return {"seconds": seconds, "items": items}
    elif case in SPARK_CASES:
        items = 0
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        from walcdc.spark import read_changes

        cores = CORES[case]
        if cores == 1 and os.environ.get(PIN_ONE) and hasattr(os, "sched_setaffinity"):
            # One core as one CPU: local[1]'s one task slot still runs the JVM and a Python
            # worker side by side, which unpinned share every core of the machine.
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        spark = (
            SparkSession.builder.master(f"local[{cores}]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(2 * cores))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        t = time.perf_counter()  # the session's start-up is not the read
        if case.startswith("format"):
            import walcdc.spark_source
            from walcdc.spark import source_plan

            walcdc.spark_source.register(spark)
            plan = source_plan(spark, path, split_bytes=64 << 20)
            reader = spark.read.format("walcdc").option("plan", plan).option("decode", "false")
            df = reader.load(path)
        elif case.startswith("table"):
            from walcdc.spark import read_table_changes

            df = read_table_changes(spark, path, "dba.w_00", split_bytes=64 << 20)
        elif case.startswith("stream"):
            import tempfile

            import walcdc.spark_source

            walcdc.spark_source.register(spark)
            df = None
            with tempfile.TemporaryDirectory() as ckpt:
                query = (
                    spark.readStream.format("walcdc")
                    .option("decode", "false")
                    .option("split_bytes", 64 << 20)
                    .load(path)
                    .writeStream.format("noop")
                    .option("checkpointLocation", ckpt)
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination()
                items = sum(p["numInputRows"] for p in query.recentProgress)
        else:
            df = read_changes(spark, path, decode=False, split_bytes=64 << 20)
        if df is not None:
            df.write.format("noop").mode("overwrite").save()
        spark.stop()
    else:
        import walcdc

        # walcdc imports its modules (and pyarrow) when first used: import them before the
        # clock starts, as a program would have by its second read.
        _ = (walcdc.open_log, walcdc.read_changes, walcdc.read_table_changes)
        t = time.perf_counter()  # imports are not the read
        log = walcdc.open_log(path)
        threads = CORES.get(case, 1)
        kind = case[: -len("_N")] if case in THREAD_CASES else case
        if kind in ("walk", "payloads"):
            stream = log.records(payloads=kind == "payloads", threads=threads)
        elif kind == "changes":
            stream = walcdc.read_changes(log, decode=False, threads=threads)
        elif kind == "typed":
            stream = walcdc.read_changes(log, threads=threads)
        elif kind == "table_typed":
            stream = walcdc.read_table_changes(log, "dba.w_00", threads=threads)
        elif kind == "filtered":
            stream = walcdc.read_changes(log, tables="dba.w_03")
        elif kind == "engine":
            stream = walcdc.read_changes(log, committed_only=False, decode=False, threads=threads)
        else:
            raise SystemExit(f"unknown case {case!r}")
        items = sum(b.num_rows for b in stream)
    return {"seconds": time.perf_counter() - t, "items": items}


def measure(case: str, path: Path) -> Dict[str, Any]:
    """Runs a case in a process of its own; its time, items and peak RSS."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--case", case, "--path", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"case {case} failed:\n{err[-2000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    result["rss_mb"] = result.pop("rss_kb") / 1024
    result["anon_mb"] = result.pop("anon_kb") / 1024
    return result


def _status_kb(field: str) -> Optional[int]:
    """A ``kB`` field of /proc/self/status (None where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_rss_kb() -> int:
    """This process's peak resident set since it started (``VmHWM``; ``ru_maxrss`` would
    include the parent's from before the fork)."""
    peak = _status_kb("VmHWM")
    if peak is not None:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def anon_kb() -> int:
    """This process's anonymous resident memory (what it allocated, not the mapped log)."""
    return _status_kb("RssAnon") or 0


def child_main(case: str, path: str) -> None:
    import threading

    # RSS counts the pages of the memory-mapped volumes the case touched (they belong to the
    # page cache and grow with the log); the memory the case itself holds is the anonymous
    # part, sampled while it runs.
    peak = [anon_kb()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], anon_kb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = run_case(case, path)
    done.set()
    sampler.join()
    # For Spark cases, the driver's Python process (the JVM and its workers are not counted).
    result["rss_kb"] = peak_rss_kb()
    result["anon_kb"] = max(peak[0], anon_kb())
    print(json.dumps(result))


def rows_for(size_bytes: int, log_bytes: int, results: Dict[str, Dict[str, Any]]) -> List[Dict]:
    """Rows of one log: ``size_bytes`` as asked, MB/s of the ``log_bytes`` written."""
    read = results["read"]["seconds"]
    mb = log_bytes / 1e6
    rows = []
    for case, r in results.items():
        cores = CORES.get(case, 1)
        rows.append(
            {
                "size_bytes": size_bytes,
                "case": case,
                "seconds": round(r["seconds"], 3),
                "MB_per_s": round(mb / r["seconds"], 1),
                "MB_per_s_per_core": round(mb / r["seconds"] / cores, 1),
                "items": r["items"],
                "items_per_s": round(r["items"] / r["seconds"]) if r["items"] else None,
                "x_read": round(r["seconds"] / read, 2),
                "peak_rss_mb": round(r["rss_mb"], 1),
                "peak_anon_mb": round(r["anon_mb"], 1),
            }
        )
    return rows


def markdown(rows: List[Dict[str, Any]], machine: str) -> str:
    out = [f"Machine: {machine}", ""]
    for size in sorted({r["size_bytes"] for r in rows}):
        out += [
            f"### {human(size)} of log",
            "",
            "| case | seconds | MB/s | MB/s per core | items/s | × read | peak RSS MB "
            "| peak heap MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in (r for r in rows if r["size_bytes"] == size):
            ips = f"{r['items_per_s']:,}" if r["items_per_s"] else "–"
            out.append(
                f"| {r['case']} | {r['seconds']:.2f} | {r['MB_per_s']:,.0f} | "
                f"{r['MB_per_s_per_core']:,.0f} | {ips} | {r['x_read']:.1f} | "
                f"{r['peak_rss_mb']:,.0f} | {r['peak_anon_mb']:,.0f} |"
            )
        out.append("")
    return "\n".join(out)


def human(n: int) -> str:
    for unit, f in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"


def plot(rows: List[Dict[str, Any]], path: Path) -> Optional[Path]:
    """Throughput and peak memory against log size, one line per case."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.5))
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = sorted((r for r in rows if r["case"] == case), key=lambda r: r["size_bytes"])
        x = [r["size_bytes"] / (1 << 30) for r in mine]
        a.plot(x, [r["MB_per_s_per_core"] for r in mine], marker="o", label=case)
        b.plot(x, [r["peak_rss_mb"] for r in mine], marker="o", label=case)
        c.plot(x, [r["peak_anon_mb"] for r in mine], marker="o", label=case)
    for ax, title in (
        (a, "throughput per core (MB/s of log)"),
        (b, "peak RSS (MB)"),
        (c, "peak heap memory (MB)"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("log size (GB)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    c.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main(argv=None) -> int:
    from workload import parse_size

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1GB", help="comma-separated log sizes, e.g. 1GB,4GB,16GB")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "walcdc-bench"))
    ap.add_argument("--out", default="bench-results")
    every = ",".join(CASES + THREAD_CASES + SPARK_CASES + WRITE_CASES)
    ap.add_argument("--cases", help=f"comma-separated subset of {every}")
    ap.add_argument("--spark", action="store_true", help="also Spark local[1] against local[N]")
    ap.add_argument(
        "--pin-one", action="store_true", help="local[1] cases on one CPU (sched_setaffinity)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--page-size", type=int, default=16384)
    ap.add_argument("--case", help=argparse.SUPPRESS)  # a child process
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.case:
        child_main(args.case, args.path)
        return 0
    from tqdm import tqdm

    if args.pin_one:
        os.environ[PIN_ONE] = "1"  # the case processes inherit it

    cases = args.cases.split(",") if args.cases else CASES + THREAD_CASES
    cases += SPARK_CASES if args.spark and not args.cases else []
    if "read" not in cases:
        cases = ["read", *cases]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    rows: List[Dict[str, Any]] = []
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        path = log_for(size, Path(args.cache), args.seed, args.page_size)
        written = json.loads((path / "workload.json").read_text())["bytes"]
        run_case("read", str(path))  # the volumes in the page cache: every case reads them warm
        results = {}
        for case in tqdm(cases, desc=f"{human(size)}", unit="case"):
            results[case] = measure(case, path)
        rows += rows_for(size, written, results)
        # Written after each size: a long run stopped early keeps what it measured.
        (out / "results.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
        text = markdown(rows, machine)
        (out / "results.md").write_text(text)
    print(text)
    plot(rows, out / "results.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
