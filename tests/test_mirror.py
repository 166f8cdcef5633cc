"""``walcdc mirror --to delta:DIR``: one Delta table per CUBRID table, kept equal to it. Mirroring
a whole log gives tables whose rows equal each fixture's final tables
(``ground_truth/final_state``, every row and column, in the client's print forms), read back
with ``deltalake`` and with a reader of this file's own (the Delta log's add and remove actions,
the Parquet files read by pyarrow). Mirroring in several runs over a log cut at random points,
or killed at random moments and run again, gives exactly the one-run tables."""

from __future__ import annotations

import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_by_table import text_form
from test_final_state import DB_TYPES, client_text, read_tsv
from test_typed_arrow import TIME

import walcdc
from conftest import fixture_dir, ground_truth, tiered
from walcdc.cli import main
from walcdc.mirrors import COMMIT_LSA, CURSOR_FILE, ROW_OID, mirror
from walcdc.mirrors.delta import DROPPED
from walcdc.sinks.tables import table_directory

deltalake = pytest.importorskip("deltalake")

FIXTURES = ["p4k", "p16k", "v11_2", "crash", "breadth"]


def delta_files(path: Path):
    """The data files a Delta table holds at its latest version, from its log alone: the last
    checkpoint's adds, then each later commit's adds and removes in order."""
    log = path / "_delta_log"
    live = {}
    start = 0
    last = log / "_last_checkpoint"
    if last.exists():
        version = json.loads(last.read_text())["version"]
        checkpoint = pq.read_table(log / f"{version:020d}.checkpoint.parquet")
        for add in checkpoint.column("add").to_pylist():
            if add is not None:
                live[add["path"]] = True
        start = version + 1
    versions = sorted(int(p.name[:20]) for p in log.glob("*.json") if p.name[:20].isdigit())
    for v in versions:
        if v < start:
            continue
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = True
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return [path / p for p in live]


def read_delta(path: Path) -> pa.Table:
    """A Delta table's rows, with deltalake and with this file's reader, which must agree."""
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    schema = table.schema
    own = [pq.read_table(f).cast(schema) for f in delta_files(path)]
    mine = pa.concat_tables(own) if own else schema.empty_table()
    key = [(c, "ascending") for c in (COMMIT_LSA, ROW_OID)]
    assert mine.sort_by(key).equals(table.sort_by(key)), path
    return table


def mirrored(out: Path):
    """Each mirrored table's rows by directory name (dropped tables left out)."""
    return {
        p.name: read_delta(p)
        for p in sorted(out.iterdir())
        if (p / "_delta_log").is_dir() and DROPPED not in p.name
    }


def lake_value(value, col):
    """A mirrored value as the typed stream has it (TIME is text in Delta)."""
    if value is not None and col["type"] == TIME:
        return datetime.time.fromisoformat(value)
    return value


def check_final_state(name: str, out: Path) -> None:
    log = walcdc.open_log(fixture_dir(name))
    schemas = log.schemas()
    by_name = {s["name"].rsplit(".", 1)[-1]: s for s in schemas if "." in s["name"]}
    tables = mirrored(out)
    files = sorted((ground_truth(name) / "final_state").glob("*.tsv*"))
    assert files
    seen = set()
    for path in files:
        table = path.name.split(".tsv")[0]
        if "__p__" in table:
            # A partition's rows are its partitioned table's: the root's file holds them all.
            root = path.parent / path.name.replace(table, table.split("__p__")[0])
            assert set(read_tsv(path)[1]) <= set(read_tsv(root)[1])
            continue
        s = by_name[table]
        cur = next(r for r in s["representations"] if r["repid"] == s["current_repid"])
        cols = {c["name"]: c for c in cur["columns"]}
        header, want = read_tsv(path)
        directory = table_directory(s["name"])
        seen.add(directory)
        rows = tables[directory].to_pylist() if directory in tables else []
        got = [
            tuple(
                client_text(
                    DB_TYPES[cols[c]["type"]],
                    text_form(lake_value(r[c], cols[c]), cols[c]),
                    cols[c]["codeset"],
                )
                for c in header
            )
            for r in rows
        ]
        assert sorted(got) == sorted(want), table
    # Every mirrored table is one of the final tables, or a table that was empty at the end.
    for directory, t in tables.items():
        assert directory in seen or t.num_rows == 0, directory


@pytest.mark.parametrize("name", FIXTURES)
def test_a_mirror_of_the_whole_log_equals_the_final_tables(name, tmp_path):
    done = mirror(fixture_dir(name), f"delta:{tmp_path}")
    assert done.commits > 0
    check_final_state(name, tmp_path)
    # Run again: nothing new, nothing applied twice.
    again = mirror(fixture_dir(name), f"delta:{tmp_path}")
    assert again.commits == 0
    check_final_state(name, tmp_path)


def test_small_rounds_give_the_tables_of_one_round(tmp_path):
    """breadth in rounds of a few pages: ALTERs, a RENAME COLUMN, a TRUNCATE and a DROP land
    in rounds of their own or among others, and every table commits once per round."""
    mirror(fixture_dir("breadth"), f"delta:{tmp_path / 'one'}")
    done = mirror(fixture_dir("breadth"), f"delta:{tmp_path / 'many'}", commit_every=64 << 10)
    assert done.rounds > 10
    check_final_state("breadth", tmp_path / "many")
    assert_same_mirrors(tmp_path / "one", tmp_path / "many")
    dropped = [p.name for p in (tmp_path / "many").iterdir() if DROPPED in p.name]
    assert [d.split(DROPPED)[0] for d in dropped] == ["dba.t_dropme"]


