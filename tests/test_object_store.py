"""Log volumes read straight from object storage: every fixture uploaded to an S3 API server on
127.0.0.1 (moto's, started here) and read through every API and the CLI, equal to the same
reads from local files, row for row and column for column; what is fetched (once, never a
whole volume that is not needed); and errors as for local files, without credentials."""

from __future__ import annotations

import json
import logging
import warnings

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner
from s3server import SECRET_KEY, FaultProxy, S3Server

import walcdc
from conftest import ALL_FIXTURES, assert_same_rows, fixture_dir
from walcdc.cli import main

pytestmark = pytest.mark.xdist_group("s3")


@pytest.fixture(scope="module")
def s3():
    server = S3Server()
    try:
        yield server
    finally:
        server.stop()


def _outcome(read):
    """What ``read()`` gives: its table, or the class of the error it raised (warnings off:
    both reads warn alike, and the local read is the judge)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return read()
        except walcdc.LogError as exc:
            return type(exc)


def _same(read, remote, local, what):
    """``read(remote)`` gives what ``read(local)`` gives: the same rows, or the same error."""
    got, want = _outcome(lambda: read(remote)), _outcome(lambda: read(local))
    if isinstance(want, type):
        assert got is want, f"{what}: {got!r}, want {want.__name__}"
    else:
        assert isinstance(got, pa.Table), f"{what}: raised {got.__name__}"
        assert_same_rows(got, want, what)


def _uploaded(s3, name):
    return s3.put_dir(fixture_dir(name), name)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_read_equals_the_local_read(s3, name):
    local = walcdc.open_log(fixture_dir(name))
    remote = walcdc.open_log(_uploaded(s3, name), storage_options=s3.options())
    assert [v["file"] for v in remote.header()["volumes"]] == [
        v["file"] for v in local.header()["volumes"]
    ]
    policy = "skip" if name == "tde" else "raise"

    def records(log):
        return log.records(on_encrypted=policy, payloads=True).read_all()

    def changes(committed):
        return lambda log: walcdc.read_changes(
            log, committed_only=committed, on_encrypted=policy
        ).read_all()

    def table_changes(table):
        return lambda log: walcdc.read_table_changes(log, table, on_encrypted=policy).read_all()

    _same(records, remote, local, f"{name} records")
    for committed in (True, False):
        _same(changes(committed), remote, local, f"{name} changes committed_only={committed}")
    tables = []
    if name != "nosupp":
        events = _outcome(
            lambda: walcdc.read_changes(local, on_encrypted=policy, decode=False).read_all()
        )
        tables = sorted({t for t in events.column("table").to_pylist() if t and "." in t})
    for table in tables:
        _same(table_changes(table), remote, local, f"{name} table {table}")
    # A URL given straight to a reader, with its storage options, reads as the opened set.
    url = _uploaded(s3, name)
    _same(
        lambda log: walcdc.read_changes(
            log, on_encrypted=policy, **({"storage_options": s3.options()} if log == url else {})
        ).read_all(),
        url,
        local,
        f"{name} changes from the URL",
    )


def _by_table(out):
    return {
        d.name: ds.dataset(d, format="parquet").to_table().sort_by("lsa")
        for d in sorted(out.iterdir())
        if d.is_dir()
    }


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_the_cli_reads_a_url_as_the_files(s3, name, tmp_path):
    """``extract --by-table``, ``inspect --stats`` and ``schema --json`` of a URL: the same
    datasets and output as of the files (or the same failure)."""
    url = _uploaded(s3, name)
    opts = [
        f"--storage-option={k}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in s3.options().items()
    ]
    runner = CliRunner()

    def both(command, *args, out=None):
        results = []
        for source, extra in ((url, opts), (str(fixture_dir(name)), [])):
            where = ["-o", str(tmp_path / out / ("s3" if extra else "fs"))] if out else []
            results.append(runner.invoke(main, [command, source, *args, *where, *extra]))
        assert results[0].exit_code == results[1].exit_code, [r.output for r in results]
        return results

    got, want = both("extract", "--by-table", "--on-encrypted", "skip", out="by-table")
    if want.exit_code == 0:
        got, want = _by_table(tmp_path / "by-table" / "s3"), _by_table(tmp_path / "by-table" / "fs")
        assert got.keys() == want.keys() and got
        for table in want:
            assert_same_rows(got[table], want[table], table)
    else:
        assert name == "nosupp" and "supplemental" in got.output
    got, want = both("inspect", "--stats", "--on-encrypted", "skip")
    assert want.exit_code == 0, want.output
    # Everything but the volume lines (which name the URLs) is the same.
    assert got.output.split("records:")[1] == want.output.split("records:")[1]
    got, want = both("schema", "--json")
    assert got.output == want.output


def test_the_mirror_of_a_url_is_the_mirror_of_the_files(s3, tmp_path):
    """``walcdc mirror URL --to delta:DIR --storage-option ...``: the same tables, row for row
    (read with deltalake and with test_mirror's reader of the Delta log), as from the files."""
    from test_mirror import read_delta

    url = _uploaded(s3, "breadth")
    opts = [
        f"--storage-option={k}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in s3.options().items()
    ]
    runner = CliRunner()
    r = runner.invoke(main, ["mirror", url, "--to", f"delta:{tmp_path / 's3'}", *opts])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        main, ["mirror", str(fixture_dir("breadth")), "--to", f"delta:{tmp_path / 'fs'}"]
    )
    assert r.exit_code == 0, r.output
    tables = sorted(p.name for p in (tmp_path / "fs").iterdir() if p.is_dir())
    assert tables and tables == sorted(p.name for p in (tmp_path / "s3").iterdir() if p.is_dir())
    for name in tables:
        got, want = read_delta(tmp_path / "s3" / name), read_delta(tmp_path / "fs" / name)
        key = [(c, "ascending") for c in want.column_names if c.startswith("_walcdc")] or None
        assert_same_rows(got.sort_by(key) if key else got, want.sort_by(key) if key else want, name)


