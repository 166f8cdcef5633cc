"""Following a live log (``read_changes(follow=True)``, ``walcdc follow``): another process
writes and flushes the log as a server does (tests/live_writer.py: pages flushed while
transactions are open, flushes cut short mid-page, the ring wrapping, archives appearing) while
the stream follows it; what the stream gives must be exactly the writer's committed changes,
each once. Every loop here is bounded in time."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import walcdc
from walcdc.testing import LogWriter, Workload, cdc_oid

HERE = Path(__file__).resolve().parent
KEYS = ("lsa", "trid", "commit_lsa", "op", "class_oid", "row_oid")


def _start_writer(
    directory: Path, seed: int, transactions: int, ring_pages: int = 24, resume: bool = False
):
    cmd = [
        sys.executable,
        str(HERE / "live_writer.py"),
        str(directory),
        str(seed),
        str(transactions),
        str(ring_pages),
    ] + (["--resume"] if resume else [])
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 30
    while not (directory / "walcdc_lgat").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the writer did not start"
        time.sleep(0.01)
    return proc


def _as_model(row) -> dict:
    out = {k: row[k] for k in KEYS}
    for k in ("before_image", "after_image"):
        out[k] = row[k].hex() if row[k] is not None else None
    return out


def _model(directory: Path) -> list:
    return [
        {k: e[k] for k in KEYS + ("before_image", "after_image")}
        for e in map(json.loads, (directory / "model.jsonl").read_text().splitlines())
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_following_a_live_log_gives_exactly_the_committed_changes(tmp_path, seed):
    writer = _start_writer(tmp_path, seed, 400)
    stream = walcdc.read_changes(
        tmp_path, follow=True, poll_interval=0.02, idle_timeout=3, decode=False, batch_size=50
    )
    rows, early = [], 0
    try:
        for batch in stream:
            if writer.poll() is None:
                early += batch.num_rows  # read while the writer was still writing
            rows += batch.to_pylist()
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0
    model = _model(tmp_path)
    assert len(model) > 1000
    assert [_as_model(r) for r in rows] == model
    assert early > 0, "nothing was read while the log was being written"
    archives = [p for p in os.listdir(tmp_path) if "_lgar" in p]
    assert len(archives) > 5, "the ring should have wrapped into archives"
    assert stream.cursor.last_commit_lsa == max(r["commit_lsa"] for r in rows)


def test_a_writer_killed_mid_page_and_restarted(tmp_path):
    """The writer is killed (SIGKILL) while it writes, perhaps in the middle of a page; a new
    writer goes on with the log, aborting what the crash left open. The stream following all
    along gives exactly the transactions whose commit reached the disk, each once."""
    writer = _start_writer(tmp_path, 5, 100_000)
    stream = walcdc.read_changes(
        tmp_path, follow=True, poll_interval=0.02, idle_timeout=3, decode=False, batch_size=50
    )
    rows = []
    batches = iter(stream)
    try:
        while len(rows) < 1500:
            rows += next(batches).to_pylist()
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert not (tmp_path / "done").exists()
    restarted = _start_writer(tmp_path, 6, 300, resume=True)
    try:
        for batch in batches:
            rows += batch.to_pylist()
    finally:
        restarted.wait(timeout=120)
    assert restarted.returncode == 0 and (tmp_path / "done").exists()
    model = _model(tmp_path)
    assert len(model) > len(rows) // 2 > 500
    assert [_as_model(r) for r in rows] == model


def _finished_log(directory: Path, db_creation: int = 1_700_000_000) -> list:
    w = LogWriter(page_size=4096, active_pages=16, archive_pages=8, db_creation=db_creation)
    work = Workload(w)
    for i in range(30):
        t = work.begin(1 + i % 3)
        t.insert(cdc_oid(0, 200, 1), bytes([i]) * 50, 1000, 1 + i)
        t.commit()
    w.finish(directory)
    return [e for txn in work.committed for e in txn]


def test_close_from_another_thread_ends_the_stream(tmp_path):
    events = _finished_log(tmp_path)
    stream = walcdc.read_changes(tmp_path, follow=True, poll_interval=0.05, decode=False)
    timer = threading.Timer(0.5, stream.close)
    timer.start()
    started = time.monotonic()
    rows = stream.read_all()
    assert time.monotonic() - started < 10
    assert rows.num_rows == len(events)


def test_idle_timeout_ends_the_stream(tmp_path):
    _finished_log(tmp_path)
    started = time.monotonic()
    rows = walcdc.read_changes(
        tmp_path, follow=True, poll_interval=0.05, idle_timeout=0.3
    ).read_all()
    assert 0.3 <= time.monotonic() - started < 10 and rows.num_rows == 30


def test_another_database_in_the_directory_is_refused(tmp_path):
    _finished_log(tmp_path)
    other = tmp_path / "other"
    _finished_log(other, db_creation=1_800_000_000)
    stream = walcdc.read_changes(tmp_path, follow=True, poll_interval=0.05, idle_timeout=5)
    first = stream.read_next_batch()
    assert first.num_rows == 30
    for f in os.listdir(other):  # the files replaced (renamed over: the old ones stay mapped)
        os.replace(other / f, tmp_path / f)
    with pytest.raises(walcdc.MismatchedLogSetError, match="another database"):
        stream.read_next_batch()


def test_refused_arguments(tmp_path):
    _finished_log(tmp_path)
    with pytest.raises(walcdc.InvalidArgumentError, match="poll_interval"):
        walcdc.read_changes(tmp_path, follow=True, poll_interval=0)


def test_walcdc_follow_writes_json_lines_and_stops_on_sigterm(tmp_path):
    log = tmp_path / "log"
    _finished_log(log)
    out, cursor = tmp_path / "events.jsonl", tmp_path / "cursor.json"
    cmd = [
        sys.executable,
        "-m",
        "walcdc.cli",
        "follow",
        str(log),
        "-o",
        str(out),
        "--cursor",
        str(cursor),
        "--poll-interval",
        "0.05",
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not cursor.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 30 and [x["op"] for x in lines] == ["insert"] * 30
    saved = walcdc.Cursor.load(cursor)
    assert saved.last_commit_lsa == lines[-1]["commit_lsa"]
    # Run again from the cursor: nothing new, nothing repeated.
    again = subprocess.run(cmd + ["--idle-timeout", "0.3"], capture_output=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert len(out.read_text().splitlines()) == 30


def _live_log(directory: Path):
    """A writer flushing like a server (small ring: archives appear quickly)."""
    w = LogWriter(page_size=4096, active_pages=16, archive_pages=8, stream_to=directory)
    return w, Workload(w)


def _transactions(w, work, n: int, start: int) -> None:
    for i in range(start, start + n):
        t = work.begin(1 + i % 3)
        body = random.Random(i).randbytes(700)  # incompressible: pages fill quickly
        t.insert(cdc_oid(0, 200, 1), body, 1000, 1 + i % 500)
        t.commit()
    w.flush()


def test_archives_removed_behind_the_stream_are_not_missed(tmp_path):
    w, work = _live_log(tmp_path)
    _transactions(w, work, 150, 0)
    stream = walcdc.read_changes(tmp_path, follow=True, poll_interval=0.05, idle_timeout=1)
    batches = iter(stream)
    first = next(batches)
    assert first.num_rows == 150
    # Everything read so far: the archives the cursor no longer needs may go.
    needed = walcdc.open_log(tmp_path).min_archive_needed(stream.cursor)
    old = [p for p in tmp_path.iterdir() if "_lgar" in p.name and int(p.name[-3:]) < needed]
    assert old, "some archives should be behind the cursor"
    for p in old:
        p.unlink()
    _transactions(w, work, 40, 150)
    rest = [b for b in batches]
    assert sum(b.num_rows for b in rest) == 40
    model = [e["lsa"] for txn in work.committed for e in txn]
    got = first.column("lsa").to_pylist() + [x for b in rest for x in b.column("lsa").to_pylist()]
    assert got == model


def test_an_archive_removed_before_the_stream_read_it_is_named(tmp_path):
    w, work = _live_log(tmp_path)
    _transactions(w, work, 5, 0)
    stream = walcdc.read_changes(tmp_path, follow=True, poll_interval=0.05, idle_timeout=5)
    batches = iter(stream)
    assert next(batches).num_rows == 5
    # The server writes more than a ring before the next look; its archives go too early.
    _transactions(w, work, 200, 5)
    newest = sorted(p for p in tmp_path.iterdir() if "_lgar" in p.name)
    for p in newest[:-1]:
        p.unlink()
    with pytest.raises(walcdc.MissingArchiveError, match="log page 1 was archived"):
        for _ in batches:
            pass


@pytest.mark.parametrize(
    "name,order",
    [
        ("p4k", ("p4k_lgar000", "p4k_lgar001", "p4k_lgar002", "p4k_lgat")),
        ("p16k", ("p16k_lgat", "p16k_lgar002", "p16k_lgar001", "p16k_lgar000")),
        ("p16k", ("p16k_lgar001", "p16k_lgat", "p16k_lgar000", "p16k_lgar002")),
    ],
    ids=["oldest-first", "newest-first", "shuffled"],
)
def test_a_follower_waits_for_volumes_copied_in_any_order(tmp_path, name, order):
    """Volumes copied into a watched directory one by one, with pauses: the follower waits for
    what is not there yet (no volume at all; the record that crosses from p4k's last archive
    into the active volume, read before that volume is copied; p16k's records, which cross
    every archive boundary; an older archive the header says exists) and gives exactly the
    events of one pass over the whole log, each once."""
    from conftest import assert_same_rows, fixture_dir

    src = fixture_dir(name)
    want = walcdc.read_changes(src, decode=False).read_all()
    watched = tmp_path / "watched"
    watched.mkdir()
    (tmp_path / "staging").mkdir()

    def copy_in():
        for name in order:
            time.sleep(0.4)
            staged = tmp_path / "staging" / name
            staged.write_bytes((src / name).read_bytes())
            os.replace(staged, watched / name)  # appears whole, as a finished copy does

    copier = threading.Thread(target=copy_in)
    copier.start()
    try:
        # Opened on an empty directory: it waits for the first volume.
        stream = walcdc.read_changes(
            watched, follow=True, poll_interval=0.05, idle_timeout=2, decode=False
        )
        rows = stream.read_all()
    finally:
        copier.join(timeout=60)
    assert_same_rows(rows, want)


def test_walcdc_follow_waits_for_a_directory_filled_later(tmp_path):
    """``walcdc follow`` started on an empty directory says what it waits for, then writes
    every event once the volumes are copied in."""
    from conftest import fixture_dir

    src = fixture_dir("breadth")
    want = walcdc.read_changes(src).read_all().num_rows
    watched, out = tmp_path / "watched", tmp_path / "out.jsonl"
    watched.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "walcdc.cli", "follow", str(watched), "-o", str(out)]
        + ["--poll-interval", "0.05", "--idle-timeout", "4"],
        stderr=subprocess.PIPE,
        text=True,
    )
    first: list = []
    reader = threading.Thread(target=lambda: first.append(proc.stderr.readline()), daemon=True)
    reader.start()
    try:
        reader.join(timeout=60)  # it says what it waits for before anything is copied
        assert first and "walcdc: warning: waiting for the log" in first[0], first
        for f in sorted(src.iterdir()):
            (tmp_path / f.name).write_bytes(f.read_bytes())
            os.replace(tmp_path / f.name, watched / f.name)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert len(out.read_text().splitlines()) == want


def test_walcdc_follow_says_what_it_skips_as_it_happens(tmp_path):
    """A damaged record read by a long-running ``walcdc follow`` is reported when it is read
    (a ``walcdc: warning:`` line), not when the command ends."""
    from test_bad_input import _hostile_copy

    _hostile_copy(tmp_path, "p4k_null_prev_tranlsa.json")
    proc = subprocess.Popen(
        [sys.executable, "-m", "walcdc.cli", "follow", str(tmp_path), "-o", str(tmp_path / "o")],
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list = []

    def read():
        for line in proc.stderr:
            lines.append(line)
            if "UnfinishedTransactionDropped" in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        reader.join(timeout=120)
        assert any("walcdc: warning:" in x and "dropped" in x for x in lines), lines
        assert proc.poll() is None  # still following: said as it happened
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_poll_refreshes_the_log_set_it_has():
    """Each poll's snapshot is the previous one refreshed (archives kept, the rest opened): it
    reads as a log set opened anew does."""
    import pyarrow as pa

    path = walcdc.samples.sample_path()
    first = walcdc.open_log(path)._native
    again = first.refreshed([str(path)])
    assert again.header_info() == first.header_info()

    def records(native):
        return pa.Table.from_batches([pa.record_batch(b) for b in native.records()])

    assert records(again).equals(records(first))
