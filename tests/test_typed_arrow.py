"""Typed change tables built in Rust against the JSON stream: for every table of every fixture,
``read_table_changes`` gives the events of ``read_changes`` (same metadata) and every typed
value, turned back into CUBRID's CDC text form here, equals the JSON stream's value of the same
attribute. The text forms are rebuilt independently of the decoder (``cdc_form``)."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import struct

import pyarrow as pa
import pytest

import walcdc
from conftest import fixture_dir

# DB_TYPE ids (spec §8.1).
INT, FLOAT, DOUBLE, STRING, OBJECT, SET, MULTISET, SEQUENCE = 1, 2, 3, 4, 5, 6, 7, 8
TIME, TIMESTAMP, DATE, MONETARY, SHORT, BLOB, CLOB = 10, 11, 12, 13, 18, 19, 20
NUMERIC, BIT, VARBIT, CHAR, NCHAR, VARNCHAR = 22, 23, 24, 25, 26, 27
BIGINT, DATETIME, ENUM, TSTZ, TSLTZ, DTTZ, DTLTZ, JSON = 31, 32, 35, 36, 37, 38, 39, 40
ZERO_DATED = {DATE, TIMESTAMP, TSLTZ, DATETIME, DTLTZ, DTTZ}
FIXTURES = ["p4k", "p16k", "crash", "breadth", "v11_2", "tde"]
# txn_seq counts the events a stream emits for a transaction: one table's stream has fewer.
META = [
    "lsa", "commit_lsa", "commit_time", "trid", "user", "op", "trigger", "row_oid",
    "table", "ddl_type", "object_type", "object_oid", "statement", "time", "error",
    "partition_oid", "file",
]  # fmt: skip


def stamp(dt: datetime.datetime, ms: bool) -> str:
    text = f"{dt.year:04}-{dt.month:02}-{dt.day:02} {dt.hour:02}:{dt.minute:02}:{dt.second:02}"
    return text + (f".{dt.microsecond // 1000:03}" if ms else "")


def zoned(v, ms: bool) -> str:
    """TIMESTAMPTZ / DATETIMETZ: local time in a fixed offset, else UTC, then the zone."""
    instant, zone = v["instant"].replace(tzinfo=None), v["zone"]
    if zone[:1] in "+-":
        sign = 1 if zone[0] == "+" else -1
        parts = [int(x) for x in zone[1:].split(":")] + [0]
        instant += sign * datetime.timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2])
    return f"{stamp(instant, ms)} {zone}"


def cdc_form(v, col):
    """The JSON stream's form of a typed value of column ``col`` (a column dict)."""
    t = col["type"]
    if v is None:
        return None
    if t in (INT, SHORT, BIGINT):
        return v
    if t in (FLOAT, DOUBLE):
        return v if math.isfinite(v) else None
    if t == NUMERIC:
        return v  # compared as a number (an old row may have had another scale)
    if t == MONETARY:
        amount = v["amount"]
        return f"{v['currency'] or ''}{'nan' if math.isnan(amount) else format(amount, '.2f')}"
    if t == BIT:
        return ("bits", v.hex())
    if t == VARBIT:
        return "X'" + v["bytes"].hex()[: math.ceil(v["bits"] / 4)] + "'"
    if t == DATE:
        return f"{v.year:04}-{v.month:02}-{v.day:02}"
    if t == TIME:
        return f"{v.hour:02}:{v.minute:02}:{v.second:02}"
    if t == TIMESTAMP:
        return stamp(v, False)
    if t == TSLTZ:
        return stamp(v, False) + " UTC"
    if t == DATETIME:
        return stamp(v, True)
    if t == DTLTZ:
        return stamp(v, True) + " UTC"
    if t in (TSTZ, DTTZ):
        return zoned(v, t == DTTZ)
    if t == JSON:
        return json.loads(v)
    if t in (SET, MULTISET, SEQUENCE):
        (elem,) = col["set_domains"] if len(col["set_domains"]) == 1 else [None]
        if elem is None:
            return [json.loads(x) for x in v]
        return [cdc_form(x, elem) for x in v]
    return v  # strings, ENUM labels, LOB locators, OIDs


def same(got, want, col) -> bool:
    """Whether a typed value's form equals the JSON stream's value (``want``)."""
    t = col["type"]
    if got is None and isinstance(want, str) and want.startswith("0000-") and t in ZERO_DATED:
        return True  # CUBRID's zero date is null in a typed column
    if isinstance(got, tuple) and got[0] == "bits":
        # X'..' shows ceil(bits / 4) hex digits; binary keeps whole bytes.
        digits = want[2:-1]
        return got[1].startswith(digits) and len(got[1]) == 2 * math.ceil(len(digits) / 2)
    if t == NUMERIC and got is not None and want is not None:
        return got == decimal.Decimal(str(want))
    if t == FLOAT and got is not None and want is not None:
        return struct.pack("<f", got) == struct.pack("<f", want)
    if t == JSON:
        return got == want
    if isinstance(got, list) and isinstance(want, list):
        elems = col["set_domains"]
        elem = elems[0] if len(elems) == 1 else {"type": JSON}
        return len(got) == len(want) and all(same(g, w, elem) for g, w in zip(got, want))
    if got != want and isinstance(want, (int, float)) and isinstance(got, str):
        return got == json.dumps(want)  # an old row's number in a column now of text
    return got == want