def rows_of(out: Path):
    """Every table's rows by directory, without the metadata of the commit that wrote them."""
    return {
        d: sorted(
            json.dumps({k: str(v) for k, v in r.items()}, sort_keys=True) for r in t.to_pylist()
        )
        for d, t in mirrored(out).items()
    }


def assert_same_mirrors(a: Path, b: Path) -> None:
    got, want = rows_of(b), rows_of(a)
    assert sorted(got) == sorted(want)
    for d in want:
        assert got[d] == want[d], d


@pytest.mark.parametrize("seed", [1, 2])
def test_runs_over_a_growing_log_give_the_tables_of_one_run(seed, tmp_path):
    """Runs that each read up to a later commit (``end=`` through the start of the next run's
    log: the mirror's cursor and each table's position carry it on)."""
    log = walcdc.open_log(fixture_dir("breadth"))
    commits = walcdc.read_changes(log, decode=False).read_all()
    lsas = sorted(set(commits.column("commit_lsa").to_pylist()))
    rng = random.Random(seed)
    cuts = sorted(rng.sample(lsas, rng.randint(1, 4)))
    one = tmp_path / "one"
    mirror(log, f"delta:{one}")
    many = tmp_path / "many"
    for cut in cuts:
        mirror(log, f"delta:{many}", end=cut)
    mirror(log, f"delta:{many}")
    assert_same_mirrors(one, many)


def _run_killed(cmd, out: Path, delay: float) -> bool:
    """Runs ``cmd`` and kills it with SIGKILL ``delay`` seconds after it began to write
    (``out`` exists); whether it finished first."""
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            child.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
            return False
        assert child.returncode == 0, child.stderr.read().decode()
        return True
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stderr.close()


KILLS = tiered(20, 60)


def test_a_mirror_killed_at_random_moments_and_run_again_equals_one_run(tmp_path):
    """breadth in small rounds (a commit per table every few pages: merges, rewrites after
    ALTER, a TRUNCATE, a DROP's move), the run killed with SIGKILL at random moments (each
    run killed goes on from where the one before stopped; a mirror done starts again empty),
    then run to its end: every time, the tables of one run."""
    log_dir = fixture_dir("breadth")
    one = tmp_path / "one"
    mirror(log_dir, f"delta:{one}", commit_every=64 << 10)
    cmd = [sys.executable, "-m", "walcdc.cli", "mirror", str(log_dir), "--commit-every-mb"]
    cmd += ["0.0625", "--no-progress", "--to"]
    rng = random.Random(11)
    kills, attempt = 0, 0
    while kills < KILLS:
        out = tmp_path / f"killed-{attempt}"
        attempt += 1
        while kills < KILLS:
            if _run_killed([*cmd, f"delta:{out}"], out, rng.uniform(0.0, 2.5)):
                break  # done before the kill: compare, then start another
            kills += 1
        assert _run_killed([*cmd, f"delta:{out}"], out, 600)
        assert_same_mirrors(one, out)
        shutil.rmtree(out)


def middle_commit(log) -> int:
    commits = walcdc.read_changes(log, decode=False).read_all().column("commit_lsa")
    return commits[len(commits) // 2].as_py()


def test_a_run_never_takes_a_table_back(tmp_path):
    """The cursor file only says where to start reading: lost, a run reads the log again from
    its beginning and each table's own position keeps what it already holds (a run up to an
    earlier commit changes nothing, nor does a whole run)."""
    log = walcdc.open_log(fixture_dir("breadth"))
    mirror(log, f"delta:{tmp_path}")
    before = rows_of(tmp_path)
    os.remove(tmp_path / CURSOR_FILE)
    assert mirror(log, f"delta:{tmp_path}", end=middle_commit(log)).commits == 0
    assert rows_of(tmp_path) == before
    os.remove(tmp_path / CURSOR_FILE)
    assert mirror(log, f"delta:{tmp_path}").commits == 0
    assert rows_of(tmp_path) == before


def test_another_databases_mirror_is_refused(tmp_path):
    mirror(fixture_dir("breadth"), f"delta:{tmp_path}")
    with pytest.raises(walcdc.MirrorError, match="another database"):
        mirror(fixture_dir("p4k"), f"delta:{tmp_path}")
    with pytest.raises(walcdc.InvalidArgumentError, match="delta:DIRECTORY"):
        mirror(fixture_dir("p4k"), str(tmp_path))


def test_the_command_line(tmp_path):
    r = CliRunner().invoke(main, ["mirror", "--sample", "--to", f"delta:{tmp_path}"])
    assert r.exit_code == 0, r.output
    assert "commits to 12 tables" in r.output
    check_final_state("breadth", tmp_path)
    r = CliRunner().invoke(main, ["mirror", "--sample", "--to", f"delta:{tmp_path}"])
    assert r.exit_code == 0 and "0 commits" in r.output, r.output
    r = CliRunner().invoke(main, ["mirror", "--sample", "--to", "parquet:x"])
    assert r.exit_code == 2 and "--to" in r.output, r.output
