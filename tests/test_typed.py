"""Typed values: every column value of every DML item CUBRID's CDC API reported equals walcdc's
value, decoded offline with schemas learned from the log itself.

Where the API is wrong, the test names the items and checks walcdc against the log instead:
* before-values of LZ4-compressed strings (README: the API garbles them): walcdc's before value
  must equal what the previous change of the same row wrote;
* CHAR values of exactly 4 bytes arrive as a SMALLINT made of their first two bytes.
The API reports nothing for rows of an older representation ("error items") and null for JSON
and collections: walcdc decodes those too (checked here to decode; values against final state
in test_final_state.py).
"""

from __future__ import annotations

import bisect
import json
import struct
import warnings
from collections import defaultdict

import pytest

import walcdc
from conftest import engine_items, fixture_dir, ground_truth
from walcdc import lsa as L

OPAQUE_FOR_API = {"JSON", "SET", "MULTISET", "SEQUENCE", "OBJECT"}
CHARSETS = {"utf8": "utf-8", "euckr": "euc-kr", "iso88591": "latin-1"}


def items_of(name):
    return [x for x in engine_items(name) if "seq" in x]


def catalog_columns(name):
    """CDC class OID -> columns by def_order (the API indexes columns by def_order)."""
    out = {}
    for t in json.loads((ground_truth(name) / "catalog.json").read_text())["tables"]:
        vol, page, slot = (int(x) for x in t["class_oid_as_printed"].split("|"))
        oid = (page & 0xFFFFFFFF) | (slot << 32) | (vol << 48)
        out[oid] = {c["def_order"]: c for c in t["columns"]}
    return out


