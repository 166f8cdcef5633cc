"""The user-facing API around change events: filters, positions (LSA and time), cursors and
their refusal on another database, retention, the CLI."""

from __future__ import annotations

import datetime
import os
import shutil

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import walcdc
from conftest import assert_same_rows, fixture_dir
from walcdc import lsa as L
from walcdc.cli import main

T_TYPES = "0|229|1"  # class OID of p4k's t_types as CUBRID prints it (catalog.json)


def _no_seq(rows):
    # txn_seq numbers the events a stream emits for a transaction, so filters renumber it.
    return [{k: v for k, v in e.items() if k != "txn_seq"} for e in rows]


def test_filters_are_subsets_of_the_full_stream(p4k, p4k_table):
    import pyarrow.compute as pc

    t_types = walcdc.oid.parse(T_TYPES)
    # txn_seq numbers the events a stream emits for a transaction, so filters renumber it.
    full = p4k_table.drop_columns(["txn_seq"])
    cls, op = full.column("class_oid"), full.column("op")

    def read(**kw):
        return walcdc.read_changes(p4k, **kw).read_all().drop_columns(["txn_seq"])

    def same(got, mask, what):
        assert_same_rows(got, full.filter(mask), what)

    # A table filter keeps that table's events only (its DDL included)...
    only = read(tables=[T_TYPES])
    same(only, pc.equal(cls, t_types), "tables=[t_types]")
    assert only.num_rows and "ddl" in only.column("op").to_pylist()
    # ... and DDL that belongs to no table (serials) only when asked.
    with_all = read(tables=[T_TYPES], include_ddl="all")
    same(with_all, pc.or_kleene(pc.equal(cls, t_types), pc.is_null(cls)), "include_ddl=all")
    assert with_all.num_rows > only.num_rows
    without = read(exclude_tables=[t_types])
    same(without, pc.or_kleene(pc.not_equal(cls, t_types), pc.is_null(cls)), "exclude_tables")
    same(read(ops=["delete"]), pc.equal(pc.cast(op, "string"), "delete"), "ops=[delete]")
    assert walcdc.read_changes(p4k, users=["dba"]).read_all().num_rows == full.num_rows
    with pytest.warns(walcdc.UsersNotInLog, match="nobody"):
        assert walcdc.read_changes(p4k, users=["nobody"]).read_all().num_rows == 0
    trigger = full.column("trigger")
    same(read(include_trigger=False), pc.invert(trigger), "include_trigger=False")
    assert pc.sum(trigger).as_py() > 0
    ids = walcdc.read_changes(p4k, mode="id").read_all()
    assert ids.column("after_image").null_count == ids.num_rows
    assert ids.column("row_oid").equals(full.column("row_oid"))


def test_commit_markers_when_asked(p4k, p4k_all):
    rows = walcdc.read_changes(p4k, ops=["insert", "update", "delete", "ddl", "commit"])
    rows = rows.read_all().to_pylist()
    markers = [e for e in rows if e["op"] == "commit"]
    # One marker after the events of each transaction that has events, at its commit LSA.
    assert len(markers) == len({e["commit_lsa"] for e in p4k_all})
    assert all(m["lsa"] == m["commit_lsa"] for m in markers)
    assert [e for e in rows if e["op"] != "commit"] == p4k_all


