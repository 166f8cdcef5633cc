"""Reading with several threads gives exactly what one thread gives: every fixture's records
(every column), where the walk ended and what it skipped, with 2, 3 and 8 threads over small
ranges and over ranges of one page; and the ordered reader itself keeps order, raises in
order, bounds what it reads ahead and stops its threads when left early."""

from __future__ import annotations

import gc
import threading
import time
import warnings

import pytest

import walcdc
from conftest import ALL_FIXTURES, fixture_dir
from walcdc.parallel import clip, default_threads, ordered, split_bytes_for


def _walk(log, **kw):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        table = log.records(on_encrypted="skip", **kw).read_all()
    said = sorted((type(w.message).__name__, str(w.message)) for w in said)
    return table, dict(log.last_walk), said


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_threads_read_every_fixture_as_one_thread_does(name):
    log = walcdc.open_log(fixture_dir(name))
    want, want_end, want_said = _walk(log)
    page = log.header()["page_size"]
    for threads in (2, 3, 8):
        got, end, said = _walk(log, threads=threads, split_bytes=64 * page)
        assert got.equals(want), f"{name}: {threads} threads"
        assert end == want_end, f"{name}: {threads} threads"
        assert said == want_said, f"{name}: {threads} threads"


@pytest.mark.parametrize("name", ["p4k", "tde", "crash"])
def test_ranges_of_one_page_in_a_window(name):
    """Ranges of a single page each (many start inside a record that spans pages, or on an
    encrypted page) over a window of the log, and the window's last stretch to the end."""
    log = walcdc.open_log(fixture_dir(name))
    lsas = _walk(log, columns=["lsa"])[0].column("lsa").to_pylist()
    page = log.header()["page_size"]
    for start, end in [(lsas[len(lsas) // 3], lsas[len(lsas) // 3 + 3000]), (lsas[-2000], None)]:
        want = _walk(log, start=start, end=end)
        for threads in (2, 8):
            got = _walk(log, start=start, end=end, threads=threads, split_bytes=page)
            assert got[0].equals(want[0]), f"{name} [{start}, {end}): {threads} threads"
            assert got[1:] == want[1:], f"{name} [{start}, {end}): {threads} threads"


@pytest.mark.parametrize("name", ["p4k", "tde"])
def test_threads_with_payloads_and_chosen_columns(name):
    """The images (unzipped, DIFF rebuilt) and a subset of the columns, as one thread."""
    log = walcdc.open_log(fixture_dir(name))
    page = log.header()["page_size"]
    for kw in (dict(payloads=True), dict(columns=["lsa", "type", "size"]), dict(batch_size=100)):
        want = _walk(log, **kw)
        got = _walk(log, threads=3, split_bytes=16 * page, **kw)
        assert got[0].equals(want[0]), f"{name} {kw}"
        assert got[1:] == want[1:], f"{name} {kw}"


def test_a_threaded_walk_left_early_stops_its_threads():
    """Dropping the reader ends the walk (pyarrow's ``close`` keeps the batches' iterator until
    the reader itself goes)."""
    log = walcdc.open_log(fixture_dir("p4k"))
    before = threading.active_count()
    reader = log.records(threads=2, split_bytes=4 * log.header()["page_size"], batch_size=64)
    assert reader.read_next_batch().num_rows == 64
    assert threading.active_count() == before + 2
    del reader
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


def test_a_bad_start_is_refused_before_any_thread_reads():
    log = walcdc.open_log(fixture_dir("p4k"))
    second = log.records(columns=["lsa"]).read_all().column("lsa")[1].as_py()
    with pytest.raises(walcdc.InvalidArgumentError, match="no record starts"):
        log.records(start=second + 1, threads=2)
    with pytest.raises(walcdc.InvalidArgumentError, match="threads"):
        log.records(threads=0)


def test_ordered_keeps_the_order_of_the_tasks():
    def task(i):
        def run():
            for j in range(5):
                time.sleep(0.001 * ((i * 7 + j) % 3))  # threads finish out of order
                yield (i, j)

        return run

    tasks = [task(i) for i in range(23)]
    want = [(i, j) for i in range(23) for j in range(5)]
    for threads in (1, 2, 3, 8, 40):
        assert list(ordered(tasks, threads)) == want


def test_ordered_raises_in_the_failing_tasks_turn():
    def task(i):
        def run():
            yield i
            if i == 5:
                raise ValueError("task 5")
            yield i

        return run

    got = []
    with pytest.raises(ValueError, match="task 5"):
        for item in ordered([task(i) for i in range(12)], 3):
            got.append(item)
    assert got == [i for i in range(5) for _ in range(2)] + [5]


def test_ordered_bounds_what_it_reads_ahead_and_stops_its_threads():
    made = [0]
    lock = threading.Lock()

    def task(i):
        def run():
            for j in range(1000):
                with lock:
                    made[0] += 1
                yield j

        return run

    before = threading.active_count()
    items = ordered([task(i) for i in range(6)], 3, depth=2)
    taken = [next(items) for _ in range(10)]
    time.sleep(0.3)  # the threads run ahead as far as they may
    with lock:
        ahead = made[0] - len(taken)
    # Each of the 3 threads holds at most `depth` items, and one more in its hand.
    assert ahead <= 3 * (2 + 1), ahead
    items.close()
    assert threading.active_count() == before


def test_range_sizes_and_windows():
    assert split_bytes_for(1 << 30, 2) == 16 << 20
    assert split_bytes_for(10 << 20, 2) == 2 << 20
    assert default_threads() >= 1
    ranges = [(None, 10), (10, 20), (20, None)]
    assert clip(ranges, 5, 15) == [(5, 10), (10, 15)]
    assert clip(ranges, None, None) == ranges
    assert clip(ranges, 20, None) == [(20, None)]
