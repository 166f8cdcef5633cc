"""The Debezium envelope (``envelope="debezium"``): its records against the plain stream they
come from, event by event, and the optional records (tombstones, transaction BEGIN/END)."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

import walcdc
from conftest import fixture_dir
from walcdc import lsa as L
from walcdc.cli import main

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


# --- Against Debezium's own records (tests/data/debezium, see its README) -----------------------

DATA = Path(__file__).parent / "data" / "debezium"
#: Fields of ``source`` every Debezium connector has; the others are the connector's own.
COMMON_SOURCE = ("version", "connector", "name", "ts_ms", "ts_us", "ts_ns", "snapshot", "db")
COMMON_SOURCE += ("sequence", "schema", "table")
#: walcdc's own, where PostgreSQL's connector has txId, lsn and xmin.
WALCDC_SOURCE = {"trid": int, "lsa": str, "commit_lsa": str, "file": str, "user": str}
CHANGE_FIELDS = ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction")
TXN_FIELDS = ("status", "id", "ts_ms", "event_count", "data_collections")


def example(name):
    """A record of Debezium's documentation, its elisions (``{ ... }``, a ``...`` line) read
    as null and its trailing commas dropped."""
    text = (DATA / name).read_text()
    text = re.sub(r"\{ \.\.\. \}|\{\s*\n\.\.\.\n\s*\}", "null", text)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))


def kind(value):
    """The JSON type of a value: what must be the same, field by field."""
    return {bool: "boolean", int: "number", float: "number", str: "string"}.get(
        type(value), "object" if isinstance(value, dict) else "array" if value is not None else None
    )


def assert_same_value_fields(ours, theirs, where):
    """``ours`` has Debezium's fields with the same JSON types (nulls where it has nulls);
    ``source`` the fields every connector has, with walcdc's own in place of the connector's."""
    assert list(theirs) == [f for f in ours if f in theirs], where  # same names, same order
    extra = set(ours) - set(theirs) - {"transaction"}
    # Debezium's truncate example leaves out before and after (null: JsonConverter writes them).
    assert extra <= ({"before", "after"} if where == "t" else set()), where
    assert all(ours[f] is None for f in extra), where
    for field, value in theirs.items():
        if field == "source":
            continue
        assert kind(ours[field]) == kind(value), (where, field, ours[field], value)
    if "source" in theirs:
        src, their_src = ours["source"], theirs["source"]
        for field in COMMON_SOURCE:
            if field not in their_src:
                continue  # this example leaves it out
            want = "string" if field == "snapshot" else kind(their_src[field])
            assert kind(src[field]) == want, (where, field)
        assert set(src) == set(COMMON_SOURCE) | set(WALCDC_SOURCE), where
        for field, type_ in WALCDC_SOURCE.items():
            assert src[field] is None or isinstance(src[field], type_), (where, field)


def jsonl(tmp_path, *flags):
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}.jsonl"
    r = CliRunner().invoke(
        main, ["extract", SAMPLE, "-o", str(out), "--envelope", "debezium", *flags]
    )
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def split(line):
    """(kind, value, key) of a JSON Lines record of the envelope."""
    key = line.pop("key")
    if "payload" in line:  # the schemas form: the value is {schema, payload}
        payload = line["payload"]
        what = "tombstone" if payload is None else payload.get("status") or payload["op"]
        return what, (None if payload is None else line), key
    if line.get("op"):
        return line["op"], {f: line[f] for f in CHANGE_FIELDS}, key
    if line.get("status"):
        return line["status"], {f: line[f] for f in TXN_FIELDS}, key
    assert all(v is None for v in line.values())  # a tombstone: a null value
    return "tombstone", None, key


def test_plain_records_have_debeziums_fields(tmp_path):
    """Each kind of record, as JSON Lines, field by field against Debezium's."""
    lines = jsonl(tmp_path, "--debezium-tombstones", "--debezium-transactions")
    got = defaultdict(list)
    for line in lines:
        what, value, key = split(dict(line))
        got[what].append((value, key, line))
    assert set(got) == {"c", "u", "d", "t", "tombstone", "BEGIN", "END"}
    payload = {
        "c": example("postgresql-create.json")["payload"],
        "u": example("postgresql-update.json")["payload"],
        "d": example("postgresql-delete.json")["payload"],
        "t": example("postgresql-truncate.json")["payload"],
    }
    enriched = example("vitess-transaction-enriched.json")
    for op, theirs in payload.items():
        for value, key, line in got[op]:
            assert_same_value_fields(value, theirs, op)
            # The transaction block as in an event of Debezium's with transaction metadata.
            assert list(value) == list(enriched)
            assert {k: kind(v) for k, v in value["transaction"].items()} == {
                k: kind(v) for k, v in enriched["transaction"].items()
            }
            assert all(line[f] is None for f in TXN_FIELDS if f not in CHANGE_FIELDS)
            if op == "t":
                assert key is None and value["before"] is None and value["after"] is None
            else:
                assert kind(key) == "object"
    their_key = example("mysql-key.json")["payload"]
    for value, key, _ in got["tombstone"]:
        tombstone = example("tombstone.json")
        assert value is tombstone["value"] is None
        assert kind(key) == kind(their_key) == "object"
    for status in ("BEGIN", "END"):
        theirs = example(f"postgresql-transaction-{status.lower()}.json")
        for value, key, _ in got[status]:
            assert list(value) == list(theirs)
            for field in theirs:
                assert kind(value[field]) == kind(theirs[field]), (status, field)
            for c, their_c in zip(
                value["data_collections"] or [], theirs["data_collections"] or []
            ):
                assert {k: kind(v) for k, v in c.items()} == {
                    k: kind(v) for k, v in their_c.items()
                }
            assert key == {"id": value["id"]}


