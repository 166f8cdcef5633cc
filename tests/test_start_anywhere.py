"""A change stream started in the middle of a log from a supplied state (catalog and open
transactions) gives exactly the one-pass stream's events from there, and reads no page before
its start (pages fetched are counted by the log set)."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

import walcdc
from conftest import assert_same_rows, fixture_dir
from walcdc import lsa as L


@pytest.fixture(scope="module")
def p4k_lsas():
    log = walcdc.open_log(fixture_dir("p4k"))
    return log.records().read_all().column("lsa").to_pylist()


@pytest.mark.parametrize("committed_only", [True, False])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9])
def test_start_from_state_equals_one_pass(p4k_lsas, fraction, committed_only):
    d = fixture_dir("p4k")
    log = walcdc.open_log(d)
    everything = walcdc.read_changes(log, committed_only=committed_only).read_all()
    cut = p4k_lsas[int(len(p4k_lsas) * fraction)]
    head = walcdc.read_changes(log, end=cut, committed_only=committed_only)
    first = head.read_all()
    state = head.state()
    assert state.position == cut

    fresh = walcdc.open_log(d)  # its own page counter
    page = L.split(cut)[0]
    fresh._native.watch_below(page)
    rest = walcdc.read_changes(fresh, state=state, committed_only=committed_only).read_all()
    assert_same_rows(pa.concat_tables([first, rest]), everything, f"cut at {fraction}")
    assert rest.num_rows > 0
    # No prefix walk: no page before the start is read (these cuts need no chase before it).
    assert fresh._native.watched_pages() == []

    # The counter is real: a start without a state learns the catalog from the first page.
    plain = walcdc.open_log(d)
    plain._native.watch_below(page)
    walcdc.read_changes(plain, start=cut, committed_only=committed_only)
    assert len(plain._native.watched_pages()) >= page - 100


def test_state_carries_open_transactions(p4k_lsas):
    # Inside the huge transaction (first record 857|3008, committed much later): its events
    # before the cut live in the state, not in the log the new stream reads.
    log = walcdc.open_log(fixture_dir("p4k"))
    cut = next(x for x in p4k_lsas if x > L.parse("4000|0"))
    head = walcdc.read_changes(log, end=cut)
    head.read_all()
    state = head.state()
    assert state.open_transactions >= 1 and state.buffered_events > 10_000
    # A state is reusable: two streams from it give the same events.
    a = walcdc.read_changes(log, state=state).read_all()
    b = walcdc.read_changes(log, state=state).read_all()
    assert a == b and a.num_rows > state.buffered_events


def test_state_arguments(p4k_lsas):
    log = walcdc.open_log(fixture_dir("p4k"))
    head = walcdc.read_changes(log, end=p4k_lsas[1000])
    head.read_all()
    state = head.state()
    with pytest.raises(walcdc.InvalidArgumentError, match="state="):
        walcdc.read_changes(log, state=state, start=p4k_lsas[5])
    with pytest.raises(walcdc.InvalidArgumentError, match="other stream"):
        walcdc.read_changes(log, state=state, committed_only=False)
    # In the middle of a committed transaction's events the state is not defined.
    part = walcdc.read_changes(log, batch_size=1)
    part.read_next_batch()
    with pytest.raises(walcdc.InvalidArgumentError, match="read the events"):
        part.state()


def test_state_as_bytes_and_pickled(p4k_lsas):
    log = walcdc.open_log(fixture_dir("p4k"))
    cut = next(x for x in p4k_lsas if x > L.parse("4100|0"))
    head = walcdc.read_changes(log, end=cut)
    head.read_all()
    state = head.state()
    want = walcdc.read_changes(log, state=state).read_all()
    data = state.to_bytes()
    again = walcdc.ReaderState.from_bytes(data)
    assert (again.position, again.open_transactions, again.buffered_events) == (
        state.position,
        state.open_transactions,
        state.buffered_events,
    )
    assert walcdc.read_changes(log, state=again).read_all() == want
    shipped = pickle.loads(pickle.dumps(state))
    assert walcdc.read_changes(log, state=shipped).read_all() == want
    # A state belongs to its database.
    with pytest.raises(walcdc.InvalidArgumentError, match="another database"):
        walcdc.read_changes(fixture_dir("p16k"), state=again)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b"",
        lambda b: b[:8],
        lambda b: b[:-1],
        lambda b: b + b"\0",
        lambda b: b"WALCDCRS\x09\x00" + b[10:],
        lambda b: b"not a state at all",
    ],
)
def test_damaged_state_bytes_are_refused(p4k_lsas, damage):
    log = walcdc.open_log(fixture_dir("p4k"))
    head = walcdc.read_changes(log, end=p4k_lsas[2000])
    head.read_all()
    with pytest.raises(walcdc.InvalidArgumentError, match="not a walcdc reader state"):
        walcdc.ReaderState.from_bytes(damage(head.state().to_bytes()))
