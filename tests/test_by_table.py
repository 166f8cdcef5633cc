"""``walcdc extract --by-table``: one typed Parquet dataset per table. Read back with pyarrow
(part by part, columns mapped by the attribute id in their field metadata) and with DuckDB
(``union_by_name``), the parts replayed in commit order reproduce each fixture's final tables
(``ground_truth/final_state``); two runs with a cursor give the parts of one run. A part is
replaced only by the run that wrote it, repeated (or with --overwrite)."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_final_state import DB_TYPES, client_text, read_tsv
from test_typed_arrow import BIT, cdc_form

import walcdc
from conftest import fixture_dir, ground_truth
from walcdc.cli import main

FIXTURES = ["p4k", "p16k", "v11_2", "crash", "breadth"]


def invoke(log_dir, out, *args):
    return CliRunner().invoke(main, ["extract", str(log_dir), "--by-table", "-o", str(out), *args])


def extract(log_dir, out, *args):
    r = invoke(log_dir, out, *args)
    assert r.exit_code == 0, r.output
    return r


def files(out: Path):
    """Every file under ``out`` and its bytes."""
    return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def rows(out: Path):
    """Every row of every part: (table directory, lsa, op, before, after), sorted."""
    got = []
    for table, f, _ in parts(out):
        for e in pq.read_table(f).to_pylist():
            got.append((table, e["lsa"], e["op"], repr(e["before"]), repr(e["after"])))
    return sorted(got)


def middle_commit(log) -> str:
    commits = walcdc.read_changes(log, decode=False).read_all().column("commit_lsa")
    return walcdc.lsa.format_lsa(commits[len(commits) // 2].as_py())


def text_form(value, col):
    """A typed value as the JSON stream's CDC form (what test_final_state's replay holds)."""
    v = cdc_form(value, col)
    if isinstance(v, tuple):  # BIT: X'..' with one digit per 4 bits of the column
        digits = v[1]
        if col["type"] == BIT and col["precision"] > 0:
            digits = digits[: math.ceil(col["precision"] / 4)]
        return f"X'{digits}'"
    return v


def parts(out: Path):
    """(table directory, part file, its metadata) of every part, in name order."""
    for table_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        for f in sorted(table_dir.glob("*.parquet")):
            meta = {k.decode(): v.decode() for k, v in pq.read_schema(f).metadata.items()}
            yield table_dir.name, f, meta


def replay(out: Path, schemas):
    """(heap class OID, key) -> (class OID, row by current column name), from the parts."""
    by_oid = {s["class_oid"]: s for s in schemas}
    events = []
    for _, f, meta in parts(out):
        if not meta["walcdc.class_oid"]:
            continue
        s = by_oid[int(meta["walcdc.class_oid"])]
        reps = {r["repid"]: r for r in s["representations"]}
        cols = {c["id"]: c for c in reps[int(meta["walcdc.repid"])]["columns"]}
        t = pq.read_table(f)
        # The part's columns by attribute id (a later RENAME COLUMN keeps the representation).
        ids = {
            x.name: int(x.metadata[b"walcdc.attribute_id"]) for x in t.schema.field("after").type
        }
        for e in t.to_pylist():
            events.append((e, s["class_oid"], cols, ids))
    events.sort(key=lambda x: (x[0]["commit_lsa"], x[0]["lsa"]))
    rows = {}
    for e, oid, cols, ids in events:
        s = by_oid[oid]
        cur = {c["id"]: c for c in next(
            r for r in s["representations"] if r["repid"] == s["current_repid"]
        )["columns"]}  # fmt: skip
        pk = [i for i, c in cur.items() if c["primary_key"]]
        if e["op"] == "ddl" and e["ddl_type"] == 4:  # TRUNCATE
            for k in [k for k, (root, _) in rows.items() if oid in (k[0], root)]:
                del rows[k]
        if e["op"] not in ("insert", "update", "delete"):
            continue
        assert e["decode_error"] is None, e["decode_error"]
        heap = e["partition_oid"] or oid

        def by_id(row, ids=ids, cols=cols):
            return {i: text_form(row[name], cols[i]) for name, i in ids.items()}

        def key(row, e=e, heap=heap, pk=pk):
            return (heap, tuple(row[i] for i in pk) if pk else e["row_oid"])

        if e["before"] is not None:
            rows.pop(key(by_id(e["before"])), None)
        if e["after"] is not None:
            after = by_id(e["after"])
            rows[key(after)] = (oid, {cur[i]["name"]: v for i, v in after.items() if i in cur})
    return rows


def check_final_state(name, rows, schemas):
    files = sorted((ground_truth(name) / "final_state").glob("*.tsv*"))
    assert files
    by_name = {s["name"].rsplit(".", 1)[-1]: s for s in schemas if "." in s["name"]}
    for path in files:
        table = path.name.split(".tsv")[0]
        s = by_name[table]
        cur = next(r for r in s["representations"] if r["repid"] == s["current_repid"])
        cols = {c["name"]: c for c in cur["columns"]}
        header, want = read_tsv(path)
        mine = [r for (heap, _), (root, r) in rows.items() if s["class_oid"] in (heap, root)]
        got = [
            tuple(
                client_text(
                    DB_TYPES[cols[c]["type"]],
                    r[c] if c in r else cols[c]["default"],
                    cols[c]["codeset"],
                )
                for c in header
            )
            for r in mine
        ]
        assert sorted(got) == sorted(want), table


@pytest.mark.parametrize("name", FIXTURES)
def test_parts_replay_to_the_final_tables(name, tmp_path):
    log = walcdc.open_log(fixture_dir(name))
    extract(fixture_dir(name), tmp_path)
    schemas = log.schemas()
    check_final_state(name, replay(tmp_path, schemas), schemas)
    # Every row change of the committed stream is in exactly one part.
    plain = walcdc.read_changes(log, decode=False).read_all()
    total = sum(pq.read_metadata(f).num_rows for _, f, _ in parts(tmp_path))
    assert total == plain.num_rows


def test_duckdb_reads_each_table_across_its_parts(tmp_path):
    """breadth: tables altered mid-stream have several parts; DuckDB's union_by_name reads them
    as one table with the same rows as pyarrow, part by part."""
    duckdb = pytest.importorskip("duckdb")
    extract(fixture_dir("breadth"), tmp_path)
    multi = 0
    for table_dir in sorted(p for p in tmp_path.iterdir() if p.is_dir()):
        files = sorted(table_dir.glob("*.parquet"))
        multi += len(files) > 1
        glob = os.path.join(str(table_dir), "*.parquet")
        got = duckdb.sql(
            f"select lsa, op::varchar as op, to_json(after)::varchar as after "
            f"from read_parquet('{glob}', union_by_name = true) order by lsa"
        ).fetchall()
        want = []
        for f in files:
            for e in pq.read_table(f).to_pylist():
                want.append((e["lsa"], e["op"], e["after"]))
        want.sort(key=lambda x: x[0])
        assert [(lsa, op) for lsa, op, _ in got] == [(lsa, op) for lsa, op, _ in want]
        for (_, _, g), (_, _, w) in zip(got, want):
            if w is None:
                assert g is None
                continue
            g = json.loads(g)
            # A part's row has its representation's columns; the union has every part's.
            assert set(w) <= set(g)
            for k, v in w.items():
                if isinstance(v, (int, str)) and not isinstance(v, bool):
                    assert g[k] == v, (table_dir.name, k)
    assert multi > 0


def test_two_runs_with_a_cursor_give_the_rows_of_one(tmp_path):
    name = "p4k"
    log = walcdc.open_log(fixture_dir(name))
    one, two = tmp_path / "one", tmp_path / "two"
    extract(fixture_dir(name), one)
    cursor = tmp_path / "cursor.json"
    extract(fixture_dir(name), two, "--cursor", str(cursor), "--to", middle_commit(log))
    r = extract(fixture_dir(name), two, "--cursor", str(cursor))
    assert "cursor saved" in r.output
    assert rows(two) == rows(one)
    assert len(list(parts(two))) > len(list(parts(one)))
    # A third run finds nothing new and writes nothing.
    r = extract(fixture_dir(name), two, "--cursor", str(cursor))
    assert "no new events" in r.output


def test_a_run_never_replaces_the_parts_of_another(tmp_path):
    """The reported case: after a whole extraction, a run from the beginning of one table to an
    earlier end names its part of t_types as the first run did, with fewer rows. It is refused,
    naming the part, before anything is written: the files and the cursor are as they were.
    --overwrite replaces the part."""
    log = fixture_dir("p4k")
    out, cursor = tmp_path / "out", tmp_path / "cursor.json"
    extract(log, out)
    before = files(out)
    [part] = sorted((out / "dba.t_types").glob("*.parquet"))
    whole = pq.read_metadata(part).num_rows
    again = ["--tables", "t_types", "--to", "2779|1080", "--cursor", str(cursor)]
    r = invoke(log, out, *again)
    assert r.exit_code != 0
    assert str(part) in r.output and "another run" in r.output and "--overwrite" in r.output
    assert files(out) == before
    assert not cursor.exists()
    r = extract(log, out, *again, "--overwrite")
    assert "cursor saved" in r.output
    assert 0 < pq.read_metadata(part).num_rows < whole
    assert not list(out.rglob(".walcdc-*"))


def test_a_run_repeated_from_its_cursor_replaces_its_own_parts(tmp_path):
    """A crash after a run published its parts but before it saved its cursor: the run repeated
    from the same cursor writes parts of the same names, replaces them (every part is a new
    file) and moves the cursor; the rows are those of one whole extraction, once."""
    log_dir = fixture_dir("p4k")
    out, cursor = tmp_path / "out", tmp_path / "cursor.json"
    extract(log_dir, out, "--cursor", str(cursor), "--to", middle_commit(log_dir))
    saved = cursor.read_bytes()
    extract(log_dir, out, "--cursor", str(cursor))
    published = {p: p.stat().st_ino for _, p, _ in parts(out)}
    second = [p for _, p, meta in parts(out) if meta["walcdc.run_from"] != "beginning"]
    assert second
    cursor.write_bytes(saved)  # the crash: the second run's cursor was never saved
    r = extract(log_dir, out, "--cursor", str(cursor))
    assert "cursor saved" in r.output and cursor.read_bytes() != saved
    assert {p for _, p, _ in parts(out)} == set(published)
    assert all(p.stat().st_ino != published[p] for p in second)
    one = tmp_path / "one"
    extract(log_dir, one)
    assert rows(out) == rows(one)


def test_a_repeated_run_that_read_less_replaces_nothing(tmp_path):
    """The same run (from the beginning, the same options) on an older copy of a log: its part
    would hold fewer rows than the one it has the name of, so it is refused."""
    from test_cdcserver import LiveTable

    live = LiveTable(tmp_path / "log")
    live.commit(inserts=[(1, {"name": "a"}), (2, {"name": "b"})])
    shutil.copytree(tmp_path / "log", tmp_path / "older")
    live.commit(inserts=[(3, {"name": "c"})])
    out = tmp_path / "out"
    extract(tmp_path / "log", out)
    before = files(out)
    r = invoke(tmp_path / "older", out)
    assert r.exit_code != 0 and "more than" in r.output, r.output
    assert files(out) == before
    extract(tmp_path / "log", out)  # the same run again: its own parts, as many rows


def test_refuses_what_does_not_apply(tmp_path):
    for args in (["--engine"], ["--envelope", "debezium"], ["--format", "jsonl"]):
        r = CliRunner().invoke(
            main, ["extract", str(fixture_dir("breadth")), "--by-table", "-o", str(tmp_path), *args]
        )
        assert r.exit_code != 0 and "--by-table" in r.output, r.output
    f = tmp_path / "file.parquet"
    f.write_bytes(b"")
    r = CliRunner().invoke(
        main, ["extract", str(fixture_dir("breadth")), "--by-table", "-o", str(f)]
    )
    assert r.exit_code != 0 and "directory" in r.output


def test_tables_without_a_schema_keep_their_raw_images(tmp_path):
    """p4k without its first two archives: t_types' class records are gone. Its rows go to
    _unknown_schema/ with the raw images (nothing lost), and no temporary file is left."""
    src = fixture_dir("p4k")
    logs = tmp_path / "log"
    logs.mkdir()
    for f in ("p4k_lgar002", "p4k_lgat"):
        os.symlink(src / f, logs / f)
    out = tmp_path / "out"
    # (Other tables' chases reach into the missing archives: only t_types is read.)
    extract(logs, out, "--tables", "0|229|1", "--ops", "insert,update,delete")
    unknown = sorted((out / "_unknown_schema").glob("*.parquet"))
    assert unknown
    t = pq.read_table(unknown[0])
    assert t.num_rows > 0 and "after_image" in t.schema.names
    assert all(e for e in t.column("decode_error").to_pylist())
    plain = walcdc.read_changes(logs, decode=False, tables="0|229|1", ops="insert,update,delete")
    plain = plain.read_all()
    assert sum(pq.read_metadata(f).num_rows for _, f, _ in parts(out)) == plain.num_rows
    assert not [p for p in out.rglob(".walcdc-*")]


def test_abort_markers_and_odd_table_names(tmp_path):
    """Markers of aborted transactions (no commit LSA) go to _ddl/ and name their part by their
    own LSA; every table directory is its name, escaped where a file name could not hold it."""
    from walcdc.sinks.tables import OTHER_DDL, UNKNOWN_SCHEMA, table_directory

    extract(fixture_dir("breadth"), tmp_path, "--ops", "insert,update,delete,ddl,abort")
    ddl = sorted((tmp_path / OTHER_DDL).glob("*.parquet"))
    ops = {op for f in ddl for op in pq.read_table(f).column("op").to_pylist()}
    assert "abort" in ops
    names = {table_directory(n) for n in ("dba.a b", "dba.a$b", "dba.a_b", "_ddl", "..")}
    assert len(names) == 5 and OTHER_DDL not in names and UNKNOWN_SCHEMA not in names
    assert all("/" not in n and not n.startswith(".") for n in names)
