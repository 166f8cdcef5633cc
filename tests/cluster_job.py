"""The driver of the standalone-cluster tests (tests/test_spark_cluster.py), run as its own
process (the test process has its local[2] session; a process has one Spark context):

    python tests/cluster_job.py MASTER_URL LOG_DIR OUT_DIR SPLIT_BYTES

Reads the log through the cluster with ``format("walcdc")``, then with
``walcdc.spark.read_changes`` while, once both executors run a task of that job, one executor
JVM is killed with SIGKILL. Each result is written as an Arrow IPC file in OUT_DIR (``format``,
``killed``) with the Spark schema's JSON beside it; what the killer saw goes to
OUT_DIR/kill.json."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_cluster import QUICK_JVM, executor_pids  # noqa: E402


def session(master: str):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("walcdc-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.memory", "1g")
        .config("spark.driver.memory", "1g")
        # Executors run this interpreter, which has walcdc (installed, or on PYTHONPATH).
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.extraJavaOptions", QUICK_JVM)
        .config("spark.executor.extraJavaOptions", QUICK_JVM)
        .config("spark.sql.codegen.wholeStage", "false")
        .getOrCreate()
    )


def save(df, out: Path, name: str) -> None:
    import pyarrow as pa

    table = df.toArrow()
    (out / f"{name}.schema.json").write_text(df.schema.json())
    with pa.OSFile(str(out / f"{name}.arrow"), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)


def kill_an_executor_when_both_are_busy(spark, group: str, seen: dict, stop: threading.Event):
    """Waits (bounded) for a stage of ``group``'s job with a running task on every executor
    (two tasks, one core each), then SIGKILLs one executor JVM: a task dies with it."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                s = tracker.getStageInfo(stage)
                if s is None or s.numActiveTasks < 2:
                    continue
                pids = executor_pids(sc.applicationId)
                if not pids:
                    continue
                os.kill(pids[0], signal.SIGKILL)
                seen.update(
                    stage=stage,
                    tasks=s.numTasks,
                    completed=s.numCompletedTasks,
                    active=s.numActiveTasks,
                    executors=len(pids),
                    killed=pids[0],
                )
                return
        time.sleep(0.005)


def main() -> None:
    master, log_dir, out, split = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    import walcdc.spark
    import walcdc.spark_source

    spark = session(master)
    sc = spark.sparkContext
    walcdc.spark_source.register(spark)
    fmt = spark.read.format("walcdc").option("split_bytes", split).load(log_dir)
    save(fmt, out, "format")
    # read_changes, an executor killed while it runs.
    df = walcdc.spark.read_changes(spark, log_dir, split_bytes=split)
    seen: dict = {}
    stop = threading.Event()
    killer = threading.Thread(
        target=kill_an_executor_when_both_are_busy, args=(spark, "read", seen, stop)
    )
    sc.setJobGroup("read", "the read an executor is killed in")
    killer.start()
    try:
        save(df, out, "killed")
    finally:
        stop.set()
        killer.join(timeout=30)
    if seen:
        after = sc.statusTracker().getStageInfo(seen["stage"])
        seen["failed"] = after.numFailedTasks if after else None
    (out / "kill.json").write_text(json.dumps(seen))
    spark.stop()


if __name__ == "__main__":
    main()
