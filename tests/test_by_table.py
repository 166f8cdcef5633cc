"""``walcdc extract --by-table``: one typed Parquet dataset per table. Read back with pyarrow
(part by part, columns mapped by the attribute id in their field metadata) and with DuckDB
(``union_by_name``), the parts replayed in commit order reproduce each fixture's final tables
(``ground_truth/final_state``); two runs with a cursor give the parts of one run. A part is
replaced only by the run that wrote it, repeated (or with --overwrite). Every part of a table
has the table's every column, so that pyarrow, DuckDB and polars read a table's directory
whole, value for value the typed streams', after one run or two (an ALTER between them:
earlier parts rewritten with the new columns)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_final_state import DB_TYPES, client_text, read_tsv
from test_typed_arrow import BIT, cdc_form

import walcdc
from conftest import assert_same_rows, fixture_dir, ground_truth
from walcdc.cli import main
from walcdc.sinks.tables import table_directory

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


def tables(out: Path):
    """Every table directory's parts read as one table, in LSA order (the parts of a table all
    have its widest columns)."""
    got = {}
    for table, f, _ in parts(out):
        got.setdefault(table, []).append(pq.read_table(f))
    return {t: pa.concat_tables(p).sort_by("lsa") for t, p in got.items()}


def assert_same_tables(got, want):
    assert sorted(got) == sorted(want)
    for table in want:
        assert_same_rows(got[table], want[table], table)


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
            # A part has every column its table ever had: the row's are its representation's
            # (a renamed column is two fields of one id, the value in one of them).
            out = {}
            for name, i in ids.items():
                if i in cols and out.get(i) is None:
                    out[i] = text_form(row[name], cols[i])
            return out

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
    assert_same_tables(tables(two), tables(one))
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
    assert_same_tables(tables(out), tables(one))


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


#: The columns of a table's images.
VALUES = ("before", "after")


def read_back(table_dir: Path):
    """A table's directory as each reader reads it, with no option for differing schemas."""
    duckdb = pytest.importorskip("duckdb")
    polars = pytest.importorskip("polars")
    glob = os.path.join(str(table_dir), "*.parquet")
    return {
        "pyarrow.parquet.read_table": pq.read_table(table_dir),
        "pyarrow.dataset": ds.dataset(table_dir, format="parquet").to_table(),
        "duckdb": pa.table(duckdb.sql(f"select * from read_parquet('{glob}')")),
        "polars.read_parquet": polars.read_parquet(glob).to_arrow(),
        "polars.scan_parquet": polars.scan_parquet(glob).collect().to_arrow(),
    }


def check_table(table_dir: Path, log_dir, table: str):
    """Every part of ``table_dir`` has one schema: ``before`` / ``after`` hold every column
    the table's representations had (matched by name). Each reader gives every row of the
    stream by table, each image with every column: the stream's values, null where the row's
    representation has no such column; and for the table's current columns, by attribute id,
    the values of the typed stream (``read_table_changes``)."""
    files = sorted(table_dir.glob("*.parquet"))
    schema = pq.read_schema(files[0]).remove_metadata()
    for f in files:
        assert pq.read_schema(f).remove_metadata().equals(schema, check_metadata=True), f
    columns = list(schema.field("after").type)
    names = [c.name for c in columns]
    ids = {c.name: int(c.metadata[b"walcdc.attribute_id"]) for c in columns}
    family = {n: re.sub(r"#\d+$", "", n) for n in names}
    log = walcdc.open_log(log_dir)
    for s in log.schemas():
        if s["name"] == table:
            for r in s["representations"]:
                assert {c["name"] for c in r["columns"]} <= set(names), r["repid"]
    stream = {}
    for b in walcdc.read_changes_by_table(log, tables=table):
        if b.kind == "table" and b.table == table:
            stream.update((e["lsa"], e) for e in b.batch.to_pylist())
    typed = walcdc.read_table_changes(log, table).read_all()
    now_ids = {
        c.name: int(c.metadata[b"walcdc.attribute_id"]) for c in typed.schema.field("after").type
    }
    typed = {e["lsa"]: e for e in typed.to_pylist()}
    assert stream.keys() == typed.keys()
    for reader, t in read_back(table_dir).items():
        got = {e["lsa"]: e for e in t.to_pylist()}
        assert got.keys() == stream.keys(), reader
        for lsa, want in stream.items():
            e = got[lsa]
            assert e["op"] == want["op"], (reader, lsa)
            for image in VALUES:
                if want[image] is None:
                    assert e[image] is None, (reader, lsa, image)
                    assert typed[lsa][image] is None
                    continue
                assert list(e[image]) == names, (reader, lsa)
                # Each value of the stream in the column of its name (or in one of its name's
                # columns per type, name#2, ...), every other column null.
                for n in names:
                    if family[n] not in want[image]:
                        assert e[image][n] is None, (reader, lsa, image, n)
                for n, v in want[image].items():
                    held = [e[image][m] for m in names if family[m] == n]
                    held = [x for x in held if x is not None]
                    assert held == ([] if v is None else [v]), (reader, lsa, image, n)
                if typed[lsa]["decode_error"] is not None:
                    continue  # a value the current type cannot hold (it is null there)
                for name, i in now_ids.items():
                    held = [e[image][n] for n in names if ids[n] == i and e[image][n] is not None]
                    value = held[0] if held else None
                    assert typed[lsa][image][name] == value, (reader, lsa, image, name)
    return names


