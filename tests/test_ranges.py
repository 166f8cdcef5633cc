"""Record-aligned ranges (``LogSet.ranges``), the unit of parallel reading: found from page
headers alone, they partition the records of every fixture exactly, at every size, across
archives, the ring, records that span pages and a crashed log's end."""

from __future__ import annotations

import pyarrow as pa
import pytest

import walcdc
from conftest import fixture_dir

FIXTURES = ["p4k", "p16k", "crash", "breadth", "v11_2"]


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("pages", [1, 37, 1024])
def test_ranges_partition_every_record(name, pages):
    log = walcdc.open_log(fixture_dir(name))
    page_size = log.header()["page_size"]
    whole = log.records().read_all().column("lsa")
    ranges = log.ranges(split_bytes=pages * page_size)
    assert ranges[0][0] is None and ranges[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    parts = [log.records(start=s, end=e).read_all().column("lsa") for s, e in ranges]
    assert all(len(p) for p in parts)
    assert pa.chunked_array([c for p in parts for c in p.chunks], pa.uint64()).equals(whole)
    pages_in_log = walcdc.lsa.split(whole[-1].as_py())[0] - walcdc.lsa.split(whole[0].as_py())[0]
    assert len(ranges) >= min(pages_in_log // pages, 5)


def test_ranges_read_page_headers_only():
    """Splitting reads one page header per cut (a few more where a record spans the cut
    page), never the log in between."""
    log = walcdc.open_log(fixture_dir("p4k"))
    ranges = log.ranges(split_bytes=64 * 4096)
    log._native.watch_below(1 << 40)  # count every page fetched from here on
    log.ranges(split_bytes=64 * 4096)
    fetched = log._native.watched_pages()
    assert len(fetched) <= 2 * len(ranges)


def test_split_size_must_be_positive():
    log = walcdc.open_log(fixture_dir("breadth"))
    with pytest.raises(walcdc.InvalidArgumentError, match="split_bytes"):
        log.ranges(split_bytes=0)
