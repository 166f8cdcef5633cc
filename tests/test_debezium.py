"""The Debezium envelope (``envelope="debezium"``): its records against the plain stream they
come from, event by event, and the optional records (tombstones, transaction BEGIN/END)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

import walcdc
from conftest import fixture_dir
from walcdc import lsa as L

SAMPLE = str(walcdc.samples.sample_path())
LETTERS = {"insert": "c", "update": "u", "delete": "d"}
BOTH = {"tombstones": True, "transactions": True}


def is_event(e):
    return e["op"] in LETTERS or (e["op"] == "ddl" and e["ddl_type"] == 4)


def txn_id(e):
    return f"{e['trid']}:{L.format_lsa(e['commit_lsa'])}"


def expected_records(plain, tombstones=False, transactions=False):
    """What the envelope should give for the plain events: (kind, plain event or transaction
    summary) in order, built from the plain stream alone."""
    out, open_txn, counts = [], None, Counter()

    def end():
        if open_txn is not None and transactions:
            out.append(("END", (open_txn, sum(counts.values()), dict(counts))))

    for e in filter(is_event, plain):
        if txn_id(e) != open_txn:
            end()
            open_txn, counts = txn_id(e), Counter()
            if transactions:
                out.append(("BEGIN", (open_txn, None, None)))
        counts[e["table"]] += 1
        out.append(("event", e))
        if tombstones and e["op"] == "delete":
            out.append(("tombstone", e))
    end()
    return out


@pytest.fixture(scope="module")
def sample_plain():
    return walcdc.read_changes(SAMPLE).read_all().to_pylist()


@pytest.mark.parametrize("batch_size", [5, 65536])
def test_optional_records_in_place(sample_plain, batch_size):
    rows = (
        walcdc.read_changes(
            SAMPLE, envelope="debezium", envelope_options=BOTH, batch_size=batch_size
        )
        .read_all()
        .to_pylist()
    )
    want = expected_records(sample_plain, tombstones=True, transactions=True)
    assert len(rows) == len(want)
    kinds = Counter(k for k, _ in want)
    assert kinds["tombstone"] > 5 and kinds["BEGIN"] == kinds["END"] > 30
    value_fields = [k for k in rows[0] if k != "key"]
    change_fields = ["before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction"]
    txn_fields = ["status", "id", "ts_ms", "event_count", "data_collections"]
    for d, (kind, what) in zip(rows, want):
        if kind == "event":
            assert d["op"] == LETTERS.get(what["op"], "t") and d["key"] == what["key"]
            assert d["source"]["lsa"] == L.format_lsa(what["lsa"])
            assert all(d[f] is None for f in value_fields if f not in change_fields)
        elif kind == "tombstone":
            # Debezium's tombstone: the delete's key, a null value.
            assert d["key"] == what["key"]
            assert all(d[f] is None for f in value_fields)
        else:
            txn, count, per_table = what
            assert d["status"] == kind and d["id"] == txn
            assert json.loads(d["key"]) == {"id": txn}
            assert d["ts_ms"] % 1000 == 0  # the commit time (whole seconds)
            assert all(d[f] is None for f in value_fields if f not in txn_fields)
            if kind == "BEGIN":
                assert d["event_count"] is None and d["data_collections"] is None
            else:
                assert d["event_count"] == count
                assert {c["data_collection"]: c["event_count"] for c in d["data_collections"]} == (
                    per_table
                )
    # Every transaction's records carry its events' transaction.id.
    begins = [d["id"] for d in rows if d.get("status") == "BEGIN"]
    assert begins == list(dict.fromkeys(d["transaction"]["id"] for d in rows if d["op"]))


def test_options_are_checked():
    with pytest.raises(walcdc.InvalidArgumentError, match="envelope_options"):
        walcdc.read_changes(SAMPLE, envelope="debezium", envelope_options={"tombstone": True})
    with pytest.raises(walcdc.InvalidArgumentError, match="envelope="):
        walcdc.read_changes(SAMPLE, envelope_options={"tombstones": True})
    names = walcdc.read_changes(SAMPLE, envelope="debezium").schema.names
    assert "status" not in names  # no transaction records asked for


def test_counts_go_on_from_a_cursor_inside_a_transaction():
    """A cursor taken inside p4k's 50,000-event transaction: the resumed stream's events go on
    with the transaction's positions, gives no second BEGIN, and its END counts every event."""
    log = fixture_dir("p4k")
    kw = dict(envelope="debezium", envelope_options=BOTH, tables="t_huge", batch_size=1000)
    stream = walcdc.read_changes(log, **kw)
    batches = iter(stream)
    first = [r for _ in range(3) for r in next(batches).to_pylist()]
    cursor = stream.cursor
    assert cursor.txn_offset > 0
    last = [r for r in first if r["op"]][-1]["transaction"]
    rest = walcdc.read_changes(log, cursor=cursor, **kw).read_all().to_pylist()
    assert rest[0]["transaction"]["id"] == last["id"]
    assert rest[0]["transaction"]["total_order"] == last["total_order"] + 1
    end = next(r for r in rest if r["status"] == "END")
    events = [r for r in first + rest if r["op"] and r["transaction"]["id"] == last["id"]]
    assert end["id"] == last["id"] and end["event_count"] == len(events) >= 50_000
    assert [r["transaction"]["total_order"] for r in events] == list(range(1, len(events) + 1))
    assert [
        r["status"] for r in first + rest if r.get("status") == "BEGIN" and r["id"] == end["id"]
    ] == ["BEGIN"]


def test_total_order_leaves_out_the_ddl_rows():
    """p4k's serial inserts: the serial's DDL row comes first in the plain transaction, the
    envelope's first event is 1 all the same."""
    log = fixture_dir("p4k")
    plain = walcdc.read_changes(log, tables="t_serial").read_all().to_pylist()
    rows = walcdc.read_changes(log, tables="t_serial", envelope="debezium").read_all().to_pylist()
    shifted = [e for e in plain if is_event(e) and e["txn_seq"] > 0]
    assert shifted, "no transaction with a DDL row before its events"
    total, order = defaultdict(int), defaultdict(int)
    for d, e in zip(rows, filter(is_event, plain), strict=True):
        total[txn_id(e)] += 1
        order[(txn_id(e), e["table"])] += 1
        assert d["transaction"] == {
            "id": txn_id(e),
            "total_order": total[txn_id(e)],
            "data_collection_order": order[(txn_id(e), e["table"])],
        }


def test_a_followed_log_gets_each_end_with_its_poll():
    rows = (
        walcdc.read_changes(
            SAMPLE,
            envelope="debezium",
            envelope_options={"transactions": True},
            follow=True,
            idle_timeout=0.3,
            poll_interval=0.05,
        )
        .read_all()
        .to_pylist()
    )
    status = [r["status"] for r in rows if r["status"]]
    assert status == ["BEGIN", "END"] * (len(status) // 2) and status