def test_schema_and_payload_have_debeziums_fields(tmp_path):
    """The schemas form against Debezium's create event (schema and payload) and a recorded
    event with typed columns and the transaction block."""
    lines = jsonl(
        tmp_path, "--debezium-schemas", "--debezium-tombstones", "--debezium-transactions"
    )
    theirs = example("postgresql-create.json")  # the schema is the same for every op
    payloads = {
        op: example(f"postgresql-{name}.json")["payload"]
        for op, name in (("c", "create"), ("u", "update"), ("d", "delete"), ("t", "truncate"))
    }
    recorded = json.loads((DATA / "sqlserver-redis-delete-value.json").read_text())
    recorded_key = json.loads((DATA / "sqlserver-redis-delete-key.json").read_text())
    kinds = Counter()
    for line in lines:
        what, value, key = split(dict(line))
        kinds[what] += 1
        if what == "tombstone":
            assert line["schema"] is None and line["payload"] is None
            assert set(key) == set(recorded_key) == {"schema", "payload"}
            continue
        if what in ("BEGIN", "END"):
            their = example(f"postgresql-transaction-{what.lower()}.json")
            assert set(value["payload"]) == set(their)
            assert key["payload"] == {"id": value["payload"]["id"]}
            assert_schema_describes(value["schema"], value["payload"])
            continue
        assert list(value) == list(theirs) == ["schema", "payload"]
        assert_same_value_fields(value["payload"], payloads[what], what)
        schema = value["schema"]
        assert list(schema) == list(theirs["schema"])
        names = [f["field"] for f in schema["fields"]]
        assert names == [f["field"] for f in theirs["schema"]["fields"]] + ["transaction"]
        for ours, their in zip(schema["fields"], theirs["schema"]["fields"]):
            assert list(ours) == list(their), ours["field"]
            if ours["field"] == "source":
                by_name = {f["field"]: f for f in ours["fields"]}
                for f in their["fields"]:
                    if f["field"] in COMMON_SOURCE and f["field"] != "snapshot":
                        assert (by_name[f["field"]]["type"], by_name[f["field"]]["optional"]) == (
                            f["type"],
                            f["optional"],
                        ), f
            elif ours["field"] in ("before", "after"):
                for column in ours["fields"]:
                    assert {"type", "optional", "field"} <= set(column)
            else:
                assert ours == their
        # snapshot and transaction as Debezium's recorded events have them.
        their_fields = {f["field"]: f for f in recorded["schema"]["fields"]}
        ours = {f["field"]: f for f in schema["fields"]}
        their_snapshot = next(
            f for f in their_fields["source"]["fields"] if f["field"] == "snapshot"
        )
        our_snapshot = next(f for f in ours["source"]["fields"] if f["field"] == "snapshot")
        assert set(our_snapshot) == set(their_snapshot) and our_snapshot["type"] == "string"
        assert {k: v for k, v in ours["transaction"].items() if k not in ("name", "version")} == (
            their_fields["transaction"]
        )
        assert_schema_describes(schema, value["payload"])
        if key is not None:
            assert list(key) == list(recorded_key)
            assert_schema_describes(key["schema"], key["payload"])
    assert set(kinds) == {"c", "u", "d", "t", "tombstone", "BEGIN", "END"}


