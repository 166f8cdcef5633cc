"""Reading a log set with several threads: record-aligned ranges read at once, their output
given in log order.

Each range is read by a native reader, which releases the GIL while it works, so threads read
ranges truly at once. :func:`ordered` runs a task per range and yields their items range after
range: thread ``k`` reads ranges ``k``, ``k + n``, ``k + 2n``, ... into a queue of its own that
holds at most ``depth`` items, so what is read ahead is bounded by ``threads × depth`` batches
however long the log, and the order is the one-thread order whatever the threads' speeds."""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable, Iterable, Iterator, List, Optional, Tuple, TypeVar

__all__ = ["clip", "default_threads", "holds", "ordered", "split_bytes_for"]

T = TypeVar("T")
Range = Tuple[Optional[int], Optional[int]]

#: The most a range holds by default: ranges much smaller than the log even out the threads.
DEFAULT_SPLIT_BYTES = 16 << 20
#: The least a range holds by default (a range's reader has a small fixed cost).
MIN_SPLIT_BYTES = 2 << 20


def default_threads() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def split_bytes_for(log_bytes: int, threads: int) -> int:
    """A range size for ``threads`` threads over ``log_bytes`` of log: about four ranges a
    thread, between :data:`MIN_SPLIT_BYTES` and :data:`DEFAULT_SPLIT_BYTES`."""
    per_range = log_bytes // max(1, 4 * threads)
    return max(MIN_SPLIT_BYTES, min(DEFAULT_SPLIT_BYTES, per_range))


def clip(ranges: Iterable[Range], start: Optional[int], end: Optional[int]) -> List[Range]:
    """The ranges cut to ``[start, end)`` (LSA keys; None is open)."""
    out = []
    for s, e in ranges:
        if start is not None and (e is not None and e <= start):
            continue
        if end is not None and (s is not None and s >= end):
            continue
        if start is not None and (s is None or s < start):
            s = start
        if end is not None and (e is None or e > end):
            e = end
        out.append((s, e))
    return out


def holds(start: Optional[int], end: Optional[int], at: Optional[int]) -> bool:
    """Whether the range ``[start, end)`` (LSA keys; None is open) holds ``at`` (None: no)."""
    return at is not None and (start is None or start <= at) and (end is None or at < end)


class _Done:
    """The end of one task's items in a thread's queue."""


class _Failed:
    """A task that raised: its exception, given to the consumer in the task's turn."""

    def __init__(self, error: BaseException):
        self.error = error


_DONE = _Done()
#: How long a blocked thread waits before it looks whether the consumer has gone.
_POLL_SECONDS = 0.1


def ordered(tasks: List[Callable[[], Iterable[T]]], threads: int, depth: int = 2) -> Iterator[T]:
    """The items of ``tasks`` (each a callable that returns an iterable), task after task in
    their order, read by ``threads`` threads at once with at most ``depth`` items of each
    thread waiting to be taken. A task that raises raises here, in its turn, after the items
    of the tasks before it and its own items before the failure (as one thread reading them
    in order would). Closing the generator early stops the threads."""
    threads = max(1, min(threads, len(tasks)))
    if threads == 1:
        for task in tasks:
            yield from task()
        return
    stop = threading.Event()
    queues: List[queue.Queue] = [queue.Queue(maxsize=depth) for _ in range(threads)]

    def put(q: queue.Queue, item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def work(k: int) -> None:
        q = queues[k]
        for i in range(k, len(tasks), threads):
            try:
                for item in tasks[i]():
                    if not put(q, item):
                        return
            except BaseException as exc:  # noqa: BLE001 -- given to the consumer in order
                put(q, _Failed(exc))
                return
            if not put(q, _DONE):
                return

    workers = [
        threading.Thread(target=work, args=(k,), name=f"walcdc-range-{k}", daemon=True)
        for k in range(threads)
    ]
    for w in workers:
        w.start()
    try:
        for i in range(len(tasks)):
            q = queues[i % threads]
            while True:
                item = q.get()
                if item is _DONE:
                    break
                if isinstance(item, _Failed):
                    raise item.error
                yield item
    finally:
        stop.set()
        for w in workers:
            w.join()
