"""The Spark Structured Streaming source (``format("walcdc")``, walcdc.spark_source) over a log
written while the query runs: the query is stopped mid-stream and restarted from its
checkpoint, and the Parquet sink must hold exactly the events of one pass of
``walcdc.read_changes`` over the final log, each once, every column. The micro-batches are
plans of ranges of two pages (transactions cross them), each read once by a task. Bounded in
time."""

from __future__ import annotations

import threading
import time

import walcdc
from walcdc.testing import LogWriter, Workload, cdc_oid

#: Ranges of two 4 KiB pages: a micro-batch is several partitions.
SPLIT = 8192


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
        .option("split_bytes", SPLIT)
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
    got = spark.read.parquet(str(out))
    assert got.count() == expected.num_rows  # each once
    from test_spark import ORDER, local_as_spark

    want, got = local_as_spark(expected, got)
    assert got.sort_by(ORDER).equals(want.sort_by(ORDER))


def test_a_micro_batch_is_a_plan_of_ranges_read_once(tmp_path):
    """The reader as Spark drives it: from the start to the end of a written log, the
    micro-batch is one partition per range (``partitions`` above the ranges; a log this small
    is one partition by default) and gives the local stream's rows; a second micro-batch over
    what was written next gives the rest."""
    import pyarrow as pa

    from walcdc.spark_source import WalcdcDataSource, _Part

    log = tmp_path / "log"
    w = LogWriter(page_size=4096, active_pages=32, archive_pages=8, stream_to=log)
    work = Workload(w)
    _write(w, work, 30, 0)
    options = {"path": str(log), "split_bytes": str(SPLIT), "partitions": "1000"}
    source = WalcdcDataSource(options)
    reader = source.streamReader(source.schema())
    rows = []
    start = reader.initialOffset()
    for written in (30, 60):
        end = reader.latestOffset(start, None)
        parts = reader.partitions(start, end)
        assert len(parts) > 1 and all(isinstance(p, _Part) for p in parts)
        rows += [b for p in parts for b in reader.read(p)]
        start = end
        if written == 30:
            _write(w, work, 30, 30)
    got = pa.Table.from_batches(rows)
    stream = walcdc.read_changes(
        log, follow=True, idle_timeout=0, end=walcdc.Cursor.from_json(start["cursor"]).position
    )
    want = stream.read_all()
    assert got.num_rows == want.num_rows
    assert got.equals(want.cast(got.schema))
