"""The interface every stream of batches walcdc returns shares: pyarrow's
``RecordBatchReader`` (iteration, ``read_next_batch``, ``read_all``, ``read_pandas``, the Arrow
PyCapsule stream) over the stream's :attr:`reader`, and use as a context manager."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

__all__ = ["ArrowStream"]


class ArrowStream:
    """A stream of record batches read through ``self.reader`` (a ``pa.RecordBatchReader``);
    a subclass sets it and defines :meth:`close`."""

    reader: pa.RecordBatchReader

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self.reader)

    def read_next_batch(self) -> pa.RecordBatch:
        return self.reader.read_next_batch()

    def read_all(self) -> pa.Table:
        return self.reader.read_all()

    def read_pandas(self, **kw):
        return self.reader.read_pandas(**kw)

    def __arrow_c_stream__(self, requested_schema=None):
        return self.reader.__arrow_c_stream__(requested_schema)

    def close(self) -> None:
        self.reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