def altered_tables(log):
    """The user tables of a log that an ALTER gave more than one representation."""
    return sorted(
        s["name"]
        for s in log.schemas()
        if s["name"].startswith("dba.") and sum(1 for r in s["representations"] if r["columns"]) > 1
    )


@pytest.mark.parametrize("name", ["p4k", "breadth"])
def test_every_reader_reads_an_altered_table_whole(name, tmp_path):
    """p4k's t_alter (ADD COLUMN c, DROP COLUMN b) and breadth's t_chg (n INTEGER to BIGINT:
    the wider type; s to VARCHAR(200), RENAME COLUMN s TO s_long: both names kept) read with
    pyarrow, DuckDB and polars as one table of every column and every row; the same when the
    table's first ALTER falls in a second run, from the first run's cursor."""
    log_dir = fixture_dir(name)
    log = walcdc.open_log(log_dir)
    tables = altered_tables(log)
    assert tables
    for table in tables:
        one = tmp_path / table / "one"
        extract(log_dir, one, "--tables", table)
        names = check_table(one / table_directory(table), log_dir, table)
        assert len(list((one / table_directory(table)).glob("*.parquet"))) > 1
        alter = next(
            e["lsa"]
            for e in walcdc.read_changes(log, tables=table, ops="ddl").read_all().to_pylist()
            if e["ddl_type"] == 1
        )
        two, cursor = tmp_path / table / "two", tmp_path / table / "cursor.json"
        extract(log_dir, two, "--tables", table, "--cursor", str(cursor), "--to", str(alter))
        extract(log_dir, two, "--tables", table, "--cursor", str(cursor))
        assert check_table(two / table_directory(table), log_dir, table) == names


def alter(live, columns, statement):
    """An ALTER of the live table to ``columns`` (a new representation)."""
    t = live.work.begin(4)
    new = live.table._altered(columns, live.table.next_id)
    t.alter_table(live.table, new, statement=statement)
    t.commit()
    live.table = new
    live.w.flush()


