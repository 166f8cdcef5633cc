"""Shared test fixtures: the real CUBRID log fixtures (decompressed once into a cache
directory, never into the repository) and the engine's own record dumps."""

from __future__ import annotations

import functools
import gc
import gzip
import json
import lzma
import os
import pickle
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from walcdc import lsa as L

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("WALCDC_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "cubrid"

# The tests build millions of Python objects (the engine's outputs, streams as rows): with the
# collector's default (a pass every 700 new objects) collections took a tenth of their time.
gc.set_threshold(200_000, 20, 100)

CACHE = Path(
    os.environ.get("WALCDC_FIXTURE_CACHE", Path(tempfile.gettempdir()) / "walcdc-fixtures")
)

ALL_FIXTURES = ["p4k", "p16k", "crash", "tde", "breadth", "nosupp", "v11_2"]


def _require(path: Path, name: str) -> None:
    if not path.is_dir():
        # In CI the fixtures must be there: a skipped comparison would hide a defect.
        if os.environ.get("CI"):
            pytest.fail(f"fixture {name} not found under {FIXTURES}")
        pytest.skip(f"fixture {name} not found under {FIXTURES}")


def fixture_dir(name: str) -> Path:
    """The fixture's log volumes, decompressed into the cache directory (once)."""
    src = FIXTURES / name / "log"
    _require(src, name)
    out = CACHE / name
    out.mkdir(parents=True, exist_ok=True)
    for xz in sorted(src.glob("*.xz")):
        target = out / xz.name[:-3]
        if target.exists():
            continue
        with lzma.open(xz) as fin, tempfile.NamedTemporaryFile(dir=out, delete=False) as tmp:
            shutil.copyfileobj(fin, tmp, 1 << 20)
        os.replace(tmp.name, target)
    return out


def copy_needed_volumes(log, cursor, dest: Path) -> int:
    """Copies into ``dest`` the volumes a stream resuming at ``cursor`` needs (the active log and
    the archives from ``log.min_archive_needed(cursor)`` on), as a daily job that deleted the
    older archives has them; returns how many volumes were left out."""
    needed = log.min_archive_needed(cursor)
    volumes = log.header()["volumes"]
    kept = [v for v in volumes if v["kind"] != "archive" or v["number"] >= needed]
    for v in kept:
        shutil.copy(v["path"], dest)
    return len(volumes) - len(kept)


def assert_same_rows(got, want, what: str = "rows") -> None:
    """``got`` and ``want`` (Arrow tables) hold the same rows in the same order, value for
    value. Compared in Arrow (chunking does not matter); only where that finds a difference are
    rows compared as Python values (dictionary-encoded columns may encode the same values
    differently), and the first row that differs is named with both versions of it."""
    if got.equals(want):
        return
    assert got.column_names == want.column_names, (what, got.column_names, want.column_names)
    assert got.num_rows == want.num_rows, f"{what}: {got.num_rows} rows, want {want.num_rows}"
    got, want = _decoded(got), _decoded(want)
    if got.equals(want):
        return
    step = 4096
    for at in range(0, got.num_rows, step):
        a, b = got.slice(at, step), want.slice(at, step)
        if a.equals(b):
            continue
        for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist())):
            if x != y:
                diff = {k: (x[k], y[k]) for k in x if x[k] != y[k]}
                raise AssertionError(f"{what}: row {at + i} differs (got, want): {diff}")


