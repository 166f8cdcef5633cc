"""A Spark Structured Streaming source over a followed log (PySpark's Python Data Source API):

    import walcdc.spark_source
    walcdc.spark_source.register(spark)
    query = (spark.readStream.format("walcdc").option("tables", "dba.orders").load(LOG_DIR)
             .writeStream.format("parquet").option("checkpointLocation", CKPT).start(OUT))

Offsets are walcdc cursors (JSON): where the committed stream stood. For each micro-batch the
driver-side reader reads the log from the previous offset to what is written now (images left
out: only to find the new cursor) and the micro-batch's task reads the same span again with
images, stopping at that offset's last commit, so a micro-batch holds whole transactions in
commit order, the same events whatever the log grew meanwhile. With Spark's checkpoint and a
file sink the query is exactly once end to end: a restarted query re-reads a micro-batch from
the offsets it had logged, and the sink commits each micro-batch once. The rows and types are
those of :func:`walcdc.read_changes` (the Spark schema from the one mapping in
:mod:`walcdc.spark`).

Options: ``tables``, ``exclude_tables``, ``users``, ``ops`` (comma-separated), ``mode``
(``full`` by default), ``decode`` (``true``), ``keys``. The log directory is the path given to
``load``; every executor must read it at that path.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["WalcdcDataSource", "register"]

_LIST_OPTIONS = ("tables", "exclude_tables", "users", "ops")


def _read_options(options: Dict[str, str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k in _LIST_OPTIONS:
        if options.get(k):
            out[k] = options[k]
    if options.get("mode"):
        out["mode"] = options["mode"]
    if options.get("keys"):
        out["keys"] = options["keys"]
    out["decode"] = options.get("decode", "true").lower() != "false"
    return out


def _arrow_schema() -> pa.Schema:
    from walcdc import _native

    return pa.schema(_native.changes_schema())


def _spark_arrow(spark_struct) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_struct, timezone="UTC")


try:
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover - walcdc[spark] not installed
    DataSource = object  # type: ignore[assignment,misc]
    DataSourceStreamReader = object  # type: ignore[assignment,misc]
    InputPartition = object  # type: ignore[assignment,misc]


class _Span(InputPartition):  # type: ignore[misc,valid-type]
    """One micro-batch: from cursor ``start`` (None: the log's start) to ``end``."""

    def __init__(self, start: Optional[str], end: str):
        self.start, self.end = start, end


class _StreamReader(DataSourceStreamReader):  # type: ignore[misc,valid-type]
    def __init__(self, path: str, options: Dict[str, str], schema):
        self.path = path
        self.read_options = _read_options(options)
        self.schema = schema
        self._last: Dict[str, Any] = self.initialOffset()

    def initialOffset(self) -> Dict[str, Any]:  # noqa: N802 (Spark's API)
        return {"cursor": None}

    def latestOffset(self, start=None, limit=None) -> Dict[str, Any]:  # noqa: N802
        import walcdc

        start = start if start is not None else self._last
        stream = walcdc.read_changes(
            self.path,
            cursor=_cursor(start),
            follow=True,
            idle_timeout=0,  # what is written now, sealed records only
            **{**self.read_options, "decode": False, "mode": "id"},
        )
        for _ in stream:
            pass
        cursor = stream.cursor
        if cursor.last_commit_lsa is None:
            return start  # nothing committed yet
        before = _cursor(start)
        if before is not None and before.last_commit_lsa == cursor.last_commit_lsa:
            self._last = start
            return start  # nothing new: the same offset
        self._last = {"cursor": cursor.to_json()}
        return self._last

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]):
        if end.get("cursor") is None or end == start:
            return []
        return [_Span(start.get("cursor"), end["cursor"])]

    def read(self, partition: _Span) -> Iterator[pa.RecordBatch]:
        import walcdc
        from walcdc.changes import Cursor

        last = Cursor.from_json(partition.end).last_commit_lsa
        target = _spark_arrow(self.schema)
        stream = walcdc.read_changes(
            self.path,
            cursor=Cursor.from_json(partition.start) if partition.start else None,
            follow=True,
            idle_timeout=0,
            **self.read_options,
        )
        for batch in stream:
            commit = batch.column("commit_lsa")
            keep = pc.less_equal(commit, pa.scalar(last, commit.type))
            kept = batch.filter(keep)
            if kept.num_rows:
                yield pa.Table.from_batches([kept]).cast(target).combine_chunks().to_batches()[0]
            if kept.num_rows < batch.num_rows:
                stream.close()
                break

    def commit(self, end: Dict[str, Any]) -> None:
        pass  # nothing to trim: the log is the source of truth


def _cursor(offset: Dict[str, Any]):
    from walcdc.changes import Cursor

    text = offset.get("cursor")
    return Cursor.from_json(text) if text else None


class WalcdcDataSource(DataSource):  # type: ignore[misc,valid-type]
    """``format("walcdc")``: the committed change events of a CUBRID log directory."""

    @classmethod
    def name(cls) -> str:
        return "walcdc"

    def schema(self):
        from walcdc.spark import spark_schema

        return spark_schema(_arrow_schema())

    def streamReader(self, schema):  # noqa: N802 (Spark's API)
        path = self.options.get("path")
        if not path:
            raise ValueError("walcdc: give the log directory to load()")
        return _StreamReader(path, dict(self.options), schema)


def register(spark) -> None:
    """Registers ``format("walcdc")`` with a Spark session."""
    spark.dataSource.register(WalcdcDataSource)
