"""Property tests of change events: random workloads (interleaved transactions that commit,
abort or stay open, savepoint rollbacks, failed statements, a huge transaction, trid reuse, tiny
archives so records span volumes) written the way CUBRID logs them; the committed stream must be
exactly the model's committed changes, spilling or not, and a stream cut anywhere and resumed from
its cursor must give the same events as one pass."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import walcdc
from conftest import tiered
from walcdc.testing import LogWriter, Workload, cdc_oid, heap_row

CLASSES = [cdc_oid(0, 229, 1), cdc_oid(0, 229, 2)]
COLUMNS = ["lsa", "trid", "op", "class_oid", "row_oid", "before_image", "after_image", "commit_lsa"]


@st.composite
def body(draw):
    n = draw(st.one_of(st.integers(4, 120), st.integers(250, 3000)))
    seed = draw(st.binary(min_size=1, max_size=6))
    if draw(st.booleans()):
        return (seed * (n // len(seed) + 1))[:n]
    return draw(st.binary(min_size=n, max_size=n))


OPS = ["insert", "insert", "update", "delete", "savepoint", "rollback", "failed"]


@st.composite
def transaction(draw):
    ops = draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=10))
    outcome = draw(st.sampled_from(["commit", "commit", "commit", "abort", "open"]))
    return ops, outcome


@st.composite
def workload(draw):
    page_size = draw(st.sampled_from([4096, 8192, 16384]))
    active = draw(st.integers(4, 12))
    archive = draw(st.integers(1, active))
    txns = draw(st.lists(transaction(), min_size=1, max_size=10))
    huge = draw(st.sampled_from([0, 0, 200]))
    if huge:
        txns.append((["insert"] * huge, "commit"))
    schedule = draw(st.lists(st.integers(0, 1000), min_size=400, max_size=400))
    bodies = draw(st.lists(body(), min_size=8, max_size=8))
    return page_size, active, archive, txns, schedule, bodies


def write(spec, directory):
    """Writes the workload; returns the model's committed transactions and the open trids."""
    page_size, active, archive, txns, schedule, bodies = spec
    w = LogWriter(page_size=page_size, active_pages=active, archive_pages=archive)
    wl = Workload(w)
    free_trids = [1, 2, 3]  # few trids: ended transactions' trids are reused
    todo = list(range(len(txns)))
    running = {}  # index -> (Transaction, remaining ops, savepoints)
    slot = 0
    at_time = 1_700_000_000
    open_trids = []
    step = 0
    while todo or running:
        while todo and len(running) < 3:
            if not free_trids:  # every small trid is held by an open transaction
                free_trids.append(max(open_trids + [t.trid for t, _, _ in running.values()]) + 1)
            i = todo.pop(0)
            running[i] = (wl.begin(free_trids.pop(0)), list(txns[i][0]), [])
        i = sorted(running)[schedule[step % len(schedule)] % len(running)]
        step += 1
        t, ops, sps = running[i]
        if not ops:
            outcome = txns[i][1]
            at_time += 1
            if outcome == "commit":
                t.commit(at_time)
            elif outcome == "abort":
                t.abort(at_time)
            elif t.last is not None:  # a transaction that wrote nothing leaves no trace
                open_trids.append(t.trid)
            del running[i]
            if outcome != "open" or t.last is None:
                free_trids.append(t.trid)
            continue
        op = ops.pop(0)
        b = bodies[(step * 7 + slot) % len(bodies)]
        cls = CLASSES[slot % 2]
        slot += 1
        if op == "insert":
            t.insert(cls, b, page=100 + slot // 50, slot=slot % 50 + 1)
        elif op == "update":
            t.update(cls, heap_row(1, b), heap_row(1, b[::-1] + b"u"), page=90, slot=slot % 50 + 1)
        elif op == "delete":
            t.delete(cls, heap_row(1, b), page=80, slot=slot % 50 + 1)
        elif op == "savepoint":
            sps.append(t.savepoint())
        elif op == "rollback" and sps:
            t.rollback_to(sps.pop())
        elif op == "failed":
            t.failed_statement(cls, b, page=70, slot=slot % 50 + 1)
    out = w.finish(directory)
    return wl.committed, open_trids, out


def rows(stream):
    t = stream.read_all()
    return [tuple(r[c] for c in COLUMNS) for r in t.select(COLUMNS).to_pylist()]


def model_rows(committed):
    return [tuple(e[c] for c in COLUMNS) for txn in committed for e in txn]


@settings(
    max_examples=tiered(60, 120),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=workload(), data=st.data())
def test_committed_stream_equals_model_and_resumes_exactly(spec, data):
    with tempfile.TemporaryDirectory() as d:
        committed, open_trids, out = write(spec, d)
        log = walcdc.open_log(d)
        full = walcdc.read_changes(log)
        got = rows(full)
        assert got == model_rows(committed)
        assert sorted(p["trid"] for p in full.pending) == sorted(open_trids)
        # A tiny memory bound spills every transaction to disk; the events come back the same.
        spilled = walcdc.read_changes(log, memory_limit=1)
        assert rows(spilled) == got
        assert spilled.stats["spilled_events"] >= len(got) - len(committed)

        # Cut at a record, resume from the cursor: the same events, no loss, no duplicate.
        lsas = out["records"] + [out["end_lsa"]]
        cut = lsas[data.draw(st.integers(0, len(lsas) - 1))]
        first = walcdc.read_changes(log, end=cut)
        a = rows(first)
        b = rows(walcdc.read_changes(log, cursor=first.cursor))
        assert a + b == got
        # ... or from the reader's state: nothing before the cut is read again.
        state = first.state()
        assert state.position == cut
        assert a + rows(walcdc.read_changes(log, state=state)) == got
        # ... also through bytes; damaged bytes are refused or read without crashing.
        raw = state.to_bytes()
        assert a + rows(walcdc.read_changes(log, state=walcdc.ReaderState.from_bytes(raw))) == got
        at = data.draw(st.integers(0, len(raw) - 1))
        flipped = raw[:at] + bytes([raw[at] ^ data.draw(st.integers(1, 255))]) + raw[at + 1 :]
        for damaged in (raw[:at], flipped):
            try:
                rows(walcdc.read_changes(log, state=walcdc.ReaderState.from_bytes(damaged)))
            except walcdc.LogError:
                pass  # refused, or read and found wanting: never a crash

        # Stop between two batches, even inside a transaction, and resume.
        n = data.draw(st.integers(1, 7))
        part = walcdc.read_changes(log, batch_size=n)
        taken = []
        for _ in range(data.draw(st.integers(0, 4))):
            try:
                batch = part.read_next_batch()
            except StopIteration:
                break
            taken += [tuple(r[c] for c in COLUMNS) for r in batch.select(COLUMNS).to_pylist()]
        rest = rows(walcdc.read_changes(log, cursor=part.cursor))
        assert taken + rest == got


@settings(
    max_examples=tiered(20, 40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=workload(), data=st.data())
def test_narrowed_stream_is_the_whole_stream_filtered(spec, data):
    """Filters pushed by a query engine (``narrow``): the rows of the whole stream that pass,
    every column as it is there (``txn_seq`` counts the rejected events too), with or without
    spilling, in both streams."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from walcdc.changes import OPTION_DEFAULTS, _open_stream

    with tempfile.TemporaryDirectory() as d:
        write(spec, d)
        log = walcdc.open_log(d)
        tables = data.draw(st.lists(st.sampled_from(CLASSES), max_size=2, unique=True))
        ops = data.draw(st.lists(st.sampled_from(["insert", "update", "delete"]), max_size=3))
        narrow = {"tables": tables or None, "ops": ops or None}
        for committed_only in (True, False):
            whole = walcdc.read_changes(log, committed_only=committed_only).read_all()
            keep = pc.is_valid(whole.column("lsa"))
            if tables:
                keep = pc.and_(
                    keep, pc.is_in(whole.column("class_oid"), pa.array(tables, pa.uint64()))
                )
            if ops:
                keep = pc.and_(keep, pc.is_in(whole.column("op").cast(pa.string()), pa.array(ops)))
            want = whole.filter(keep)
            for memory_limit in (256 << 20, 1):
                options = dict(OPTION_DEFAULTS, committed_only=committed_only)
                options["memory_limit"] = memory_limit
                stream = _open_stream(log, options, batch_size=7, narrow=narrow)
                assert stream.read_all().equals(want)