def _decoded(table):
    """``table`` with its dictionary-encoded columns as plain columns of their values (two
    streams may number the same values differently)."""
    import pyarrow as pa

    fields = [
        f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def ground_truth(name: str) -> Path:
    """The engine's own output for a fixture (skips, or fails in CI, when it is absent)."""
    path = FIXTURES / name / "ground_truth"
    _require(path, name)
    return path


def shipped_end(name: str) -> int:
    return L.parse((ground_truth(name) / "shipped_end.txt").read_text().strip())


@dataclass(frozen=True)
class DumpRecord:
    lsa: int
    forw_lsa: Optional[int]
    back_lsa: Optional[int]
    trid: int
    prev_tranlsa: Optional[int]
    type: str
    rcvindex: Optional[str]
    detail: str


def _lsa_or_none(text: str) -> Optional[int]:
    p, o = text.split("|")
    if int(p) == -1:
        return None
    return L.make(int(p), int(o))


def _parsed(source: Path, parse):
    """``parse(source)``, kept as a pickle in the cache directory beside the decompressed
    volumes (keyed by the source's size and mtime), so each worker and each run parses the
    engine's large outputs once. Written to a temporary file and renamed: workers may race."""
    st = source.stat()
    key = f"{source.parent.parent.name}-{source.name}-{st.st_size}-{st.st_mtime_ns}.pickle"
    cached = CACHE / "parsed" / key
    try:
        with open(cached, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    value = parse(source)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cached.parent, delete=False) as tmp:
        pickle.dump(value, tmp, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp.name, cached)
    return value


def _read_jsonl_gz(path: Path) -> list:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


@functools.lru_cache(maxsize=2)
def engine_items(name: str) -> list:
    """Every line of the CDC API's output for a fixture (``expected_events.jsonl.gz``), parsed:
    the meta line(s) and the items, in order. Read-only: tests share the one list."""
    return _parsed(ground_truth(name) / "expected_events.jsonl.gz", _read_jsonl_gz)


@functools.lru_cache(maxsize=2)
def read_dump(name: str) -> List[DumpRecord]:
    """The engine's own dump (``cubrid diagdb -d 8``), one entry per record, in log order.
    Read-only: tests share the one list."""
    return _parsed(ground_truth(name) / "diag_log_headers.txt.gz", _read_dump)


def _read_dump(path: Path) -> List[DumpRecord]:
    out = []
    with gzip.open(path, "rb") as f:
        for raw in f:
            if raw.startswith(b"#"):
                continue
            parts = raw.rstrip(b"\n").decode("latin-1").split("\t")
            lsa, forw, back, trid, prev, rtype, rcv = parts[:7]
            detail = parts[7] if len(parts) > 7 else ""
            out.append(
                DumpRecord(
                    L.parse(lsa),
                    _lsa_or_none(forw),
                    _lsa_or_none(back),
                    int(trid),
                    _lsa_or_none(prev),
                    rtype,
                    rcv or None,
                    detail,
                )
            )
    return out


_LEN_PATTERNS = {
    "undo": re.compile(r"Undo ?\(Before\) length = (\d+)"),
    "redo": re.compile(r"Redo ?\(After\) length = (\d+)"),
}


def dump_lengths(rec: DumpRecord) -> Dict[str, int]:
    """Stored payload lengths the dump prints for a record, per payload slot.

    diagdb prints the lengths with the zip bit stripped (bytes in the log); the slot a length
    belongs to depends on the record type."""
    d = rec.detail
    t = rec.type
    out: Dict[str, int] = {}
    if t == "LOG_DBEXTERN_REDO_DATA":
        out["redo"] = int(re.match(r"Length = (\d+)", d).group(1))
    elif t == "LOG_COMPENSATE":
        out["undo"] = int(re.search(r"Compensate length = (\d+)", d).group(1))
    elif t == "LOG_RUN_POSTPONE":
        out["undo"] = int(re.search(r"Run postpone \(Redo/After\) length = (\d+)", d).group(1))
    elif t == "LOG_SAVEPOINT":
        out["undo"] = int(re.search(r"length = (\d+)", d).group(1))
    elif t == "LOG_END_CHKPT":
        out["undo"] = 112 * int(re.search(r"Num_trans = (\d+)", d).group(1))
    elif t == "LOG_SUPPLEMENTAL_INFO":
        m = re.search(r"SUPPLEMENT TYPE = (-?\d+); SUPPLEMENT LENGTH = (-?\d+)", d)
        out["supplement_type"] = int(m.group(1))
        out["supplement_raw_length"] = int(m.group(2))
    else:
        for slot, pat in _LEN_PATTERNS.items():
            m = pat.search(d)
            if m:
                out[slot] = int(m.group(1))
    return out


_DATA_PAGE = re.compile(r"^Volid = (-?\d+) Pageid = (-?\d+) Offset = (-?\d+)")


def dump_data_page(rec: DumpRecord):
    m = _DATA_PAGE.match(rec.detail)
    return tuple(int(x) for x in m.groups()) if m else None


@pytest.fixture(scope="session")
def fixture_path():
    return fixture_dir


# --- tiers ---------------------------------------------------------------------------------
#
# The default run (CI) keeps at least one case of every kind and a seeded sample of the
# exhaustive sweeps; ``pytest -m full`` (before a release) runs every test, each sweep at full
# density. A test or parameter set marked ``full`` runs only there; a sweep asks
# :data:`FULL_TIER` (known before the test modules are imported) for its density.

#: Whether this run is the full tier (``-m full``, or ``WALCDC_TIER=full``).
FULL_TIER = False


def pytest_configure(config):
    global FULL_TIER
    config.addinivalue_line(
        "markers", "full: an exhaustive case, run by `pytest -m full` (the release tier) only"
    )
    FULL_TIER = (config.getoption("markexpr") or "").strip() == "full" or (
        os.environ.get("WALCDC_TIER") == "full"
    )


def tiered(default, full):
    """``default`` in the default run, ``full`` in the full tier."""
    return full if FULL_TIER else default


#: Cases that run in the full tier only, and why the default tier still proves what they do.
#: (Test ids; a test's own ``pytest.mark.full`` works too.)
FULL_ONLY = {
    # test_spark.py: each fixture and each stream keeps a case with ranges far smaller than
    # its transactions; the default split and the other fixture/stream pairs are the same
    # code on more bytes.
    **{
        f"tests/test_spark.py::test_read_records_equals_the_local_walk[None-{n}]": (
            "the 3-page split of the same fixture walks the same records across more edges"
        )
        for n in ("p4k", "p16k", "crash", "nosupp", "v11_2")
    },
    **{
        f"tests/test_spark.py::test_read_changes_equals_the_local_stream[{case}]": (
            "the fixture keeps a small-range case of one stream; each stream is compared on "
            "several fixtures"
        )
        for case in (
            "committed-p4k",
            "engine-small-p4k",
            "committed-p16k",
            "committed-small-p16k",
            "engine-small-p16k",
            "committed-crash",
            "committed-small-crash",
            "engine-small-crash",
            "committed-breadth",
            "committed-v11_2",
            "committed-small-v11_2",
            "engine-small-v11_2",
            "committed-tde",
            "committed-small-tde",
        )
    },
    **{
        f"tests/test_spark.py::test_read_changes_options_equal_the_local_stream[breadth-{o}]": (
            "breadth keeps one option set of each family (markers and ops, images and keys, "
            "a table, a window, CUBRID's stream with a user), with 5-page ranges"
        )
        for o in (
            "ops=delete,abort",
            "mode=id",
            "keys=id,include_trigger=False",
            "decode=False,mode=after",
            "exclude_table",
            "user",
            "committed_only=False,ops=insert,delete,commit,timer",
            "committed_only=False,mode=before,keys=name_now",
            "engine_window",
        )
    },
    **{
        f"tests/test_spark.py::test_read_changes_options_equal_the_local_stream[p4k-{o}]": (
            "breadth runs every option set, with ranges of 5 pages across its transactions"
        )
        for o in (
            "ops=insert,update,delete,ddl,commit,abort",
            "ops=delete,abort",
            "mode=id",
            "mode=before,keys=name_now",
            "keys=id,include_trigger=False",
            "decode=False,mode=after",
            "table",
            "exclude_table",
            "user",
            "window",
            "committed_only=False,ops=insert,delete,commit,timer",
            "committed_only=False,mode=before,keys=name_now",
            "engine_user",
            "engine_window",
        )
    },
    "tests/test_spark.py::test_read_changes_on_a_generated_multi_archive_log[2]": (
        "seed 1 builds the same shapes (archives, spanning transactions)"
    ),
    "tests/test_spark.py::test_read_changes_on_a_generated_multi_archive_log[3]": (
        "seed 1 builds the same shapes (archives, spanning transactions)"
    ),
    **{
        f"tests/test_spark.py::test_two_incremental_runs_give_exactly_one_runs_rows[{c}]": (
            "breadth (committed) and crash (engine) cut and resume each stream; "
            "test_the_next_run_reads_only_the_new_archives resumes inside p4k"
        )
        for c in (
            "p4k-0.3-committed",
            "p4k-0.3-engine",
            "breadth-0.5-engine",
            "crash-0.7-committed",
            "crash-0.7-engine",
        )
    },
    "tests/test_spark.py::test_a_local_cursor_with_a_checkpoint_inside_ddl_resumes_on_spark"
    "[breadth-0.45]": "breadth-0.4 resumes inside a DDL transaction",
    "tests/test_spark.py::test_a_local_cursor_with_a_checkpoint_inside_ddl_resumes_on_spark"
    "[v11_2-0.07]": "breadth-0.4 resumes inside a DDL transaction",
    "tests/test_spark.py::test_read_table_changes_equals_the_local_typed_stream[p4k]": (
        "breadth's tables hold every column type and altered table of the typed path"
    ),
    "tests/test_spark.py::test_read_table_changes_equals_the_local_typed_stream[v11_2]": (
        "breadth's tables hold every column type and altered table of the typed path"
    ),
    "tests/test_spark.py::test_transactions_begun_in_a_deleted_archive_are_left_out_on_spark"
    "[engine]": "the committed case runs the same rule (begun_here) on the same log",
    # test_spark_format.py
    **{
        f"tests/test_spark_format.py::test_the_format_equals_the_local_stream[{n}]": (
            "crash, breadth, v11_2 and tde run the same partitions"
        )
        for n in ("p4k", "p16k")
    },
    "tests/test_spark_format.py::test_a_plan_made_by_spark_reads_each_range_once"
    "[committed-p4k]": "breadth reads both streams through the same plan",
    "tests/test_spark_format.py::test_a_plan_made_by_spark_reads_each_range_once"
    "[engine-p4k]": "breadth reads both streams through the same plan",
    "tests/test_spark_format.py::test_a_plan_made_by_spark_reads_each_range_once"
    "[committed-v11_2]": "breadth reads both streams through the same plan",
    "tests/test_spark_format.py::test_a_plan_made_by_spark_reads_each_range_once"
    "[engine-v11_2]": "breadth reads both streams through the same plan",
    "tests/test_spark_format.py::test_a_cursor_option_reads_the_rest[p4k-0.3]": (
        "crash resumes from a cursor the same way"
    ),
    # p16k is p4k's workload (the same driver, tables and rows) with 16 KiB pages: its pages
    # and records are compared with the engine's dump, its streams with the CDC API, its
    # images with the engine's, its replay with the final tables; the typed and by-table
    # paths read the same rows as p4k's.
    "tests/test_typed_arrow.py::test_every_table_equals_the_json_stream[p16k]": (
        "p4k reads every table of the same workload through the same typed path"
    ),
    "tests/test_by_table.py::test_parts_replay_to_the_final_tables[p16k]": (
        "p4k replays the same workload's parts to the same final tables"
    ),
    # test_cursor_catalog.py
    "tests/test_cursor_catalog.py::test_resuming_from_the_checkpoint_equals_learning_from_the_"
    "beginning[p16k-True]": "crash, breadth, v11_2 and tde resume from checkpoints the same way",
    "tests/test_cursor_catalog.py::test_resuming_from_the_checkpoint_equals_learning_from_the_"
    "beginning[p16k-False]": "crash, breadth, v11_2 and tde resume from checkpoints the same way",
}


#: (every test id, the default tier's test ids) this session collected.
COLLECTED = pytest.StashKey[tuple]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in FULL_ONLY:
            item.add_marker(pytest.mark.full)
    # What this session collected, for tests/test_suite_guard.py: every test, and the default
    # tier's (before -k or -m choose among them).
    config.stash[COLLECTED] = (
        [i.nodeid for i in items],
        [i.nodeid for i in items if i.get_closest_marker("full") is None],
    )
    # Every Spark test runs in one worker, with the one session (pytest-xdist --dist
    # loadgroup), and they come first: that worker starts on them while the others share the
    # rest, instead of one worker starting the longest unit last.
    # Other groups (the standalone cluster's) come next, for the same reason.
    spark = [i for i in items if "spark" in getattr(i, "fixturenames", ())]
    for item in spark:
        item.add_marker(pytest.mark.xdist_group("spark"))
    in_spark = set(map(id, spark))
    grouped = spark + [
        i
        for i in items
        if id(i) not in in_spark and i.get_closest_marker("xdist_group") is not None
    ]
    if grouped:
        chosen = set(map(id, grouped))
        items[:] = grouped + [i for i in items if id(i) not in chosen]
    if FULL_TIER:
        for item in items:  # -m full selects every test
            item.add_marker(pytest.mark.full)
    elif not config.getoption("markexpr"):
        kept = [i for i in items if i.get_closest_marker("full") is None]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in kept])
            items[:] = kept


