"""The benchmark workload generator (benches/workload.py): what it writes reads back as exactly
the committed changes it recorded — every event of every committed transaction, in commit
order, with its images — and every row decodes with the schemas its DDL wrote."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

import walcdc
from conftest import fixture_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

from workload import Generator, compare_mix, parse_size  # noqa: E402

KEYS = ("lsa", "trid", "commit_lsa", "op", "class_oid", "row_oid", "before_image", "after_image")


def test_the_generated_log_reads_back_as_its_model(tmp_path):
    gen = Generator(
        tmp_path,
        3 << 20,
        seed=7,
        page_size=4096,
        archive_mb=1,
        keep_model=True,
        alter_every=700 << 10,
        huge_every=1 << 20,
        huge_size=3000,
        bulk_share=0.1,  # many small transactions: aborts, savepoints, failed statements
    )
    stats = gen.run(progress=False)
    assert stats["alters"] >= 3 and stats["aborted"] > 0 and stats["volumes"] > 3
    model = [e for txn in gen.workload.committed for e in txn]
    got = walcdc.read_changes(tmp_path, decode=False).read_all().to_pylist()
    assert len(got) == len(model) > 4000
    for g, m in zip(got, model):
        assert {k: g[k] for k in KEYS if k in m} == {k: m[k] for k in KEYS if k in m}
    ops = collections.Counter(e["op"] for e in got)
    assert ops["insert"] and ops["update"] and ops["delete"] and ops["ddl"] > 20  # an ALTER
    # Every row decodes with the schema its table had (20 tables, some altered mid-stream).
    typed = walcdc.read_changes(tmp_path).read_all()
    assert typed.column("decode_error").null_count == typed.num_rows
    schemas = walcdc.open_log(tmp_path).schemas()
    assert len(schemas) == 20 and max(len(s["representations"]) for s in schemas) > 2


def test_sizes_parse():
    assert parse_size("1GB") == 1 << 30
    assert parse_size("512MiB") == 512 << 20
    assert parse_size("1000") == 1000


@pytest.mark.parametrize("name,page_size", [("p4k", 4096), ("p16k", 16384)])
def test_the_record_mix_matches_the_fixtures(tmp_path, name, page_size):
    """The generated log's record types, by share of records and of bytes, are those of the
    fixture written by CUBRID with the same page size (its sessions mostly bulk-insert, as the
    generator's do): within 2.5 points of the records and 6 points of the bytes for every record
    type of either log. docs/scale.md shows the table (types of 0.5 % or more)."""
    Generator(tmp_path, 16 << 20, seed=3, page_size=page_size, archive_mb=4).run(progress=False)
    rows = compare_mix(fixture_dir(name), tmp_path, floor=0.0)
    assert len(rows) >= 15
    for t, rec_f, rec_g, bytes_f, bytes_g, _, _ in rows:
        assert abs(rec_f - rec_g) <= 2.5, (t, rec_f, rec_g)
        assert abs(bytes_f - bytes_g) <= 6.0, (t, bytes_f, bytes_g)
