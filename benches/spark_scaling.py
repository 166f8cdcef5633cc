"""walcdc.spark with one core against all cores, in one run: where the time goes.

    python benches/spark_scaling.py                  # the largest fixture under ../shared
    python benches/spark_scaling.py PATH [--split-mb 8] [--repeat 2] [--json OUT]

For each of ``local[1]`` and ``local[N]`` (N = cores), in a process of its own (one Spark
session each, JVM warmed by a first run, best of ``--repeat``), every stage written to Spark's
``noop`` sink so that all of it runs and nothing is collected:

  records   read_records: the ranges walked into Arrow, handed to Spark (decode + transfer)
  catalog   the catalog job of read_changes alone (each range reduced to its class-record
            writes, joined and read on the driver)
  changes   read_changes: the catalog, then each range read once (chases, decoding, Arrow
            transfer)
  engine    read_changes(committed_only=False)

and reports seconds, MB/s of log and the speed-up of N cores over one. ``changes`` minus
``catalog`` is what the tasks' one read of their ranges costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def run_cases(path: str, cores: int, split_mb: int, repeat: int) -> dict:
    """In this process: one session with ``cores`` cores, every case timed."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import walcdc
    from walcdc import spark as ws
    from walcdc.changes import OPTION_DEFAULTS
    from walcdc.spark import plan

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    log = walcdc.open_log(path)
    split = split_mb << 20
    volumes = log.volumes()
    options = {k: v for k, v in OPTION_DEFAULTS.items() if k != "memory_limit"}
    kwargs, _, seed = plan.checked_options(log, **{**options, "on_encrypted": "skip"})

    class Collected:
        """A job whose result is collected on the driver (the catalog): ``write`` runs it."""

        def __init__(self, run):
            self.run = run

        @property
        def write(self):
            return self

        def format(self, _):
            return self

        def mode(self, _):
            return self

        def save(self):
            plan.CATALOGS.clear()
            self.run()

    def catalog():
        return Collected(lambda: plan.read_catalog(spark, log, volumes, kwargs, seed, split))

    def fresh(make):
        def run():
            plan.CATALOGS.clear()  # each run builds its catalog, as a first read does
            return make()

        return run

    cases = {
        "records": lambda: ws.read_records(spark, path, on_encrypted="skip", split_bytes=split),
        "catalog": catalog,
        "changes": fresh(
            lambda: ws.read_changes(spark, path, on_encrypted="skip", split_bytes=split)
        ),
        "engine": fresh(
            lambda: ws.read_changes(
                spark, path, on_encrypted="skip", split_bytes=split, committed_only=False
            )
        ),
    }
    out = {}
    for name, make in cases.items():
        best = None
        for _ in range(repeat + 1):  # the first run warms the JVM and the page cache
            t = time.perf_counter()
            make().write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - t
            best = elapsed if best is None else min(best, elapsed)
        out[name] = best
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("path", nargs="?")
    ap.add_argument("--split-mb", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--cores", type=int, help=argparse.SUPPRESS)  # a worker process
    args = ap.parse_args()
    if args.path is None:
        from throughput import largest_fixture

        args.path = str(largest_fixture())
    if args.cores:
        print(json.dumps(run_cases(args.path, args.cores, args.split_mb, args.repeat)))
        return
    from throughput import volume_files

    size = sum(f.stat().st_size for f in volume_files(Path(args.path)))
    n = os.cpu_count() or 1
    results = {}
    for cores in sorted({1, n}):
        cmd = [sys.executable, __file__, args.path, "--cores", str(cores)]
        cmd += ["--split-mb", str(args.split_mb), "--repeat", str(args.repeat)]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        results[cores] = json.loads(done.stdout.strip().splitlines()[-1])
    mb = size / 1e6
    print(f"log: {args.path} ({mb:.1f} MB), ranges of {args.split_mb} MiB, best of {args.repeat}")
    print(f"| case | local[1] s | local[{n}] s | local[1] MB/s | local[{n}] MB/s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in results[1]:
        one, many = results[1][case], results[n][case]
        print(
            f"| {case} | {one:.2f} | {many:.2f} | {mb / one:.0f} | {mb / many:.0f} "
            f"| {one / many:.2f}x |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"bytes": size, "seconds": results}, indent=2))


if __name__ == "__main__":
    main()