def test_a_forward_read_fetches_the_log_once(s3):
    log = walcdc.open_log(_uploaded(s3, "p4k"), storage_options=s3.options())
    size = sum(f.stat().st_size for f in fixture_dir("p4k").iterdir())
    opened = log.fetched()
    assert opened["bytes"] <= 4 * 32 * 1024  # the header pages only
    log.records().read_all()
    walcdc.read_changes(log).read_all()  # chases read what the walk fetched already
    assert log.fetched()["bytes"] <= 1.1 * size, (log.fetched(), size)
    # A second log set of the same volumes starts with nothing cached.
    again = walcdc.open_log(_uploaded(s3, "p4k"), storage_options=s3.options())
    walcdc.read_changes(again, committed_only=False).read_all()
    assert again.fetched()["bytes"] <= 1.1 * size


def test_a_range_fetches_its_own_blocks(s3):
    """A range in the middle of the log (as a Spark task reads it) fetches its own bytes, and
    the 2 MiB blocks at its edges, not the volumes around it."""
    local = walcdc.open_log(fixture_dir("p4k"))
    ranges = local.ranges(split_bytes=8 << 20)
    start, end = ranges[len(ranges) // 2]
    log = walcdc.open_log(_uploaded(s3, "p4k"), storage_options=s3.options())
    before = log.fetched()["bytes"]

    def read(log):
        batches = log._native.records(start=start, end=end, range=True)
        return pa.Table.from_batches([pa.record_batch(b) for b in batches])

    got, want = read(log), read(local)
    assert_same_rows(got, want, "range")
    span = ((end >> 16) - (start >> 16) + 1) * 4096
    assert log.fetched()["bytes"] - before <= span + 2 * (2 << 20), (log.fetched(), span)


def test_a_missing_middle_archive_is_named(s3):
    url = s3.put_dir(fixture_dir("p4k"), "p4k-gap", skip={"p4k_lgar001"})
    with pytest.raises(walcdc.MissingArchiveError) as exc:
        walcdc.open_log(url, storage_options=s3.options())
    assert "1..1" in str(exc.value) or "001" in str(exc.value)


def test_an_object_deleted_after_listing_is_a_missing_archive(s3):
    url = s3.put_dir(fixture_dir("p4k"), "p4k-deleted")
    log = walcdc.open_log(url, storage_options=s3.options())
    s3.client.delete_object(Bucket="logs", Key="p4k-deleted/p4k_lgar001")
    with pytest.raises(walcdc.MissingArchiveError) as exc:
        log.records().read_all()
    assert exc.value.file == url + "p4k_lgar001"
    assert exc.value.lsa is not None and "log page" in str(exc.value)


def test_an_object_shortened_after_listing_is_truncated(s3):
    url = s3.put_dir(fixture_dir("p4k"), "p4k-shortened")
    log = walcdc.open_log(url, storage_options=s3.options())
    data = (fixture_dir("p4k") / "p4k_lgar002").read_bytes()
    s3.client.put_object(Bucket="logs", Key="p4k-shortened/p4k_lgar002", Body=data[: 3 << 20])
    with pytest.raises(walcdc.TruncatedLogError) as exc:
        log.records().read_all()
    assert exc.value.file == url + "p4k_lgar002" and exc.value.lsa is not None


def test_a_truncated_object_is_refused_at_open_as_a_truncated_file(s3, tmp_path):
    data = (
        fixture_dir("v11_2") / sorted(p.name for p in fixture_dir("v11_2").iterdir())[0]
    ).read_bytes()
    s3.client.put_object(Bucket="logs", Key="short/v_lgar000", Body=data[:20000])
    (tmp_path / "v_lgar000").write_bytes(data[:20000])
    with pytest.raises(walcdc.LogError) as remote:
        walcdc.open_log("s3://logs/short/v_lgar000", storage_options=s3.options())
    with pytest.raises(walcdc.LogError) as local:
        walcdc.open_log(tmp_path / "v_lgar000")
    assert type(remote.value) is type(local.value)


def test_failed_requests_are_retried_and_give_the_same_rows(s3):
    url = _uploaded(s3, "breadth")
    want = walcdc.read_changes(fixture_dir("breadth")).read_all()
    proxy = FaultProxy(s3.port, fail_every=3)
    try:
        log = walcdc.open_log(url, storage_options=s3.options(proxy.endpoint))
        assert_same_rows(walcdc.read_changes(log).read_all(), want, "retried")
        assert proxy.stats()["failed"] > 0
    finally:
        proxy.stop()
    # A store that stops answering once a read is under way: an error naming the volume and
    # the LSA (after the retries, here none), never a shorter result.
    url = _uploaded(s3, "p4k")  # every block of it is read
    proxy = FaultProxy(s3.port, fail_from=8)
    try:
        log = walcdc.open_log(url, storage_options=s3.options(proxy.endpoint, max_retries=0))
        with pytest.raises(walcdc.LogIOError) as exc:
            walcdc.read_changes(log).read_all()
        assert exc.value.file.startswith(url) and exc.value.lsa is not None
        assert "503" in str(exc.value)
    finally:
        proxy.stop()


def test_credentials_never_appear(s3, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    messages = []
    proxy = FaultProxy(s3.port, fail_from=1, status=403)
    try:
        for url, options in [
            ("s3://no-such-bucket/x/", s3.options()),
            (_uploaded(s3, "breadth"), s3.options(proxy.endpoint, max_retries=0)),
            ("s3://logs/breadth/", {**s3.options(), "aws_no_such_option": SECRET_KEY}),
        ]:
            with pytest.raises(walcdc.LogError) as exc:
                walcdc.read_changes(walcdc.open_log(url, storage_options=options)).read_all()
            messages += [str(exc.value), repr(exc.value.args)]
        r = CliRunner().invoke(
            main,
            [
                "inspect",
                "s3://no-such-bucket/x/",
                f"--storage-option=aws_secret_access_key={SECRET_KEY}",
                f"--storage-option=aws_endpoint={s3.endpoint}",
                "--storage-option=aws_allow_http=true",
            ],
        )
        assert r.exit_code != 0
        messages.append(r.output)
    finally:
        proxy.stop()
    out, err = capfd.readouterr()
    for text in messages + [caplog.text, out, err]:
        assert SECRET_KEY not in text, text


def test_volume_urls_over_plain_http(s3):
    """Explicit volume URLs over HTTP (the S3 server answers plain ranged GETs too)."""
    _uploaded(s3, "breadth")
    names = sorted(p.name for p in fixture_dir("breadth").iterdir())
    urls = [f"{s3.endpoint}/logs/breadth/{n}" for n in names]
    log = walcdc.open_log(urls, storage_options={"allow_http": True})
    local = walcdc.open_log(fixture_dir("breadth"))
    assert_same_rows(log.records().read_all(), local.records().read_all(), "http")
    assert_same_rows(
        walcdc.read_changes(log).read_all(), walcdc.read_changes(local).read_all(), "http"
    )


def test_volumes_over_https():
    """The TLS path: the same S3 server over HTTPS (its own certificate, not verified)."""
    import urllib3

    urllib3.disable_warnings()
    server = S3Server(tls=True)
    try:
        url = server.put_dir(fixture_dir("breadth"), "breadth")
        log = walcdc.open_log(url, storage_options=server.options())
        local = walcdc.open_log(fixture_dir("breadth"))
        assert_same_rows(
            walcdc.read_changes(log).read_all(), walcdc.read_changes(local).read_all(), "https"
        )
        # Verified, the certificate is refused: an error, not a read.
        options = {k: v for k, v in server.options().items() if k != "allow_invalid_certificates"}
        with pytest.raises(walcdc.LogIOError, match="(?i)certificate"):
            walcdc.open_log(url, storage_options={**options, "max_retries": 0})
    finally:
        server.stop()


def test_a_file_url_is_a_local_path():
    local = walcdc.open_log(fixture_dir("breadth"))
    log = walcdc.open_log(fixture_dir("breadth").resolve().as_uri())
    assert log.fetched() == {"requests": 0, "bytes": 0}
    assert_same_rows(log.records().read_all(), local.records().read_all(), "file://")


def test_a_store_slower_than_the_timeout_is_an_error(s3):
    """Every request waits 2 s at the proxy, the client waits 0.5 s, with no retry: an error
    naming the volume, not a hang and not a short result."""
    url = _uploaded(s3, "breadth")
    proxy = FaultProxy(s3.port, delay=2.0)
    try:
        with pytest.raises(walcdc.LogIOError) as exc:
            options = s3.options(proxy.endpoint, max_retries=0, timeout="500ms")
            walcdc.read_changes(walcdc.open_log(url, storage_options=options)).read_all()
        assert exc.value.file.startswith(url.rstrip("/"))
    finally:
        proxy.stop()


def test_blocks_are_kept_in_the_cache_dir_given(s3, tmp_path):
    url = _uploaded(s3, "breadth")
    log = walcdc.open_log(url, storage_options={**s3.options(), "cache_dir": str(tmp_path)})
    want = walcdc.open_log(fixture_dir("breadth")).records().read_all()
    assert_same_rows(log.records().read_all(), want, "cache_dir")
    with pytest.raises(walcdc.LogIOError, match="cache_dir"):
        walcdc.open_log(url, storage_options={**s3.options(), "cache_dir": str(tmp_path / "no")})


def test_urls_are_refused_clearly(s3):
    with pytest.raises(walcdc.LogIOError, match="no CUBRID log volumes"):
        walcdc.open_log("s3://logs/nothing-here/", storage_options=s3.options())
    with pytest.raises(walcdc.InvalidArgumentError, match="storage_options"):
        walcdc.read_changes(walcdc.open_log(fixture_dir("breadth")), storage_options={"a": "b"})
    with pytest.raises(walcdc.InvalidArgumentError, match="max_retries"):
        walcdc.open_log(
            "s3://logs/breadth/", storage_options={**s3.options(), "max_retries": "many"}
        )


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_spark_reads_from_s3_equal_the_local_stream(spark, s3, name):
    """``walcdc.spark.read_changes`` and ``format("walcdc")`` over a URL (each task opens the
    store and fetches its own range): the local stream's rows, every column; ranges far smaller
    than the largest transactions, so that tasks chase into blocks of other ranges."""
    from test_spark import ORDER, local_as_spark, small_split
    from test_spark_format import load

    from walcdc.spark import read_changes

    local = walcdc.open_log(fixture_dir(name))
    url = _uploaded(s3, name)
    split = small_split(local) * 4
    if name == "nosupp":
        with pytest.raises(walcdc.NoSupplementalLogError):
            read_changes(spark, url, storage_options=s3.options(), split_bytes=split)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = walcdc.read_changes(local, on_encrypted="skip").read_all()
        frames = {
            "read_changes": read_changes(
                spark, url, storage_options=s3.options(), on_encrypted="skip", split_bytes=split
            ),
            "format": load(
                spark,
                url,
                split_bytes=split,
                on_encrypted="skip",
                **{
                    f"storage.{k}": str(v).lower() if isinstance(v, bool) else v
                    for k, v in s3.options().items()
                },
            ),
        }
    for what, df in frames.items():
        expected, got = local_as_spark(want, df)
        assert got.num_rows == expected.num_rows, what
        assert got.sort_by(ORDER).equals(expected.sort_by(ORDER)), what


def test_a_spark_task_fetches_its_range_and_the_blocks_its_reads_back_need(spark, s3):
    """What one task of ``format("walcdc")`` runs (``_read_range`` over the volumes its
    partition opens), over each range in the middle of the log: it fetches the blocks of its
    range and of the pages before it that it reads back (found by the same task over local
    files, which records every page it reads below its range), and no other: never the log
    around it. Its rows are the local task's."""
    from walcdc.spark import source_plan, spark_schema
    from walcdc.spark_source import _arrow_schema, _Part, _read_range, _spark_arrow

    block = 2 << 20
    url = _uploaded(s3, "p4k")
    plan = json.loads(source_plan(spark, url, storage_options=s3.options(), split_bytes=8 << 20))
    target = _spark_arrow(spark_schema(_arrow_schema()))
    assert len(plan["parts"]) >= 8
    local = walcdc.open_log(fixture_dir("p4k"))
    archives = local.header()["archives"]

    def archive_block(page):
        a = next(a for a in archives if a["first_pageid"] <= page <= a["last_pageid"])
        return a["number"], (page - a["first_pageid"] + 1) * 4096 // block

    for spec in plan["parts"][2:-2]:
        part = _Part([spec], plan, {}, {}, s3.options())
        first, last = spec["start"] >> 16, spec["end"] >> 16
        local._native.watch_below(first)
        want = pa.Table.from_batches(list(_read_range(local, part, target)), target)
        read_back = local._native.watched_pages()
        remote = part.open()
        got = pa.Table.from_batches(list(_read_range(remote, part, target)), target)
        assert_same_rows(got, want, f"range {spec}")
        # A page's block: its archive, and its offset there over 2 MiB (the middle ranges
        # and what they read back lie in archives). One block of slack: the header pages
        # every opening reads.
        blocks = {archive_block(p) for p in set(read_back) | set(range(first, last + 1))}
        fetched = remote.fetched()["bytes"]
        assert fetched <= (len(blocks) + 1) * block, (spec, fetched, len(blocks), len(read_back))
