"""Change events against the engine's own ground truth.

* The engine-compatible stream (``committed_only=False``) equals, item for item, what CUBRID's CDC
  API produced (``expected_events.jsonl.gz``). The API reports no LSA per item, but each reply's
  ``batch_next_lsa`` is the ``forw_lsa`` of the record that produced the item (one item per
  batch), so every item is matched to the exact record, and per transaction the sequences agree.
* The images are the engine's: every DML image is a heap record of the item's class whose
  representation is the one the API decoded with, and holds the values the API reported.
* The committed-only stream gives exactly the committed transactions of the workload with their
  surviving DML counts; nothing of a rolled-back transaction; events in log order after commit.
"""

from __future__ import annotations

import gzip
import json
import re
import struct
import warnings
from collections import Counter, defaultdict

import pytest

import walcdc
from conftest import engine_items, fixture_dir, ground_truth, read_dump
from walcdc import lsa as L

NULL_CLASS = 0x0000_0000_FFFF_FFFF  # a NULL OID in the CDC API's packing
DML_TYPES = {
    ("insert", False): 0,
    ("update", False): 1,
    ("delete", False): 2,
    ("insert", True): 3,
    ("update", True): 4,
    ("delete", True): 5,
}


def expected_items(name):
    lines = engine_items(name)
    meta = lines[0]
    assert meta["meta"] == "find_lsa"
    return L.make(*meta["lsa"]), [x for x in lines if "seq" in x]