class _XdistGroups:
    """pytest-xdist's ``--dist loadgroup`` puts a test in its group by appending ``@group`` to
    its node id (``item._nodeid``); pytest 9.2 keeps node ids elsewhere (``item._id``), so the
    suffix is lost and every worker ran Spark tests, each starting a Spark session. Where that
    happened, this adds the suffix the way pytest 9.2 keeps it (after xdist's own hook)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        if not config.getoption("loadgroup", False):
            return
        for item in items:
            mark = item.get_closest_marker("xdist_group")
            if mark is None or "@" in item.nodeid:
                continue
            if not hasattr(item, "_id"):  # pragma: no cover (an xdist that works)
                continue
            from _pytest.nodeid import coerce_node_id

            item._id = coerce_node_id(f"{item.nodeid}@{mark.args[0]}")


def pytest_sessionstart(session):
    session.config.pluginmanager.register(_XdistGroups(), "walcdc-xdist-groups")


# Hypothesis: a fixed, derandomized profile in CI (reproducible runs); the default elsewhere.
try:
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("HYPOTHESIS_PROFILE"):
        _hyp_settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
except ImportError:  # pragma: no cover
    pass


@pytest.fixture(scope="session")
def p4k():
    """The p4k fixture's log set, opened once for the test run."""
    import walcdc

    return walcdc.open_log(fixture_dir("p4k"))


