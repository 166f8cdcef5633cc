"""Replaying the committed stream (keyed by primary key, or by row OID for tables without one)
reproduces each table's final contents (``ground_truth/final_state/*.tsv``, printed by CUBRID's
client): every row, every column, JSON and collections included (which CUBRID's CDC API does not
report)."""

from __future__ import annotations

import gzip
import json

import pytest

import walcdc
from conftest import fixture_dir, ground_truth
from walcdc.schemas import TYPE_NAMES

DB_TYPES = TYPE_NAMES  # DB_TYPE id -> name


def _ampm(hms: str) -> str:
    """'19:29:23' -> '07:29:23 PM' (fractions kept)."""
    h, rest = hms.split(":", 1)
    h = int(h)
    return f"{(h % 12) or 12:02d}:{rest} {'PM' if h >= 12 else 'AM'}"


def _mdy(ymd: str) -> str:
    y, m, d = ymd.split("-")
    return f"{m}/{d}/{y}"


def _datetime(text: str, kind: str) -> str:
    """CDC form 'YYYY-MM-DD HH:MM:SS[.fff][ zone]' -> `kind 'hh:mm:ss AM MM/DD/YYYY[ zone]'`."""
    date, time, *zone = text.split(" ")
    out = f"{_ampm(time)} {_mdy(date)}"
    if zone:
        z = zone[0]
        out += f" {z} {z}" if kind.endswith("ltz") else f" {z}"
    return f"{kind} '{out}'"


def _element(v) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


def client_text(t: str, v, codeset: int = 5) -> str:
    """A walcdc value (JSON, in CUBRID CDC forms) as the client printed it in final_state."""
    if v is None:
        return "\\N"
    if t in ("INTEGER", "SMALLINT", "BIGINT"):
        return str(v)
    if t == "FLOAT":
        return f"{v:f}"
    if t == "DOUBLE":
        return f"{v:e}"
    if t == "MONETARY":
        assert v.startswith("$")
        return "\\\\USD" + v[1:]
    if t == "DATE":
        return f"date '{_mdy(v)}'"
    if t == "TIME":
        return f"time '{_ampm(v)}'"
    if t in ("TIMESTAMP", "TIMESTAMPLTZ", "TIMESTAMPTZ", "DATETIME", "DATETIMELTZ", "DATETIMETZ"):
        return _datetime(v, t.lower())
    if t == "ENUM":
        return f"'{v}'"
    if t == "JSON":
        return "json '" + json.dumps(v, separators=(",", ":"), ensure_ascii=False) + "'"
    if t in ("SET", "MULTISET", "SEQUENCE"):
        return "{" + ", ".join(_element(x) for x in v) + "}"
    if t in ("BLOB", "CLOB"):
        return f"{t}'{v}'"
    text = str(v)
    if t in ("NCHAR", "VARNCHAR") and text.startswith("N'") and text.endswith("'"):
        text = text[2:-1]
    if codeset in (3, 4):
        # The client printed the stored bytes as they are (EUC-KR, ISO-8859-1): compare bytes.
        raw = text.encode("euc-kr" if codeset == 4 else "latin-1")
        text = raw.decode("utf-8", errors="surrogateescape")
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def read_tsv(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as f:
        lines = f.read().split("\n")
    header = lines[0].split("\t")
    return header, [tuple(x.split("\t")) for x in lines[1:] if x]


def replay(name):
    """(heap class OID, key) -> row after applying the committed stream in commit order, and the
    schemas by current table name. A partitioned table's rows are kept per partition (a row
    moved to another partition is an insert there and a delete in the old one)."""
    log = walcdc.open_log(fixture_dir(name))
    schemas = {s["name"]: s for s in log.schemas()}
    pk = {}
    names = {}
    for s in schemas.values():
        cur = next((r for r in s["representations"] if r["repid"] == s["current_repid"]), None)
        cols = (cur or {"columns": []})["columns"]
        pk[s["class_oid"]] = [str(c["id"]) for c in cols if c["primary_key"]]
        names[s["class_oid"]] = {str(c["id"]): c["name"] for c in cols}
    rows = {}
    # Rows keyed by attribute id, so that renamed columns map to today's names.
    for batch in walcdc.read_changes(log, mode="full", keys="id"):
        for e in batch.to_pylist():
            if e["op"] == "ddl" and e["ddl_type"] == 4:
                # TRUNCATE deletes the rows without logging each delete: the DDL event says so.
                gone = [k for k, (root, _) in rows.items() if e["class_oid"] in (k[0], root)]
                for k in gone:
                    del rows[k]
            if e["op"] not in ("insert", "update", "delete"):
                continue
            assert e["decode_error"] is None, e["decode_error"]
            heap = e["partition_oid"] or e["class_oid"]
            keys = pk[e["class_oid"]]

            def key(row, e=e, keys=keys, heap=heap):
                return (heap, tuple(row[k] for k in keys) if keys else e["row_oid"])

            if e["before"] is not None:
                rows.pop(key(json.loads(e["before"])), None)
            if e["after"] is not None:
                after = json.loads(e["after"])
                now = names[e["class_oid"]]
                rows[key(after)] = (
                    e["class_oid"],
                    {now[i]: v for i, v in after.items() if i in now},
                )
    return rows, schemas


@pytest.mark.parametrize("name", ["p4k", "p16k", "v11_2", "crash", "breadth"])
def test_replay_reproduces_final_state(name):
    rows, schemas = replay(name)
    files = sorted((ground_truth(name) / "final_state").glob("*.tsv*"))
    assert files
    by_name = {s["name"].rsplit(".", 1)[-1]: s for s in schemas.values() if "." in s["name"]}
    for path in files:
        table = path.name.split(".tsv")[0]
        s = by_name[table]
        cur = next(r for r in s["representations"] if r["repid"] == s["current_repid"])
        cols = {c["name"]: c for c in cur["columns"]}
        header, want = read_tsv(path)
        oid = s["class_oid"]
        # A partitioned table holds the rows of its partitions; a partition its own.
        mine = [r for (heap, _), (root, r) in rows.items() if oid in (heap, root)]
        got = []
        for r in mine:
            got.append(
                tuple(
                    client_text(
                        DB_TYPES[cols[c]["type"]],
                        r[c] if c in r else cols[c]["default"],
                        cols[c]["codeset"],
                    )
                    for c in header
                )
            )
        assert sorted(got) == sorted(want), table
