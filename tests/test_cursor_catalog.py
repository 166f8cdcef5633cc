"""A cursor carries what the log's class records said at or before its restart point (its
catalog checkpoint): the stream resumed from it learns the tables defined before it from there,
gives exactly the events of a stream that learned them from the beginning of the log, and reads
no page before the checkpoint, so a daily job reads only the new archives (the old ones may be
gone)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

import walcdc
import walcdc._native as native
import walcdc.changes
from conftest import assert_same_rows, copy_needed_volumes, fixture_dir
from walcdc import lsa as L

FIXTURES = ["p4k", "p16k", "crash", "tde", "breadth", "v11_2"]
FRACTIONS = [0.25, 0.45, 0.9]


@pytest.fixture
def checkpoint_every_few_pages(monkeypatch):
    """Checkpoints every 3 pages (64 MiB by default: a fixture would only have the first)."""
    monkeypatch.setattr(walcdc.changes, "_CHECKPOINT_EVERY", 3 * 4096)


def without_catalog(c: walcdc.Cursor) -> walcdc.Cursor:
    return dataclasses.replace(c, catalog=None)


def plain(t: pa.Table) -> pa.Table:
    """The rows with the `file` column as plain strings (its dictionary lists the volumes the
    log set has, which differ when old archives are gone)."""
    i = t.column_names.index("file")
    return t.set_column(i, "file", t.column("file").cast(pa.string()))


def checkpoint_at(c: walcdc.Cursor) -> int:
    return native.checkpoint_info(c.catalog)[0]


@pytest.mark.parametrize(
    "name,committed_only",
    # p4k (like p16k, but with its big transaction) is read by the tests below.
    [(n, True) for n in FIXTURES if n != "p4k"] + [(n, False) for n in FIXTURES if n != "p4k"],
)
def test_resuming_from_the_checkpoint_equals_learning_from_the_beginning(
    checkpoint_every_few_pages, name, committed_only
):
    d = fixture_dir(name)
    log = walcdc.open_log(d)
    kw = {"committed_only": committed_only, "on_encrypted": "skip"}
    whole = walcdc.read_changes(log, **kw).read_all()
    lsas = log.records(on_encrypted="skip").read_all().column("lsa").to_pylist()
    used_a_later_checkpoint = False
    for fraction in FRACTIONS:
        cut = lsas[int(len(lsas) * fraction)]
        head = walcdc.read_changes(log, end=cut, **kw)
        first = head.read_all()
        cursor = head.cursor
        assert cursor.catalog is not None
        at = checkpoint_at(cursor)
        assert at <= cursor.restart_lsa
        used_a_later_checkpoint |= at > lsas[0]
        # Saved and loaded, the cursor keeps its checkpoint.
        again = walcdc.Cursor.from_json(cursor.to_json())
        assert again == cursor and again.catalog == cursor.catalog

        fresh = walcdc.open_log(d)  # its own page counter
        fresh._native.watch_below(L.split(at)[0])
        rest = walcdc.read_changes(fresh, cursor=again, **kw).read_all()
        # Nothing before the checkpoint was read to learn the catalog (these cuts need no
        # chase before it).
        assert fresh._native.watched_pages() == []
        learned = walcdc.read_changes(log, cursor=without_catalog(cursor), **kw).read_all()
        assert rest.equals(learned)
        assert_same_rows(pa.concat_tables([first, rest]), whole, f"{name} cut at {fraction}")
    assert used_a_later_checkpoint


def test_a_daily_job_needs_only_the_new_archives(checkpoint_every_few_pages, tmp_path):
    # p4k's second run restarts in its last archive: the two before it can be gone.
    d = fixture_dir("p4k")
    log = walcdc.open_log(d)
    lsas = log.records().read_all().column("lsa").to_pylist()
    head = walcdc.read_changes(log, end=lsas[int(len(lsas) * 0.6)])
    head.read_all()
    cursor = head.cursor
    assert copy_needed_volumes(log, cursor, tmp_path) > 0
    trimmed = walcdc.read_changes(tmp_path, cursor=cursor).read_all()
    want = walcdc.read_changes(log, cursor=cursor).read_all()
    assert trimmed.num_rows > 1000
    assert plain(trimmed).equals(plain(want))
    # Without the checkpoint the catalog before the restart point is unknown there: the same
    # rows could not be decoded (the tables were created in the first archive).
    blind = walcdc.read_changes(tmp_path, cursor=without_catalog(cursor)).read_all()
    assert not plain(blind).equals(plain(want))


def test_table_names_resolve_from_the_checkpoint(checkpoint_every_few_pages, tmp_path):
    d = fixture_dir("p4k")
    log = walcdc.open_log(d)
    counts = walcdc.read_changes(log).read_all().group_by("table").aggregate([("lsa", "count")])
    table = max((r for r in counts.to_pylist() if r["table"]), key=lambda r: r["lsa_count"])[
        "table"
    ]
    lsas = log.records().read_all().column("lsa").to_pylist()
    head = walcdc.read_changes(log, end=lsas[int(len(lsas) * 0.6)])
    head.read_all()
    cursor = head.cursor
    assert copy_needed_volumes(log, cursor, tmp_path) > 0
    got = walcdc.read_changes(tmp_path, cursor=cursor, tables=table).read_all()
    want = walcdc.read_changes(log, cursor=cursor, tables=table).read_all()
    assert got.num_rows > 0
    assert plain(got).equals(plain(want))
    typed = walcdc.read_table_changes(tmp_path, table, cursor=cursor).read_all()
    assert typed.num_rows == want.num_rows
    assert plain(typed).equals(
        plain(walcdc.read_table_changes(log, table, cursor=cursor).read_all())
    )


def test_a_bad_checkpoint_is_a_typed_error():
    d = fixture_dir("breadth")
    log = walcdc.open_log(d)
    head = walcdc.read_changes(log)
    head.read_all()
    c = head.cursor
    broken = dataclasses.replace(c, catalog=c.catalog[:-7])
    with pytest.raises(walcdc.InvalidArgumentError, match="catalog checkpoint"):
        walcdc.read_changes(log, cursor=broken)
    # A checkpoint past the restart point.
    early = walcdc.read_changes(log, end=log.records().read_all().column("lsa")[40].as_py())
    early.read_all()
    late = dataclasses.replace(early.cursor, catalog=c.catalog)
    with pytest.raises(walcdc.InvalidArgumentError, match="past the start"):
        walcdc.read_changes(log, cursor=late)
    with pytest.raises(walcdc.InvalidArgumentError, match="not a walcdc cursor"):
        walcdc.Cursor.from_json(c.to_json().replace('"catalog": "', '"catalog": "!'))