def assert_schema_describes(schema, value):
    """``value`` is what JsonConverter writes for ``schema``: every field there, of its type."""
    if value is None:
        assert schema.get("optional", False), schema
        return
    t = schema["type"]
    if t == "struct":
        assert [f["field"] for f in schema["fields"]] == list(value), schema.get("name")
        for f in schema["fields"]:
            assert_schema_describes(f, value[f["field"]])
    elif t == "array":
        for item in value:
            assert_schema_describes(schema["items"], item)
    else:
        want = {"int8": int, "int16": int, "int32": int, "int64": int, "float": float}
        want.update(double=float, boolean=bool, string=str, bytes=str)
        assert isinstance(value, want[t]) and (t.startswith("int") or not isinstance(value, bool))
        if t == "bytes":
            base64.b64decode(value, validate=True)


# --- Typed values (the schemas form) ----------------------------------------------------------


def test_typed_encodings_as_debeziums():
    from walcdc.connect import encode, value_schema

    numeric = {"type_name": "NUMERIC", "precision": 19, "scale": 4}
    # Debezium's recorded event: sal 200000.0000 and comm 10.0000 (DECIMAL(19,4)), hiredate.
    recorded = json.loads((DATA / "sqlserver-redis-delete-value.json").read_text())
    before = recorded["payload"]["before"]
    assert encode(numeric, "200000.0000", "precise") == before["sal"] == "dzWUAA=="
    assert encode(numeric, "10.0000", "precise") == before["comm"] == "AYag"
    fields = {f["field"]: f for f in recorded["schema"]["fields"][0]["fields"]}
    ours = {**value_schema(numeric, "precise"), "optional": True, "field": "sal"}
    assert ours == fields["sal"]
    datetime_ = {"type_name": "DATETIME", "precision": 23, "scale": 3}
    assert encode(datetime_, "2019-07-09 00:00:00.000", "precise") == before["hiredate"]
    assert {**value_schema(datetime_, "precise"), "optional": True, "field": "hiredate"} == (
        fields["hiredate"]
    )
    # 12.34 with scale 2 is 1234 = 0x04D2; negative values in two's complement, minimal bytes.
    two = {"type_name": "NUMERIC", "precision": 10, "scale": 2}
    assert encode(two, "12.34", "precise") == "BNI="
    assert encode(two, "-1.28", "precise") == base64.b64encode(b"\x80").decode()
    assert encode(two, "2.55", "precise") == base64.b64encode(b"\x00\xff").decode()
    assert encode(two, "0.00", "precise") == "AA=="
    assert encode(two, "12.34", "string") == "12.34" and encode(two, "12.34", "double") == 12.34
    assert value_schema(two, "string") == {"type": "string"}
    assert value_schema(two, "double") == {"type": "double"}
    money = {"type_name": "MONETARY", "precision": 15, "scale": 0}
    assert encode(money, "$-12.50", "precise") == encode(two, "-12.50", "precise")
    assert encode(money, "$nan", "precise") is None
    # Bits as a number, little-endian, sized by the length in bits.
    bits = {"type_name": "BIT", "precision": 16}
    assert base64.b64decode(encode(bits, "X'1da1'", "precise")) == b"\xa1\x1d"
    assert base64.b64decode(encode({"type_name": "BIT", "precision": 4}, "X'b'", "")) == b"\x0b"
    assert base64.b64decode(encode({"type_name": "BIT", "precision": 3}, "X'a'", "")) == b"\x05"
    assert base64.b64decode(encode({"type_name": "VARBIT", "precision": 64}, "X'baab0'", "")) == (
        b"\xb0\xaa\x0b"
    )
    # Time: days since the epoch, ms past midnight, ms since the epoch; ISO 8601 with offsets.
    assert encode({"type_name": "DATE"}, "1970-01-02", "") == 1
    assert encode({"type_name": "DATE"}, "0000-00-00", "") is None
    assert encode({"type_name": "TIME"}, "01:02:03", "") == 3723000
    assert encode({"type_name": "TIMESTAMP"}, "2023-05-27 10:11:12", "") == "2023-05-27T10:11:12Z"
    assert encode({"type_name": "DATETIMELTZ"}, "2022-02-27 23:59:59.001 UTC", "") == (
        "2022-02-27T23:59:59.001Z"
    )
    assert encode({"type_name": "DATETIMETZ"}, "2022-03-27 08:00:00.250 -05:30", "") == (
        "2022-03-27T08:00:00.250-05:30"
    )
    unresolved = "2022-03-27 13:30:00.250 UTC (unresolved zone: tz_id 0x00010101, zone 1, ...)"
    assert encode({"type_name": "DATETIMETZ"}, unresolved, "") == "2022-03-27T13:30:00.250Z"