@pytest.fixture(scope="session")
def p4k_table(p4k):
    """Every committed event of p4k, as one Arrow table (the one-pass stream other reads are
    held to)."""
    import walcdc

    return walcdc.read_changes(p4k).read_all()


@pytest.fixture(scope="session")
def p4k_all(p4k_table):
    """The same events as rows."""
    return p4k_table.to_pylist()


@pytest.fixture(scope="session")
def spark():
    """One local[2] Spark session for the whole run (PySpark 4 and Java 17+); its Python
    workers use this interpreter. Skips where PySpark is not installed (fails under CI)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        if os.environ.get("CI") or os.environ.get("HYPOTHESIS_PROFILE") == "ci":
            pytest.fail("PySpark is not installed (pip install '.[test]')")
        pytest.skip("PySpark is not installed")
    from spark_cluster import QUICK_JVM

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("walcdc-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        # A test session runs hundreds of small jobs and lives minutes: the JVM's quick
        # compiler alone, one GC thread and no whole-stage code generation spend about 40%
        # less CPU than the defaults (made for long jobs on large data) for the same results.
        .config("spark.driver.extraJavaOptions", QUICK_JVM)
        .config("spark.sql.codegen.wholeStage", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a skipped test is a failure: a comparison that did not run proves nothing."""
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("CI") and rep.skipped and not hasattr(rep, "wasxfail"):
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI (a comparison that did not run): {rep.longrepr}"