def test_time_positions_like_cdc_find_lsa(p4k, p4k_all):
    # The capture of CUBRID's CDC started at find_lsa(time=0): 368|736 (fixtures README).
    lsa, adjusted = p4k._native.find_lsa(0)
    assert L.format_lsa(lsa) == "368|736" and not adjusted
    t = p4k_all[len(p4k_all) // 2]["commit_time"]
    later = walcdc.read_changes(p4k, start=t).read_all().to_pylist()
    first, _ = p4k._native.find_lsa(int(t.timestamp()))
    # Transactions in flight at that point are seen from it on, as CUBRID's CDC sees them.
    assert _no_seq(later) == _no_seq([e for e in p4k_all if e["lsa"] >= first])
    assert 0 < len(later) < len(p4k_all)
    with pytest.raises(walcdc.InvalidArgumentError):
        walcdc.read_changes(p4k, start=datetime.datetime(2030, 1, 1))  # naive datetime


def test_start_must_be_a_record_start(p4k):
    with pytest.raises(walcdc.InvalidArgumentError, match="no record starts"):
        walcdc.read_changes(p4k, start="368|744")
    walcdc.read_changes(p4k, start="368|736")  # a record


def test_start_inside_a_deleted_archive(tmp_path):
    src = fixture_dir("p4k")
    for f in ("p4k_lgar001", "p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, tmp_path / f)
    log = walcdc.open_log(tmp_path)
    assert log.info()["first_lsa"] >> 16 == 5118
    with pytest.raises(walcdc.MissingArchiveError):
        walcdc.read_changes(log, start="368|736")


def test_cursor_is_tied_to_its_database(p4k):
    s = walcdc.read_changes(p4k, end="5000|0")
    s.read_all()
    c = s.cursor
    other = walcdc.open_log(fixture_dir("p16k"))
    with pytest.raises(walcdc.InvalidArgumentError, match="another database"):
        walcdc.read_changes(other, cursor=c)
    bad = walcdc.Cursor(c.db_creation, c.restart_lsa + 8, c.last_commit_lsa)
    with pytest.raises(walcdc.InvalidArgumentError, match="no record starts"):
        walcdc.read_changes(p4k, cursor=bad)
    assert walcdc.Cursor.from_json(c.to_json()) == c


def test_min_archive_needed(p4k):
    s = walcdc.read_changes(p4k, end="6000|0")
    s.read_all()
    c = s.cursor
    # The huge transaction (first record 857|3008, archive 0) is still open at 6000|0.
    assert L.format_lsa(c.restart_lsa) == "857|3008"
    assert p4k._native.min_archive_needed(c.restart_lsa) == 0
    assert p4k._native.min_archive_needed(L.parse("10236|0")) == 2
    assert p4k._native.min_archive_needed(L.parse("15400|0")) == 3


def test_cli_inspect_sample():
    r = CliRunner().invoke(main, ["inspect", "--sample", "--stats", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "records: 18,749" in r.output
    assert "LOG_SUPPLEMENTAL_INFO" in r.output
    assert "end: 862|3536 (end_of_log)" in r.output


def test_cli_extract_resumes_with_a_cursor(tmp_path, p4k_all):
    d = fixture_dir("p4k")
    cur = tmp_path / "cursor.json"
    r = CliRunner().invoke(
        main,
        [
            "extract",
            str(d),
            "-o",
            str(tmp_path / "a.parquet"),
            "--to",
            "5000|0",
            "--cursor",
            str(cur),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        main,
        [
            "extract",
            str(d),
            "-o",
            str(tmp_path / "b.parquet"),
            "--cursor",
            str(cur),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = pq.read_table(tmp_path / "a.parquet").to_pylist()
    rows += pq.read_table(tmp_path / "b.parquet").to_pylist()
    assert rows == p4k_all


def test_cli_errors_are_clean(tmp_path):
    bad = tmp_path / "x_lgat"
    bad.write_bytes(b"\\0" * 100)
    r = CliRunner().invoke(main, ["inspect", str(bad)])
    # README, "Command line": 3 = the log cannot be read as asked.
    assert r.exit_code == 3 and "error:" in r.output
    shutil.copy(fixture_dir("nosupp") / "nosupp_lgat", tmp_path / "nosupp_lgat")
    bad.unlink()
    r = CliRunner().invoke(main, ["extract", str(tmp_path), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 3 and "supplemental_log=1" in r.output


def test_table_names_filter(p4k, p4k_all):
    by_name = walcdc.read_changes(p4k, tables=["t_types"]).read_all().to_pylist()
    by_oid = walcdc.read_changes(p4k, tables=[T_TYPES]).read_all().to_pylist()
    assert by_name == by_oid
    assert {e["table"] for e in by_name if e["op"] != "ddl"} == {"dba.t_types"}
    qualified = walcdc.read_changes(p4k, tables=["DBA.T_TYPES"]).read_all().to_pylist()
    assert qualified == by_name
    rest = walcdc.read_changes(p4k, exclude_tables=["t_types"]).read_all().to_pylist()
    assert {e["table"] for e in rest} >= {"dba.t_nopk", "dba.t_huge"}
    assert "dba.t_types" not in {e["table"] for e in rest if e["op"] != "ddl"}


def test_logset_retention_and_schemas(p4k):
    assert p4k.min_archive_needed(walcdc.Cursor(0, L.parse("7000|0"), None)) == 1
    assert p4k.min_archive_needed(L.parse("15400|0")) == 3
    names = {s["name"] for s in p4k.schemas()}
    assert {"dba.t_types", "dba.t_new_name", "dba.t_alter"} <= names


def test_logset_takes_one_path_as_it_takes_a_list(p4k):
    """``LogSet("dir")`` is the directory, not one volume path per character of its name."""
    from pathlib import Path

    directory = fixture_dir("p4k")
    volumes = [os.fspath(v) for v in walcdc.LogSet([directory]).volumes().paths]
    for one in (directory, Path(directory), os.fsencode(directory)):
        assert [os.fspath(v) for v in walcdc.LogSet(one).volumes().paths] == volumes
    assert walcdc.LogSet(directory).header() == p4k.header()


def test_cli_schema():
    r = CliRunner().invoke(main, ["schema", "--sample"])
    assert r.exit_code == 0, r.output
    assert "dba.t_chg" in r.output and "s_long" in r.output
    assert "ekr                      VARCHAR(60) euckr" in r.output


def test_chase_landing_on_the_wrong_record_is_an_error(tmp_path):
    from walcdc.testing import LogWriter, Workload, _native_oid, _raw_lsa, cdc_oid

    w = LogWriter(page_size=4096, active_pages=8, archive_pages=4)
    wl = Workload(w)
    t = wl.begin(1)
    t.insert(cdc_oid(0, 229, 1), b"row", page=100, slot=1)
    # A second INSERT supplemental record that names the transaction's savepoint record.
    sp = t.savepoint()
    t._supplement("insert", _native_oid(cdc_oid(0, 229, 1)) + _raw_lsa(sp))
    t.commit()
    w.finish(tmp_path)
    with pytest.raises(walcdc.CorruptRecordError, match="holds none") as exc:
        walcdc.read_changes(tmp_path).read_all()
    assert exc.value.lsa == sp
    rows = walcdc.read_changes(tmp_path, on_error="skip").read_all().to_pylist()
    assert [r["error"] is None for r in rows] == [True, False]
    assert rows[1]["after_image"] is None and "holds none" in rows[1]["error"]


@pytest.mark.parametrize("where", ["inside a record", "past the end"])
def test_chase_lsa_leading_nowhere_is_a_corrupt_record(tmp_path, where):
    from walcdc.testing import LogWriter, Workload, _native_oid, _raw_lsa, cdc_oid

    w = LogWriter(page_size=4096, active_pages=8, archive_pages=4)
    wl = Workload(w)
    t = wl.begin(1)
    t.insert(cdc_oid(0, 229, 1), b"row", page=100, slot=1)
    sp = t.savepoint()
    target = sp + 3 if where == "inside a record" else L.make(L.split(sp)[0] + 1000, 0)
    bad = t._supplement("insert", _native_oid(cdc_oid(0, 229, 1)) + _raw_lsa(target))
    t.commit()
    w.finish(tmp_path)
    with pytest.raises(walcdc.CorruptRecordError, match="leads nowhere") as exc:
        walcdc.read_changes(tmp_path).read_all()
    # Named by the supplemental record that holds the bad LSA, in its volume.
    assert exc.value.lsa == bad and exc.value.file == "walcdc_lgat"


def test_positions_outside_the_log(p4k):
    with pytest.raises(walcdc.InvalidArgumentError):
        walcdc.read_changes(p4k, start="99999|0")


def _resume_in_steps(log, step, **kw):
    """Reads a stream `step` events at a time, each time in a new stream from the cursor."""
    out, cursor = [], None
    while True:
        s = walcdc.read_changes(log, cursor=cursor, batch_size=step, **kw)
        try:
            batch = s.read_next_batch()
        except StopIteration:
            return out
        out += batch.to_pylist()
        cursor = s.cursor


def _key(e):
    return (e["lsa"], e["op"], e["commit_lsa"])


@pytest.mark.parametrize("committed_only", [True, False])
def test_resuming_in_steps_equals_one_pass(committed_only):
    # Markers included (aborts, and the engine stream's commits and timers): nothing repeated.
    log = walcdc.open_log(fixture_dir("breadth"))
    ops = ["insert", "update", "delete", "ddl", "commit", "abort", "timer"]
    whole = walcdc.read_changes(log, committed_only=committed_only, ops=ops).read_all()
    steps = _resume_in_steps(log, 37, committed_only=committed_only, ops=ops)
    assert [_key(e) for e in steps] == [_key(e) for e in whole.to_pylist()]
    # The schemas learned before each restart include those of transactions still open there
    # (a CREATE TABLE that commits after the restart point).
    assert all(e["decode_error"] is None for e in steps)
    assert [e["after"] for e in steps] == whole.column("after").to_pylist()


def test_cursor_of_the_other_stream_is_refused(p4k):
    s = walcdc.read_changes(p4k, end="2000|0")
    s.read_all()
    with pytest.raises(walcdc.InvalidArgumentError, match="committed-only"):
        walcdc.read_changes(p4k, cursor=s.cursor, committed_only=False)


def test_no_false_alarm_about_supplemental_logging():
    # A window that starts where transactions changing only catalog rows commit first
    # (breadth, trid 26) still has supplemental records later: no NoSupplementalLogError.
    import pyarrow.compute as pc

    log = walcdc.open_log(fixture_dir("breadth"))
    t = log.records().read_all()
    first = pc.min(pc.filter(t.column("lsa"), pc.equal(t.column("trid"), 26))).as_py()
    assert walcdc.read_changes(log, start=first).read_all().num_rows > 0


def test_records_builds_only_the_columns_asked_for():
    log = walcdc.open_log(fixture_dir("breadth"))
    full = log.records(payloads=True).read_all()
    for columns in (["lsa", "type"], ["trid", "lsa"], "redo,file,undo_length", ["undo"]):
        got = log.records(payloads=True, columns=columns).read_all()
        names = columns.split(",") if isinstance(columns, str) else columns
        # The schema's order, whatever the order asked.
        want = full.select([n for n in full.schema.names if n in names])
        assert got.equals(want), columns
    with pytest.raises(walcdc.InvalidArgumentError, match='no column "nope"'):
        log.records(columns=["lsa", "nope"])
    with pytest.raises(walcdc.InvalidArgumentError, match="payloads=True"):
        log.records(columns=["undo"])


def test_option_defaults_are_read_changes_defaults():
    import inspect

    from walcdc.changes import OPTION_DEFAULTS

    params = inspect.signature(walcdc.read_changes).parameters
    assert {k: params[k].default for k in OPTION_DEFAULTS} == OPTION_DEFAULTS