def decoded(field, value, plain, column):
    """Checks a typed value against the plain stream's value of the same column: decodes it
    back to CUBRID's CDC text by its Kafka Connect schema (not by walcdc's encoder)."""
    name, t = field.get("name"), field["type"]
    where = (field["field"], value, plain)
    if plain is None or (isinstance(plain, str) and plain.startswith("0000-00-00")):
        assert value is None, where
        return
    if name == "org.apache.kafka.connect.data.Decimal":
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        text = f"{decimal.Decimal(unscaled).scaleb(-int(field['parameters']['scale'])):f}"
        assert plain == text or (column["type_name"] == "MONETARY" and plain.endswith(text)), where
    elif name == "io.debezium.data.Bits":
        number = int.from_bytes(base64.b64decode(value), "little")
        digits = plain[2:-1]
        length = column["precision"] if column["type_name"] == "BIT" else 4 * len(digits)
        assert len(base64.b64decode(value)) == (length + 7) // 8, where
        assert number << (4 * len(digits) - length) == int(digits or "0", 16), where
    elif name == "io.debezium.time.Date":
        assert str(datetime.date(1970, 1, 1) + datetime.timedelta(days=value)) == plain, where
    elif name == "io.debezium.time.Time":
        assert str(datetime.timedelta(milliseconds=value)).zfill(8) == plain, where
    elif name == "io.debezium.time.Timestamp":
        when = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=value)
        assert when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] == plain, where
    elif name == "io.debezium.time.ZonedTimestamp":
        date, clock, *zone = plain.split(" ", 2)
        offset = "Z" if not zone or zone[0].startswith("UTC") else zone[0]
        assert value == f"{date}T{clock}{offset}", where
    elif name == "io.debezium.data.Json":
        assert json.loads(value) == plain, where
    elif t == "array":
        assert len(value) == len(plain), where
        for v, p in zip(value, plain):
            decoded({**field["items"], "field": field["field"]}, v, p, column["set_domains"][0])
    else:
        assert value == plain, where