def producing_records(log):
    """forw_lsa -> lsa of every readable record."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", walcdc.EncryptedPagesSkipped)
        t = log.records(on_encrypted="skip").read_all()
    return dict(zip(t.column("forw_lsa").to_pylist(), t.column("lsa").to_pylist()))


def item_key(it):
    """What the API says about an item, in the terms of our columns."""
    t = it["data_item_type"]
    if t == 1:
        d = it["dml"]
        return ("dml", d["dml_type"], d["classoid"], it["user"])
    if t == 0:
        d = it["ddl"]
        return (
            "ddl",
            d["ddl_type"],
            d["object_type"],
            d["classoid"],
            d["oid"],
            d["statement"],
            it["user"],
        )
    if t == 2:
        return ("dcl", it["dcl"]["dcl_type"], it["dcl"]["timestamp"], it["user"])
    return ("timer", it["timer"]["timestamp"])


def event_key(e):
    op = e["op"]
    if op in ("insert", "update", "delete"):
        return ("dml", DML_TYPES[(op, e["trigger"])], e["class_oid"], e["user"])
    if op == "ddl":
        return (
            "ddl",
            e["ddl_type"],
            e["object_type"],
            e["class_oid"] if e["class_oid"] is not None else NULL_CLASS,
            e["object_oid"] if e["object_oid"] is not None else NULL_CLASS,
            e["statement"],
            e["user"],
        )
    if op in ("commit", "abort"):
        return ("dcl", 0 if op == "commit" else 1, int(e["time"].timestamp()), e["user"])
    return ("timer", int(e["time"].timestamp()))


def shipped_readable_end(name, log):
    """Items past this position were produced by records not in the shipped files (the server was
    restarted for the capture) or, for tde, on encrypted pages."""
    from conftest import shipped_end

    if name == "tde":
        return L.parse("630|4008")  # first record whose payload is encrypted
    return shipped_end(name)


@pytest.mark.parametrize("name", ["p4k", "p16k", "tde"])
def test_engine_stream_equals_cdc_api(name):
    log = walcdc.open_log(fixture_dir(name))
    start, items = expected_items(name)
    forw_to_lsa = producing_records(log)
    stream = walcdc.read_changes(
        log, committed_only=False, on_encrypted="skip" if name == "tde" else "raise"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = stream.read_all().to_pylist()
    if name == "tde":
        assert [s["first_pageid"] for s in stream.skipped] == [631]
        assert any(issubclass(w.category, walcdc.EncryptedPagesSkipped) for w in caught)
    ours = {e["lsa"]: e for e in events}
    assert len(ours) == len(events), "one event per producing record"
    readable_end = shipped_readable_end(name, log)

    matched = set()
    unreadable = []
    per_txn_api = defaultdict(list)
    per_txn_ours = defaultdict(list)
    for it in items:
        at = forw_to_lsa.get(L.make(*it["batch_next_lsa"]))
        if at is None or at >= readable_end:
            unreadable.append(it)
            continue
        assert at in ours, f"no event for API item {it['seq']} (record {L.format_lsa(at)})"
        e = ours[at]
        assert event_key(e) == item_key(it), (it["seq"], L.format_lsa(at))
        assert e["trid"] == it["transaction_id"]
        matched.add(at)
        if it["data_item_type"] != 3:
            per_txn_api[it["transaction_id"]].append(item_key(it))
    # Every event of ours from the capture's start is an item of the API.
    extra = [e for e in events if e["lsa"] >= start and e["lsa"] not in matched]
    assert extra == []
    for e in events:
        if e["lsa"] >= start and e["op"] != "timer":
            per_txn_ours[e["trid"]].append(event_key(e))
    assert per_txn_ours == per_txn_api
    # What we could not match lies past the shipped, readable log: the capture's later TIMER
    # items (written by the restarted server) and, for tde, the items of encrypted pages.
    if name == "tde":
        # The engine's dump (decrypted with the key) places each of them past the clear pages.
        dump_forw = {d.forw_lsa: d.lsa for d in read_dump(name)}
        for it in unreadable:
            at = dump_forw.get(L.make(*it["batch_next_lsa"]))
            assert at is None or at >= readable_end, it["seq"]
        assert sum(it["data_item_type"] == 1 for it in unreadable) == 112
    else:
        assert {it["data_item_type"] for it in unreadable} == {3}
    assert len(matched) + len(unreadable) == len(items)


def catalog(name):
    return json.loads((ground_truth(name) / "catalog.json").read_text())


def _word(img):
    return struct.unpack_from(">I", img)[0]


def _header_size(flags):
    return 8 + 8 * bool(flags & 1) + 8 * bool(flags & 2) + 8 * bool(flags & 4)


FIXED = {"INTEGER": ">i", "SMALLINT": ">h", "BIGINT": ">q", "FLOAT": ">f", "DOUBLE": ">d"}
TEXT = {"STRING", "VARCHAR", "CHAR"}


def _value_bytes(col, value):
    """The bytes a value must have inside a heap record, for the types whose storage is plain."""
    if value["v"] is None or value.get("code", -1) < 0:
        return None
    t = col["data_type"]
    if t in FIXED:
        return struct.pack(FIXED[t], value["v"])
    if t in TEXT and isinstance(value["v"], str):
        raw = value["v"].encode("utf-8")
        # Longer strings may be stored LZ4-compressed inside the row.
        return raw if 0 < len(raw) < 255 else None
    return None


@pytest.mark.parametrize("name", ["p4k", "p16k"])
def test_images_are_the_engines(name):
    log = walcdc.open_log(fixture_dir(name))
    start, items = expected_items(name)
    forw_to_lsa = producing_records(log)
    events = {
        e["lsa"]: e
        for e in walcdc.read_changes(log, committed_only=False, ops=["insert", "update", "delete"])
        .read_all()
        .to_pylist()
    }
    columns = {}
    for t in catalog(name)["tables"]:
        vol, page, slot = (int(x) for x in t["class_oid_as_printed"].split("|"))
        oid = (page & 0xFFFFFFFF) | (slot << 32) | (vol << 48)
        columns[oid] = {c["def_order"]: c for c in t["columns"]}

    decoded_repids = defaultdict(set)
    error_items = []
    checked_values = 0
    for it in items:
        if it["data_item_type"] != 1:
            continue
        at = forw_to_lsa.get(L.make(*it["batch_next_lsa"]))
        e = events[at]
        d = it["dml"]
        kind = d["dml_type"] % 3
        images = []
        if kind in (0, 1):
            images.append(
                ("after", e["after_image"], d["changed_column_index"], d["changed_column_data"])
            )
        if kind in (1, 2):
            images.append(
                ("before", e["before_image"], d["cond_column_index"], d["cond_column_data"])
            )
        error_item = d["num_changed_column"] == 0 and d["num_cond_column"] == 0
        if error_item:
            error_items.append((d["classoid"], [_word(img) & 0xFFFFFF for _, img, _, _ in images]))
        for side, img, idx, vals in images:
            assert img is not None and len(img) >= 8, (it["seq"], side)
            w = _word(img)
            repid, flags = w & 0xFFFFFF, (w >> 24) & 0x1F
            assert len(img) >= _header_size(flags), (it["seq"], side)
            if not error_item:
                decoded_repids[d["classoid"]].add(repid)
            if error_item or d["classoid"] not in columns:
                continue
            for i, v in zip(idx, vals):
                want = _value_bytes(columns[d["classoid"]][i], v)
                if want is not None and not it.get("non_utf8_bytes_escaped"):
                    assert want in img, (it["seq"], side, i, v)
                    checked_values += 1
    # CUBRID decodes an image only when its representation is the class's current one, and
    # gives an empty "error item" otherwise: our images say the same of every item.
    for cls, repids in decoded_repids.items():
        assert len(repids) == 1, (cls, repids)
    for cls, repids in error_items:
        # An error item has an image of another representation (or a class gone since).
        assert cls not in decoded_repids or set(repids) != decoded_repids[cls], (cls, repids)
    assert checked_values > 100_000


# A row's own tag column; other columns embed older tags inside longer text ("vc-<tag>-n").
TAG = {
    "p4k": re.compile(rb"(?<![\w-])P4K-S\d-T\d{4}(?![\w-])"),
    "p16k": re.compile(rb"(?<![\w-])P16K-S\d-T\d{4}(?![\w-])"),
}


def class_names(name, events):
    """Class OID -> table name, from the catalog and from our own CREATE/RENAME DDL events."""
    names = {}
    for e in events:
        if e["op"] == "ddl" and e["class_oid"] is not None:
            m = re.match(r"(?is)\s*create\s+table\s+(?:\w+\.)?(\w+)", e["statement"])
            if m:
                names[e["class_oid"]] = m.group(1).lower()
    return names


def _delete_only_owner(dml, committed, taken):
    """The committed transaction whose DELETE ... WHERE id=N statements deleted these rows."""
    owners = []
    for tag, t in committed.items():
        if tag in taken:
            continue
        ids = [
            int(m.group(1))
            for st in t["statements"]
            if st.get("op") == "delete" and st.get("ok")
            for m in [re.search(r"WHERE id=(\d+)", st.get("sql", ""))]
            if m
        ]
        if (
            ids
            and all(any(struct.pack(">i", i) in e["before_image"] for e in dml) for i in ids)
            and len(ids) >= len(dml)
        ):
            owners.append(tag)
    assert len(owners) == 1, owners
    return owners[0]


def load_transactions(name):
    path = ground_truth(name) / "expected_transactions.jsonl"
    if path.exists():
        return [json.loads(x) for x in path.open()]
    with gzip.open(str(path) + ".gz", "rt") as f:
        return [json.loads(x) for x in f]


@pytest.mark.parametrize("name", ["p4k", "p16k"])
def test_committed_stream_equals_workload(name):
    log = walcdc.open_log(fixture_dir(name))
    stream = walcdc.read_changes(log)
    events = stream.read_all().to_pylist()
    names = class_names(name, events)
    names_alias = {"t_old_name": "t_new_name"}

    # Group by transaction (commit LSA); events come in log order after their commit.
    groups = defaultdict(list)
    for e in events:
        groups[e["commit_lsa"]].append(e)
    commits = list(groups)
    assert commits == sorted(commits)
    for c, evs in groups.items():
        lsas = [e["lsa"] for e in evs]
        assert lsas == sorted(lsas) and lsas[-1] < c
        assert [e["txn_seq"] for e in evs] == list(range(len(evs)))
        assert len({e["trid"] for e in evs}) == 1

    tx = load_transactions(name)
    committed = {t["tag"]: t for t in tx if t["outcome"] == "committed"}
    rolled_back = {t["tag"] for t in tx if t["outcome"] == "rolled_back"}
    tag_re = TAG[name]

    found = {}
    for c, evs in groups.items():
        dml = [e for e in evs if e["op"] != "ddl"]
        if not dml:
            continue
        tags = None
        for e in dml:
            if e["op"] in ("insert", "update") and not e["trigger"]:
                # An update sets the row's tag: the new one is in the after image only (other
                # columns may still carry older tags).
                t = set(tag_re.findall(e["after_image"]))
                if e["before_image"] is not None:
                    t = (t - set(tag_re.findall(e["before_image"]))) or t
                tags = t if tags is None else tags & t
        if tags is None:
            # Only deletes survived: find the transaction whose DELETE statements name the rows.
            tag = _delete_only_owner(dml, committed, found)
        else:
            assert len(tags) == 1, (L.format_lsa(c), tags)
            tag = tags.pop().decode()
        assert tag not in rolled_back
        assert tag in committed, tag
        assert tag not in found
        counts = defaultdict(Counter)
        for e in dml:
            counts[names.get(e["class_oid"], "?")][e["op"]] += 1
        found[tag] = counts

    want = {
        tag: t["dml_counts"]
        for tag, t in committed.items()
        if any(sum(v.values()) for v in t["dml_counts"].values())
    }
    assert set(found) == set(want)
    for tag, counts in found.items():
        expect = {
            names_alias.get(tbl, tbl): {k: v for k, v in c.items() if v}
            for tbl, c in want[tag].items()
            if any(c.values())
        }
        got = {names_alias.get(tbl, tbl): dict(c) for tbl, c in counts.items()}
        assert got == expect, tag
    assert stream.pending == []


def test_savepoint_rollbacks_are_dropped_p4k():
    # Spec §12.6 (verified): 135 DML supplemental records of committed transactions are not live:
    # 106 statements undone by ROLLBACK TO SAVEPOINT and 29 inserts that failed (-670).
    log = walcdc.open_log(fixture_dir("p4k"))
    s = walcdc.read_changes(log, ops=["insert", "update", "delete"])
    s.read_all()
    assert s.stats["undone_events"] == 135


def test_crash_commits_and_pending():
    log = walcdc.open_log(fixture_dir("crash"))
    stream = walcdc.read_changes(log, mode="after")
    events = stream.read_all().to_pylist()
    tx = load_transactions("crash")
    outcome = {t["tag"]: t["outcome"] for t in tx}
    acks = {}
    with open(ground_truth("crash") / "client_acks.tsv") as f:
        next(f)
        for line in f:
            tag, _sess, ev = line.split("\t")[:3]
            acks.setdefault(tag, set()).add(ev)
    acked = {t for t, evs in acks.items() if "commit_ack" in evs}
    assert len(acked) == 19_832

    tag_re = re.compile(rb"CR-(?:W\d-T\d{5}|OPEN-\d)")
    groups = defaultdict(set)
    for e in events:
        if e["after_image"] is not None:
            groups[e["commit_lsa"]].update(t.decode() for t in tag_re.findall(e["after_image"]))
    emitted = set()
    for c, tags in groups.items():
        assert len(tags) == 1, (L.format_lsa(c), tags)
        emitted |= tags
    assert emitted == acked
    assert not emitted & {t for t, o in outcome.items() if o == "rolled_back"}
    unknown = {t for t, o in outcome.items() if o == "unknown_server_killed"}
    assert len(unknown) == 3 and not emitted & unknown
    # The setup transaction (DDL) is emitted too.
    assert sum(e["op"] == "ddl" for e in events) == 2

    # Transactions with changes and no commit or abort: exactly those recovery aborted.
    pending = stream.pending
    with_events = [p for p in pending if p["events"] > 0]
    assert sorted(p["trid"] for p in with_events) == [22275, 22297, 23236]
    oldest = min(p["first_lsa"] for p in pending)
    assert stream.cursor.restart_lsa == oldest
    assert stream.cursor.restart_lsa == min(p["first_lsa"] for p in with_events)
    # Their first records are in the engine's dump under the same trids.
    dump_first = {}
    for d in read_dump("crash"):
        dump_first.setdefault(d.trid, d.lsa)
    for p in with_events:
        assert dump_first[p["trid"]] == p["first_lsa"]


def test_nosupp_raises_a_clear_error():
    log = walcdc.open_log(fixture_dir("nosupp"))
    with pytest.raises(walcdc.NoSupplementalLogError, match="supplemental_log=1") as exc:
        walcdc.read_changes(log).read_all()
    assert exc.value.file == "nosupp_lgat"
    with pytest.raises(walcdc.NoSupplementalLogError):
        walcdc.read_changes(log, committed_only=False).read_all()