def same(col, api, ours):
    """Compares one API value with walcdc's; returns None if equal, else a description."""
    code, v = api.get("code"), api.get("v")
    if v is None:
        return None if ours is None else f"API null, walcdc {ours!r}"
    if ours is None:
        return f"API {v!r}, walcdc null"
    if code in (0, 1, 4):
        return None if isinstance(ours, int) and ours == v else f"{v!r} != {ours!r}"
    if code == 2:
        return None if struct.pack(">f", ours) == struct.pack(">f", v) else f"{v!r} != {ours!r}"
    if code == 3:
        return None if float(ours) == v else f"{v!r} != {ours!r}"
    if isinstance(ours, str) and ours == v:
        return None
    if col.get("data_type") in ("NCHAR", "VARNCHAR") and isinstance(v, str) and v[:2] == "N'":
        # The API quotes national strings (N'...'); walcdc gives the plain text.
        v = v[2:-1] if v.endswith("'") else v
        if ours == v:
            return None
    # Text the API sent in the column's own charset: the ground truth wrote each byte that is
    # not valid UTF-8 as \u00XX (workload/fixutf8.py); do the same to walcdc's bytes.
    enc = CHARSETS.get(col.get("charset"))
    if enc and isinstance(ours, str) and isinstance(v, str):
        try:
            raw = ours.encode(enc)
        except UnicodeError:
            return f"{v!r}: walcdc's {ours!r} is not {enc}"
        text = raw.decode("utf-8", errors="surrogateescape")
        text = "".join(chr(ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)
        if text == v:
            return None
    return f"{v!r} != {ours!r}"


@pytest.mark.parametrize("name", ["p4k", "p16k", "v11_2", "breadth"])
def test_every_api_value_equals_walcdc(name):
    log = walcdc.open_log(fixture_dir(name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", walcdc.EncryptedPagesSkipped)
        t = log.records().read_all()
    forw_to_lsa = dict(zip(t.column("forw_lsa").to_pylist(), t.column("lsa").to_pylist()))
    events = walcdc.read_changes(log, committed_only=False).read_all().to_pylist()
    by_lsa = {e["lsa"]: e for e in events}
    columns = catalog_columns(name)

    # The committed images of each row in log order, for checking before-values the API garbles.
    history = defaultdict(list)
    committed = walcdc.read_changes(log).read_all()
    for oid, lsa, after in zip(
        committed.column("row_oid").to_pylist(),
        committed.column("lsa").to_pylist(),
        committed.column("after").to_pylist(),
    ):
        if oid is not None and after is not None:
            history[oid].append((lsa, after))
    for images in history.values():
        images.sort()
    prior = {}
    for e in events:
        if e["row_oid"] is not None:
            images = history[e["row_oid"]]
            k = bisect.bisect_left(images, (e["lsa"],))  # the last image before this event
            prior[e["lsa"]] = images[k - 1][1] if k else None

    compared = 0
    garbled_lz4 = []
    char4 = []
    decoded_error_items = 0
    for it in items_of(name):
        if it["data_item_type"] != 1:
            continue
        at = forw_to_lsa.get(L.make(*it["batch_next_lsa"]))
        e = by_lsa[at]
        d = it["dml"]
        cols = columns.get(d["classoid"])
        assert e["decode_error"] is None, (it["seq"], e["decode_error"])
        if d["num_changed_column"] == 0 and d["num_cond_column"] == 0:
            # An "error item": the API gave up (older representation, or class gone).
            assert e["after"] is not None or e["before"] is not None
            decoded_error_items += 1
            continue
        sides = []
        if d["dml_type"] % 3 in (0, 1):
            sides.append(("after", d["changed_column_index"], d["changed_column_data"]))
        if d["dml_type"] % 3 in (1, 2):
            sides.append(("before", d["cond_column_index"], d["cond_column_data"]))
        for side, idx, vals in sides:
            ours = list(json.loads(e[side]).values())
            for i, api in zip(idx, vals):
                col = cols[i]
                if col["data_type"] in OPAQUE_FOR_API:
                    continue
                problem = same(col, api, ours[i])
                if problem is None:
                    compared += 1
                    continue
                if (
                    side == "before"
                    and col["data_type"] in ("STRING", "VARCHAR")
                    and isinstance(ours[i], str)
                    and len(ours[i].encode()) >= 255
                ):
                    # The API garbles before-values of compressed strings; the log is right if
                    # the before value is what the previous change of the row wrote.
                    prev = prior.get(e["lsa"])
                    assert prev is not None, (it["seq"], "no earlier image of the row")
                    assert list(json.loads(prev).values())[i] == ours[i], it["seq"]
                    garbled_lz4.append(it["seq"])
                    continue
                if api.get("code") == 4 and col["data_type"] == "CHAR":
                    # A CHAR of exactly 4 bytes: the API's client reads a short from its bytes.
                    raw = ours[i].encode(CHARSETS.get(col["charset"], "utf-8"))
                    assert len(raw) == 4 and struct.unpack("<h", raw[:2])[0] == api["v"]
                    char4.append(it["seq"])
                    continue
                pytest.fail(f"{name} item {it['seq']} {side} column {col['name']}: {problem}")
    assert compared > {"p4k": 500_000, "p16k": 600_000, "v11_2": 150_000, "breadth": 3_000}[name]
    if name == "p4k":
        assert len(garbled_lz4) == 11  # README: 11 of the 22 such p4k updates
        assert decoded_error_items == 36
    if name == "breadth":
        assert len(char4) > 0
    else:
        assert char4 == []


def test_rows_the_api_gives_up_on_are_decoded_p4k():
    # t_alter rows written before ALTER TABLE ... ADD c / DROP b (representation 1): the API
    # reports empty items; walcdc decodes them with their own representation, the dropped
    # column b included under the name it had then, and they are the rows the workload inserted.
    import re

    log = walcdc.open_log(fixture_dir("p4k"))
    events = walcdc.read_changes(log, committed_only=False, tables=["0|218|1"], ops=["insert"])
    rows = [json.loads(e["after"]) for e in events.read_all().to_pylist()]
    old = [r for r in rows if "b" in r]
    new = [r for r in rows if "c" in r]
    assert len(old) == 17 and len(new) == 33  # as many as the API's items of each kind
    assert all(set(r) == {"id", "tag", "a", "b"} for r in old)
    assert all(set(r) == {"id", "tag", "a", "c"} for r in new)
    text = (ground_truth("p4k") / "expected_transactions.jsonl").read_text()
    sent = {
        (int(i), t, int(a), b)
        for i, t, a, b in re.findall(
            r"INSERT INTO t_alter \(id, tag, a, b\) VALUES "
            r"\((\d+), '([^']+)', (-?\d+), '([^']+)'\)",
            text,
        )
    }
    assert {(r["id"], r["tag"], r["a"], r["b"]) for r in old} <= sent


def test_changed_columns_are_the_apis():
    # For updates the API lists the columns whose value changed (it also lists collections and
    # LOBs it cannot compare); walcdc's list equals it once those are left out.
    log = walcdc.open_log(fixture_dir("p4k"))
    t = log.records().read_all()
    forw_to_lsa = dict(zip(t.column("forw_lsa").to_pylist(), t.column("lsa").to_pylist()))
    events = {
        e["lsa"]: e
        for e in walcdc.read_changes(log, committed_only=False, ops=["update"])
        .read_all()
        .to_pylist()
    }
    columns = catalog_columns("p4k")
    agree = differ = 0
    for it in items_of("p4k"):
        if it["data_item_type"] != 1 or it["dml"]["dml_type"] % 3 != 1:
            continue
        d = it["dml"]
        if d["num_changed_column"] == 0:
            continue
        e = events[forw_to_lsa[L.make(*it["batch_next_lsa"])]]
        cols = columns[d["classoid"]]
        api = {
            cols[i]["name"]
            for i in d["changed_column_index"]
            if cols[i]["data_type"] not in OPAQUE_FOR_API
        }
        ours = {
            c
            for c in e["changed_columns"]
            if next(x for x in cols.values() if x["name"] == c)["data_type"] not in OPAQUE_FOR_API
        }
        if api == ours:
            agree += 1
        else:
            differ += 1
    # The 2 others are t_big updates whose old payload the API garbles (see above).
    assert (agree, differ) == (2202, 2)


def test_schema_learned_from_the_log_matches_the_catalog():
    for name in ("p4k", "breadth"):
        log = walcdc.open_log(fixture_dir(name))
        learned = {s["class_oid"]: s for s in log._native.schemas()}
        for oid, cols in catalog_columns(name).items():
            s = learned[oid]
            cur = next(r for r in s["representations"] if r["repid"] == s["current_repid"])
            by_order = sorted(cur["columns"], key=lambda c: c["def_order"])
            assert [c["name"] for c in by_order] == [cols[i]["name"] for i in sorted(cols)]
    # t_chg changed a column's type twice and renamed one: four representations.
    breadth = {s["name"]: s for s in walcdc.open_log(fixture_dir("breadth"))._native.schemas()}
    assert [r["repid"] for r in breadth["dba.t_chg"]["representations"]] == [0, 1, 2, 3]
    events = defaultdict(list)
    for e in walcdc.read_changes(fixture_dir("breadth")).read_all().to_pylist():
        events[e["table"]].append(e)
    # Partitions are reported under their partitioned table, with the partition named.
    assert events["dba.t_range"] and all(
        e["partition_oid"] for e in events["dba.t_range"] if e["op"] != "ddl"
    )


def test_schema_file_for_tables_created_before_the_log_window(tmp_path):
    # Without archives 0 and 1, t_types' class records are not in the log: its rows carry the
    # raw images and say why they are not decoded. With a schema file (the catalog of the
    # fixture, plus the ENUM labels, which the catalog does not list) they decode exactly as
    # with the whole log.
    import os

    src = fixture_dir("p4k")
    for f in ("p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, tmp_path / f)
    late = walcdc.open_log(tmp_path)
    dml = ["insert", "update", "delete"]
    bare = walcdc.read_changes(late, tables=["0|229|1"], ops=dml).read_all().to_pylist()
    assert bare and all("schema unknown" in e["decode_error"] for e in bare)
    assert all(e["after_image"] or e["before_image"] for e in bare)

    catalog = json.loads((ground_truth("p4k") / "catalog.json").read_text())
    for t in catalog["tables"]:
        for c in t["columns"]:
            if c["name"] == "c_enum":
                c["enum_labels"] = ["red", "green", "blue"]
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(catalog))
    typed = walcdc.read_changes(late, tables=["0|229|1"], ops=dml, schema=path)
    typed = typed.read_all().to_pylist()
    whole = {
        e["lsa"]: e
        for e in walcdc.read_changes(fixture_dir("p4k"), tables=["0|229|1"]).read_all().to_pylist()
    }
    assert len(typed) == len(bare) > 20
    for e in typed:
        assert e["decode_error"] is None and e["table"] == "dba.t_types"
        assert (e["before"], e["after"]) == (whole[e["lsa"]]["before"], whole[e["lsa"]]["after"])


def test_read_table_changes_types_columns_and_maps_old_rows_by_id():
    import datetime
    import decimal

    import pyarrow as pa

    s = walcdc.read_table_changes(fixture_dir("p4k"), "t_types")
    t = s.read_all()
    after = t.schema.field("after").type
    assert after.field("c_num").type == pa.decimal128(15, 4)
    assert after.field("c_tstz").type == pa.struct(
        [("instant", pa.timestamp("s", tz="UTC")), ("zone", pa.string())]
    )
    assert after.field("c_dt").type == pa.timestamp("ms")
    rows = [r for r in t.to_pylist() if r["op"] == "insert"]
    # Values equal the JSON of read_changes, typed: TIMESTAMPTZ '2023-07-06 04:05:06 +09:00'
    # is the instant 2023-07-05 19:05:06 UTC.
    plain = {
        e["lsa"]: json.loads(e["after"])
        for e in walcdc.read_changes(fixture_dir("p4k"), tables=["t_types"], ops=["insert"])
        .read_all()
        .to_pylist()
    }
    for r in rows:
        j = plain[r["lsa"]]
        a = r["after"]
        assert a["id"] == j["id"] and a["tag"] == j["tag"]
        if j["c_num"] is not None:
            assert a["c_num"] == decimal.Decimal(j["c_num"])
        if j["c_tstz"] is not None:
            local = datetime.datetime.strptime(j["c_tstz"][:19], "%Y-%m-%d %H:%M:%S")
            sign = 1 if j["c_tstz"][20] == "+" else -1
            hh, mm = j["c_tstz"][21:].split(":")
            utc = local - sign * datetime.timedelta(hours=int(hh), minutes=int(mm))
            assert a["c_tstz"]["instant"].replace(tzinfo=None) == utc
            assert a["c_tstz"]["zone"] == j["c_tstz"][20:]
    # t_chg (breadth): column s became BIGINT n ... and was renamed s_long; rows of every
    # representation come out under the current column names.
    chg = walcdc.read_table_changes(fixture_dir("breadth"), "dba.t_chg").read_all().to_pylist()
    first = [r for r in chg if r["op"] == "insert"][0]["after"]
    assert first == {"id": 1, "tag": "BR-S0-T0012", "n": 1000, "s_long": "before-1"}
    with pytest.raises(walcdc.InvalidArgumentError):
        walcdc.read_table_changes(fixture_dir("p4k"), "no_such_table")


class _RecordedCatalog:
    """A DB-API connection that answers the catalog queries of export_schema from a recorded
    catalog (the fixture's catalog.json, taken from the live server): no server runs in CI."""

    def __init__(self, catalog):
        self.tables = [t for t in catalog["tables"] if t["class_type"] == "CLASS"]

    def cursor(self):
        return self

    def execute(self, sql, args=()):
        def table():
            return next(t for t in self.tables if (t["name"], t["owner"]) == tuple(args))

        if "FROM db_class" in sql:
            self.rows = [(t["name"], t["owner"]) for t in self.tables]
        elif "FROM _db_class" in sql:
            self.rows = [("@" + table()["class_oid_as_printed"],)]
        elif "FROM db_attribute" in sql:
            self.rows = [
                (c["name"], c["def_order"], c["data_type"], c["prec"], c["scale"], c["charset"])
                for c in table()["columns"]
            ]
        elif "FROM db_index" in sql:
            self.rows = [
                (k,) for i in table()["indexes"] if i["primary_key"] == "YES" for k in i["keys"]
            ]
        else:
            raise AssertionError(sql)

    def fetchall(self):
        return self.rows

    def close(self):
        pass


def test_schema_exported_from_a_server_decodes_like_the_log(tmp_path):
    import os

    from walcdc.pycubrid_schema import export_schema

    src = fixture_dir("p4k")  # skips (or fails in CI) without the fixtures
    catalog = json.loads((ground_truth("p4k") / "catalog.json").read_text())
    schema = export_schema(_RecordedCatalog(catalog))
    names = {t["name"] for t in schema["tables"]}
    assert names == {t["name"] for t in catalog["tables"]}
    for f in ("p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, tmp_path / f)
    dml = ["insert", "update", "delete"]
    # A change whose data record lies in a missing archive cannot be chased: with
    # on_error="skip" it comes with the reason (a MissingArchiveError otherwise).
    typed = walcdc.read_changes(tmp_path, ops=dml, schema=schema, on_error="skip")
    typed = typed.read_all().to_pylist()
    lost = [e for e in typed if e["error"]]
    assert all("missing archive" in e["error"] for e in lost) and len(lost) < 10
    typed = [e for e in typed if not e["error"]]
    whole = {
        e["lsa"]: e for e in walcdc.read_changes(fixture_dir("p4k"), ops=dml).read_all().to_pylist()
    }
    assert len(typed) > 10_000
    flagged = 0
    for e in typed:
        if e["decode_error"] is not None:
            # A schema file describes the current layout only: a before image written under an
            # older representation does not fit it, and says so instead of passing as good.
            assert all(p.startswith("before: ") for p in e["decode_error"].split("; "))
            flagged += 1
        ours = json.loads(e["after"] or e["before"])
        want = json.loads(whole[e["lsa"]]["after"] or whole[e["lsa"]]["before"])
        ours.pop("c_enum", None), want.pop("c_enum", None)  # the catalog has no ENUM labels
        assert ours == want
    assert flagged < 10


def test_rows_that_do_not_decode_keep_the_raw_image_and_say_why(tmp_path):
    from walcdc.testing import LogWriter, Workload, cdc_oid

    w = LogWriter(page_size=4096, active_pages=8, archive_pages=4)
    t = Workload(w).begin(1)
    good = cdc_oid(0, 229, 1)
    unknown = cdc_oid(0, 229, 2)
    # Repid 1, one INTEGER column: 4 bytes of body after the 16-byte header.
    t.insert(good, b"\x00\x00\x00\x07", page=100, slot=1)
    # The same class, a body too short for its INTEGER column.
    t.insert(good, b"\x01", page=100, slot=2)
    # A class nobody described.
    t.insert(unknown, b"\x00\x00\x00\x07", page=100, slot=3)
    t.commit()
    w.finish(tmp_path)
    schema = {
        "tables": [
            {
                "name": "t",
                "owner": "dba",
                "class_oid": "0|229|1",
                "repid": 1,
                "columns": [{"name": "n", "data_type": "INTEGER"}],
            }
        ]
    }
    rows = walcdc.read_changes(tmp_path, schema=schema).read_all().to_pylist()
    assert [r["op"] for r in rows] == ["insert"] * 3
    assert json.loads(rows[0]["after"]) == {"n": 7} and rows[0]["decode_error"] is None
    for r, why in zip(rows[1:], ["", "schema unknown"]):
        assert r["after"] is None and r["after_image"] is not None
        assert r["decode_error"] and why in r["decode_error"]


def test_table_name_is_the_name_at_the_time_of_the_change():
    # p4k renames t_old_name to t_new_name midway (same class OID 0|204|3).
    events = walcdc.read_changes(fixture_dir("p4k"), tables=["0|204|3"]).read_all().to_pylist()
    rename = next(e for e in events if e["op"] == "ddl" and "rename" in e["statement"].lower())
    names_before = {e["table"] for e in events if e["lsa"] < rename["lsa"] and e["op"] != "ddl"}
    names_after = {e["table"] for e in events if e["lsa"] > rename["lsa"] and e["op"] != "ddl"}
    assert names_before == {"dba.t_old_name"} and names_after == {"dba.t_new_name"}