def compare_table(log, by_lsa, table, on_encrypted="raise") -> int:
    """Checks one table's typed stream against the JSON stream's events; returns the count."""
    columns = sorted(
        next(r for r in table["representations"] if r["repid"] == table["current_repid"])[
            "columns"
        ],
        key=lambda c: c["def_order"],
    )
    typed = walcdc.read_table_changes(log, table["class_oid"], on_encrypted=on_encrypted).read_all()
    rows = typed.to_pylist()
    for f in ("before", "after"):
        assert [x.name for x in typed.schema.field(f).type] == [c["name"] for c in columns]
    for r in rows:
        plain = by_lsa[r["lsa"]]
        assert {k: r[k] for k in META} == {k: plain[k] for k in META}, r["lsa"]
        assert (plain["decode_error"] is None) == (r["decode_error"] is None), r
        for side in ("before", "after"):
            want = json.loads(plain[side]) if plain[side] is not None else None
            got = r[side]
            assert (want is None) == (got is None), (r["lsa"], side)
            if want is None:
                continue
            for c in columns:
                w = want.get(str(c["id"]))
                g = cdc_form(got[c["name"]], c)
                assert same(g, w, c), (table["name"], r["lsa"], side, c["name"], g, w)
        if plain["changed_columns"] is not None:
            names = {str(c["id"]): c["name"] for c in columns}
            want = [names[i] for i in plain["changed_columns"] if i in names]
            assert r["changed_columns"] == want, r["lsa"]
        if plain["key"] is not None:
            names = {str(c["id"]): c["name"] for c in columns}
            key = {names[k]: v for k, v in json.loads(plain["key"]).items()}
            assert json.loads(r["key"]) == key
    return len(rows)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_table_equals_the_json_stream(name):
    """Every table of the fixture, value for value; together the tables' streams hold every
    row change of the JSON stream."""
    on_encrypted = "skip" if name == "tde" else "raise"
    log = walcdc.open_log(fixture_dir(name))
    plain = walcdc.read_changes(log, keys="id", on_encrypted=on_encrypted).read_all().to_pylist()
    by_lsa = {e["lsa"]: e for e in plain}
    seen = 0
    for table in log.schemas(on_encrypted=on_encrypted):
        if table["class_type"] == 0:
            seen += compare_table(log, by_lsa, table, on_encrypted)
    dml = [e for e in plain if e["op"] in ("insert", "update", "delete")]
    assert len(dml) > 0 or name == "tde"  # tde: the pages with its rows are encrypted
    assert seen >= len(dml)


def test_numeric_at_precision_38(tmp_path):
    """NUMERIC(38, s) at its extremes comes out as decimal128(38, s), digit for digit."""
    from walcdc.testing import LogWriter, Table, Workload, cdc_oid

    klass = cdc_oid(0, 300, 1)
    cols = [
        {"name": "id", "type": "INTEGER"},
        {"name": "n0", "type": "NUMERIC", "precision": 38, "scale": 0},
        {"name": "n10", "type": "NUMERIC", "precision": 38, "scale": 10},
        {"name": "n38", "type": "NUMERIC", "precision": 38, "scale": 38},
    ]
    nines = "9" * 38
    rows = [
        {
            "id": "1",
            "n0": f'"{nines}"',
            "n10": f'"{nines[:28]}.{nines[:10]}"',
            "n38": f'"0.{nines}"',
        },
        {"id": "2", "n0": f'"-{nines}"', "n10": '"-0.0000000001"', "n38": '"-0.' + "0" * 37 + '1"'},
        {"id": "3", "n0": '"0"', "n10": '"0.0000000000"', "n38": "null"},
    ]
    w = LogWriter()
    wl = Workload(w)
    table = Table.create("dba.t_num", klass, cols)
    t = wl.begin(1)
    t.create_table(table)
    for slot, row in enumerate(rows, 1):
        t.insert_row(klass, table.representation(), row, 500, slot)
    t.commit()
    w.finish(str(tmp_path))
    got = walcdc.read_table_changes(str(tmp_path), "t_num").read_all()
    after = got.schema.field("after").type
    assert [after.field(i).type for i in range(1, 4)] == [
        pa.decimal128(38, 0),
        pa.decimal128(38, 10),
        pa.decimal128(38, 38),
    ]
    values = [r["after"] for r in got.to_pylist() if r["op"] == "insert"]
    for row, v in zip(rows, values):
        for name in ("n0", "n10", "n38"):
            want = json.loads(row[name])
            assert (v[name] is None and want is None) or v[name] == decimal.Decimal(want), name
    assert len(values) == 3