def test_an_alter_after_a_run_rewrites_the_parts_before_it(tmp_path):
    """A log that grows: the first run knows the table's first columns only; ADD COLUMN note and
    DROP COLUMN name come after it. The second run writes parts with every column and rewrites
    the first run's part with them (beside it, then renamed, before the cursor moves; its rows
    and metadata kept), so that every reader reads the table whole. Repeated after a crash
    before its cursor was saved, it has nothing left to rewrite."""
    from test_cdcserver import LiveTable

    live = LiveTable(tmp_path / "log")
    live.commit(inserts=[(1, {"name": "a"}), (2, {"name": "b"})])
    shutil.copytree(tmp_path / "log", tmp_path / "then")
    out, cursor = tmp_path / "out", tmp_path / "cursor.json"
    extract(tmp_path / "then", out, "--cursor", str(cursor))
    [first] = (out / "dba.t").glob("*.parquet")
    assert [c.name for c in pq.read_schema(first).field("after").type] == ["id", "name"]
    live.add_column()
    live.commit(inserts=[(3, {"name": "c", "note": "n3"})], updates=[(1, {"name": "a2"})])
    alter(live, [c for c in live.table.columns if c["name"] != "name"], "ALTER TABLE t DROP name")
    live.commit(inserts=[(4, {"note": "n4"})])

    saved, inode = cursor.read_bytes(), first.stat().st_ino
    r = extract(tmp_path / "log", out, "--cursor", str(cursor))
    assert "rewrote 1 part" in r.output, r.output
    assert first.stat().st_ino != inode
    meta = pq.read_metadata(first).metadata
    assert meta[b"walcdc.run_from"] == b"beginning" and b"walcdc.cursor" in meta
    assert pq.read_metadata(first).num_rows == 3
    assert check_table(out / "dba.t", tmp_path / "log", "dba.t") == ["id", "name", "note"]
    assert not list(out.rglob(".walcdc-*"))

    cursor.write_bytes(saved)  # the crash: the second run's cursor was never saved
    inode = first.stat().st_ino
    r = extract(tmp_path / "log", out, "--cursor", str(cursor))
    assert "rewrote" not in r.output and first.stat().st_ino == inode
    check_table(out / "dba.t", tmp_path / "log", "dba.t")
    whole = tmp_path / "whole"
    extract(tmp_path / "log", whole)
    assert_same_tables(tables(out), tables(whole))


def test_a_column_whose_type_changed_to_one_that_cannot_hold_its_values(tmp_path):
    """ALTER ... CHANGE name INTEGER (from VARCHAR): no type holds both, so the table's parts
    get a column per type, ``name`` and ``name#2``, each row's value in the one of its type
    (the typed stream of the current columns has null and decode_error for the older rows)."""
    from test_cdcserver import LiveTable

    live = LiveTable(tmp_path / "log")
    live.commit(inserts=[(1, {"name": "a"})])
    changed = [dict(c, type="INTEGER", precision=10) if c["name"] == "name" else c for c in
               live.table.columns]  # fmt: skip
    alter(live, changed, "ALTER TABLE t CHANGE COLUMN name name INTEGER")
    live.commit(inserts=[(2, {"name": 7})])
    out = tmp_path / "out"
    extract(tmp_path / "log", out)
    assert check_table(out / "dba.t", tmp_path / "log", "dba.t") == ["id", "name", "name#2"]
    after = {e["after"]["id"]: e["after"] for e in rows_of(out / "dba.t") if e["after"]}
    assert after == {
        1: {"id": 1, "name": "a", "name#2": None},
        2: {"id": 2, "name": None, "name#2": 7},
    }
    typed = walcdc.read_table_changes(tmp_path / "log", "dba.t").read_all().to_pylist()
    assert [e["decode_error"] is not None for e in typed if e["op"] == "insert"] == [True, False]


def rows_of(table_dir: Path):
    return pq.read_table(table_dir).to_pylist()


def test_a_part_that_cannot_be_read_stops_the_run(tmp_path):
    """A table's directory holding a part that is no Parquet file: the run cannot know the
    table's columns in it, so it stops, naming the file, with nothing written or moved."""
    from test_cdcserver import LiveTable

    live = LiveTable(tmp_path / "log")
    live.commit(inserts=[(1, {"name": "a"})])
    out, cursor = tmp_path / "out", tmp_path / "cursor.json"
    (out / "dba.t").mkdir(parents=True)
    bad = out / "dba.t" / "part-000000000000_00000-r1.parquet"
    bad.write_bytes(b"not parquet")
    r = invoke(tmp_path / "log", out, "--cursor", str(cursor))
    assert r.exit_code == 4 and str(bad) in r.output, r.output
    assert files(out) == {bad.relative_to(out): b"not parquet"} and not cursor.exists()
