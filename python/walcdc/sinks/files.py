"""The file formats: Parquet (with walcdc's key/value metadata), JSON Lines (one event per
line, JSON columns as JSON, LSAs also as ``pageid|offset`` text), Arrow IPC stream."""

from __future__ import annotations

import os
import sys
from typing import IO, Dict, List, Optional

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from walcdc import _native
from walcdc.envelope import lsa_text
from walcdc.sinks.loop import Writer

__all__ = ["ParquetSink", "JsonLinesSink", "ArrowSink"]


class Sink:
    """One output file of a format: :meth:`write` batches, then :meth:`finish` (footers,
    metadata). Durability and publication belong to
    :func:`walcdc.sinks.base.write_stream`."""

    def __init__(self, out: IO[bytes], schema: pa.Schema, metadata: Dict[str, str]):
        self.out = out
        self.schema = schema
        self.metadata = metadata

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError

    def finish(self, metadata: Dict[str, str]) -> None:
        """Completes the file; ``metadata`` holds what is known only at the end."""

    def abort(self) -> None:
        """Releases the format's writer after a failure (the file is then discarded)."""
        writer = getattr(self, "_writer", None)
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the file is being thrown away
                pass


class ParquetSink(Sink):
    """A Parquet file; its key/value metadata says where the events came from (database,
    ``db_creation``, stream kind, first/last LSA, the cursor after them, walcdc's version)."""

    def __init__(self, out, schema, metadata):
        super().__init__(out, schema, metadata)
        self._writer = pq.ParquetWriter(out, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def finish(self, metadata: Dict[str, str]) -> None:
        self._writer.add_key_value_metadata({**self.metadata, **metadata})
        self._writer.close()


def _json_columns(schema: pa.Schema) -> List[str]:
    return [f.name for f in schema if f.metadata and f.metadata.get(b"walcdc.json") == b"true"]


class JsonLinesSink(Sink):
    """One JSON object per event and line. Columns holding JSON (``before``, ``after``,
    ``key``) are embedded as JSON; LSA columns get a ``*_text`` twin (``pageid|offset``)."""

    _LSA_COLUMNS = ("lsa", "commit_lsa")

    def __init__(self, out, schema, metadata):
        super().__init__(out, schema, metadata)
        self._raw = _json_columns(schema)

    def _with_text(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        if not any(c in names for c in self._LSA_COLUMNS):
            return batch
        cols, fields = [], []
        for f, col in zip(batch.schema, batch.columns):
            cols.append(col)
            fields.append(f)
            if f.name in self._LSA_COLUMNS:
                cols.append(lsa_text(col))
                fields.append(pa.field(f"{f.name}_text", pa.string()))
        return pa.record_batch(cols, schema=pa.schema(fields))

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.out.write(_native.encode_jsonl(self._with_text(batch), self._raw))


class ArrowSink(Sink):
    """An Arrow IPC stream (``pyarrow.ipc.open_stream`` reads it)."""

    def __init__(self, out, schema, metadata):
        super().__init__(out, schema, metadata)
        meta = {**(schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}}
        self._writer = ipc.new_stream(out, schema.with_metadata(meta))

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def finish(self, metadata: Dict[str, str]) -> None:
        self._writer.close()


class AppendWriter(Writer):
    """JSON lines appended to a file (or written to stdout) as a followed log is read: each
    batch is flushed and synced before the cursor after it is saved, so that a restart goes
    on after the last batch saved (a crash between the two repeats that batch)."""

    checkpoint_each_batch = True

    def __init__(self, path: Optional[str], schema: pa.Schema):
        self.path = path
        self.out = open(path, "ab") if path else sys.stdout.buffer  # noqa: SIM115
        self.sink = JsonLinesSink(self.out, schema, {})
        self.rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        self.sink.write(batch)
        self.rows += batch.num_rows

    def durable(self) -> None:
        self.out.flush()
        if self.path:
            os.fsync(self.out.fileno())

    def finish(self, cursor) -> None:
        self.durable()
        self.abort()

    def abort(self) -> None:
        if self.path:
            self.out.close()


#: The sink of each output format.
SINKS = {"parquet": ParquetSink, "jsonl": JsonLinesSink, "arrow": ArrowSink}
