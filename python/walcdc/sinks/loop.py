"""The one delivery loop: read a batch, write it, make it durable, and only then save the
cursor that says it was delivered.

Every output walcdc writes to is a :class:`Writer` (a file renamed into place when complete,
a directory of parts, Parquet by table, a followed log's JSON lines, a webhook's durable
queue); :func:`deliver` owns the order that makes resuming safe, so no writer implements it
again: a cursor is saved only after what it covers is durable, and a crash between the two
repeats events, never loses them. A writer that publishes once at the end makes its batches
durable in :meth:`Writer.finish`; one that follows a live log checkpoints as it goes
(:attr:`Writer.checkpoint_each_batch`)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pyarrow as pa

__all__ = ["Writer", "deliver"]


class Writer:
    """Where a stream's batches go."""

    #: Make each batch durable and save the cursor after it (a followed log, read for months),
    #: rather than once at the end.
    checkpoint_each_batch = False

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError

    def durable(self) -> None:
        """Makes everything written so far durable (before a cursor is saved after it)."""

    def finish(self, cursor: Any) -> None:
        """Completes the output after the last batch (footers, publication), durably;
        ``cursor`` is where the stream ended."""
        self.durable()

    def abort(self) -> None:
        """After a failure: removes what was not published, releases what is open."""

    def stopped(self) -> bool:
        """The writer wants no more batches (it was asked to stop)."""
        return False


def deliver(
    stream,
    writer: Writer,
    save_cursor: Optional[Callable[[Any], None]] = None,
    on_batch: Optional[Callable[[pa.RecordBatch], None]] = None,
) -> Any:
    """Writes every batch of ``stream`` with ``writer``, makes it durable, then saves the
    stream's cursor with ``save_cursor`` (when given): after each batch for a writer that
    checkpoints each batch, else once, after :meth:`Writer.finish`. Returns the cursor. On any
    failure the writer is aborted and no cursor is saved past what is durable."""
    finished = False
    try:
        for batch in stream:
            writer.write(batch)
            if on_batch is not None:
                on_batch(batch)
            if writer.checkpoint_each_batch:
                writer.durable()
                if save_cursor is not None:
                    save_cursor(stream.cursor)
            if writer.stopped():
                break
        cursor = stream.cursor
        writer.finish(cursor)
        finished = True
    finally:
        if not finished:
            writer.abort()
    if save_cursor is not None:
        save_cursor(cursor)  # what it covers is durable: the cursor may move past it
    return cursor
