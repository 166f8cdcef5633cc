"""The Spark Structured Streaming source (``format("walcdc")``, walcdc.spark_source) over a log
written while the query runs: the query is stopped mid-stream and restarted from its
checkpoint, and the Parquet sink must hold exactly the events of one pass of
``walcdc.read_changes`` over the final log, each once. Bounded in time."""

from __future__ import annotations

import threading
import time

import walcdc
from walcdc.testing import LogWriter, Workload, cdc_oid

KEYS = ["lsa", "commit_lsa", "trid", "txn_seq", "op", "class_oid", "row_oid"]


def _write(w, work, n: int, start: int) -> None:
    for i in range(start, start + n):
        t = work.begin(1 + i % 4)
        for j in range(1 + i % 3):
            t.insert(cdc_oid(0, 200 + j, 1), bytes([i % 256, j]) * 30, 1000 + j, 1 + i)
        if i % 7 == 3:
            t.abort()
        else:
            t.commit()
        if i % 5 == 0:
            w.flush()
    w.flush()


def _start(spark, log, out, ckpt):
    held = spark.read.parquet(str(out)).count() if (out / "_spark_metadata").exists() else 0
    query = (
        spark.readStream.format("walcdc")
        .load(str(log))
        .writeStream.format("parquet")
        .option("checkpointLocation", str(ckpt))
        # Short: after a micro-batch (or an idle look at the log) the next starts this soon, so
        # no step of the test waits out an interval; a look at an unchanged log is cheap.
        .trigger(processingTime="50 milliseconds")
        .start(str(out))
    )
    return query, held


def _wait(query, held: int, rows: int, timeout: float = 120) -> None:
    """Until the sink holds at least ``rows`` rows (the ones before this run and those its
    micro-batches wrote)."""
    deadline = time.monotonic() + timeout
    while held + sum(p["numInputRows"] for p in query.recentProgress) < rows:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "the query did not catch up in time"
        time.sleep(0.02)


def _writing(w, work, n: int, start: int) -> threading.Thread:
    """Transactions written on a thread while the query runs, flushed one by one."""

    def run():
        for i in range(start, start + n):
            _write(w, work, 1, i)
            time.sleep(0.02)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_streaming_query_stopped_and_restarted_writes_every_event_once(spark, tmp_path):
    from walcdc.spark_source import register

    register(spark)
    log, out, ckpt = tmp_path / "log", tmp_path / "out", tmp_path / "ckpt"
    w = LogWriter(page_size=4096, active_pages=32, archive_pages=8, stream_to=log)
    work = Workload(w)
    _write(w, work, 60, 0)
    first = walcdc.read_changes(log, follow=True, idle_timeout=0).read_all().num_rows
    query, held = _start(spark, log, out, ckpt)
    writer = _writing(w, work, 40, 60)
    try:
        _wait(query, held, first)
    finally:
        query.stop()  # while the log is still being written
    writer.join(60)
    query, held = _start(spark, log, out, ckpt)  # from its checkpoint
    writer = _writing(w, work, 40, 100)
    writer.join(60)
    expected = walcdc.read_changes(log, follow=True, idle_timeout=0).read_all()
    try:
        _wait(query, held, expected.num_rows)
    finally:
        query.stop()
    got = spark.read.parquet(str(out)).toPandas()
    assert len(got) == expected.num_rows  # each once
    got = got.sort_values(["commit_lsa", "txn_seq"]).reset_index(drop=True)
    want = expected.to_pandas().sort_values(["commit_lsa", "txn_seq"]).reset_index(drop=True)
    for k in KEYS:
        assert got[k].tolist() == want[k].tolist(), k
    assert got["after"].tolist() == want["after"].tolist()
    assert got["before_image"].tolist() == want["before_image"].tolist()
