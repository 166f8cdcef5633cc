"""Where change events go: files (Parquet, JSON Lines, Arrow IPC), directories of parts, stdout.

A sink writes a stream's batches and makes them durable; :func:`write_stream` owns the order
that makes resuming safe: *write the output durably, then save the cursor* — a crash between
the two repeats the last run's events, never loses them. Every sink is written to a temporary
file next to its target and renamed into place only when complete (a failed run leaves
nothing behind), except where the target is not a regular file (stdout, a FIFO, a device),
which is written through.

>>> import tempfile, walcdc, pyarrow.parquet as pq
>>> out = tempfile.mkdtemp()
>>> stream = walcdc.read_changes(walcdc.samples.sample_path(), tables="t_chg")
>>> result = write_stream(stream, out)          # a directory: one new part per run
>>> pq.read_table(result.paths[0]).num_rows == result.rows
True
"""

from walcdc.sinks.base import FORMATS, Target, WriteResult, resolve_target, write_stream
from walcdc.sinks.files import ArrowSink, JsonLinesSink, ParquetSink, Sink

__all__ = [
    "FORMATS",
    "Sink",
    "Target",
    "WriteResult",
    "resolve_target",
    "write_stream",
    "ParquetSink",
    "JsonLinesSink",
    "ArrowSink",
]