def typed_against_plain(log, **kw):
    """Every change event of the schemas form against the plain event it comes from, every
    column of before, after and key; returns how many events and values were compared."""
    plain = [e for e in walcdc.read_changes(log, **kw).read_all().to_pylist() if is_event(e)]
    typed = walcdc.read_changes(
        log, envelope="debezium", envelope_options={"schemas": True}, **kw
    ).read_all()
    tables = {t["class_oid"]: t for t in walcdc.open_log(log).schemas()}
    values = 0
    assert typed.num_rows == len(plain)
    for e, schema, payload, key in zip(
        plain,
        typed.column("schema").to_pylist(),
        typed.column("payload").to_pylist(),
        typed.column("key").to_pylist(),
    ):
        schema, payload = json.loads(schema), json.loads(payload)
        assert payload["source"]["lsa"] == L.format_lsa(e["lsa"])
        assert_schema_describes(schema, payload)
        table = tables.get(e["partition_oid"]) or tables[e["class_oid"]]
        columns = {c["name"]: c for r in table["representations"] for c in r["columns"]}
        fields = {f["field"]: f for f in schema["fields"][0]["fields"]}
        for side in ("before", "after"):
            row = json.loads(e[side]) if e[side] else None
            assert (payload[side] is None) == (row is None)
            for name, value in (row or {}).items():
                if name in payload[side]:  # (a column dropped since is left out)
                    decoded(fields[name], payload[side][name], value, columns[name])
                    values += 1
        if e["key"] is not None:
            key = json.loads(key)
            assert_schema_describes(key["schema"], key["payload"])
            assert list(key["payload"]) == list(json.loads(e["key"]))
    return len(plain), values


def test_every_typed_value_of_the_sample_is_the_plain_one():
    events, values = typed_against_plain(SAMPLE)
    assert events > 100 and values > 3000


def test_every_typed_value_of_every_type():
    """p4k's t_types (every scalar type, sets, NULLs; updates that change several columns)."""
    events, values = typed_against_plain(fixture_dir("p4k"), tables="t_types")
    assert events > 200 and values > 5000


def test_rows_written_before_an_alter_read_as_cubrid_reads_them():
    """p4k's t_alter: ADD COLUMN c DATETIME DEFAULT '2020-01-01 ...', DROP COLUMN b; a row
    written before both, updated after them: its before shows c's default and no b, in the
    same schema as its after."""
    log = fixture_dir("p4k")
    events, _ = typed_against_plain(log, tables="t_alter")
    rows = walcdc.read_changes(
        log, tables="t_alter", envelope="debezium", envelope_options={"schemas": True}
    ).read_all()
    old = 0
    for schema, payload in zip(
        rows.column("schema").to_pylist(), rows.column("payload").to_pylist()
    ):
        payload = json.loads(payload)
        names = [f["field"] for f in json.loads(schema)["fields"][0]["fields"]]
        for row in (payload["before"], payload["after"]):
            assert row is None or list(row) == names
        if payload["op"] == "u" and "c" in names and payload["before"]["c"] == 1577836800000:
            old += 1
    assert events > 40 and old > 5


def test_an_end_held_back_at_a_cursor_comes_with_the_resumed_stream():
    """A cursor taken right after a transaction's last event, before its END (which waits for
    the next transaction): the resumed stream gives that END first, counting every event."""
    kw = dict(envelope="debezium", envelope_options=BOTH, tables="t_chg", batch_size=5)
    stream = walcdc.read_changes(SAMPLE, **kw)
    first = next(iter(stream)).to_pylist()
    assert [r["status"] or r["op"] for r in first] == ["BEGIN", "c", "c", "c", "c"]
    rest = walcdc.read_changes(SAMPLE, cursor=stream.cursor, **kw).read_all().to_pylist()
    assert (rest[0]["status"], rest[0]["id"], rest[0]["event_count"]) == (
        "END",
        first[0]["id"],
        4,
    )
    assert rest[1]["status"] == "BEGIN"
