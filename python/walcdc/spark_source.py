"""``format("walcdc")``: Spark data sources over a CUBRID log directory (PySpark's Python Data
Source API), registered by :func:`register`.

Batch reads, the committed change events of :func:`walcdc.read_changes` (same rows, same
columns)::

    import walcdc.spark_source
    walcdc.spark_source.register(spark)
    df = spark.read.format("walcdc").load(LOG_DIR)
    df.where("table = 'dba.orders' and op in ('insert', 'update')")

Each partition is a run of consecutive ranges of the log, each range read once by the range
reader of :mod:`walcdc.spark` (``range_changes``; a run as one span): in the committed stream
the transactions that commit in it, in CUBRID's own the changes and markers that lie in it
(what a transaction begun before the range needs from its earlier records read back along its
chain), with the catalog versions of the plan, which comes from the ``plan`` option
(:func:`walcdc.spark.source_plan`, its catalog read by Spark) or, without it, from each range
reduced to its class-record writes where Spark plans the read (``docs/design.md``, "The walcdc
data source"). Filters on ``table``, ``op`` and ``user`` are pushed into the tasks (decided
before any image is built); the rows that pass are the whole stream's, ``txn_seq`` included.

Streaming reads (Structured Streaming over a followed log)::

    query = (spark.readStream.format("walcdc").option("tables", "dba.orders").load(LOG_DIR)
             .writeStream.format("parquet").option("checkpointLocation", CKPT).start(OUT))

Offsets are walcdc cursors (JSON): where the committed stream stood. For each micro-batch the
driver finds the cursor where the sealed records end now (a walk of what is new: no image is
read), and the micro-batch is the plan of ranges of ``read_changes(cursor=previous offset,
end=that cursor's position)``: its catalog read on the driver from the previous offset's
catalog checkpoint, each range read once by a task with the same range reader as batch reads.
A micro-batch thus holds whole transactions in commit order (those committing between the two
offsets), the same events whatever the log grew meanwhile. With Spark's checkpoint and a
file sink the query is exactly once end to end: a restarted query re-reads a micro-batch from
the offsets it had logged, and the sink commits each micro-batch once. The rows and types are
those of :func:`walcdc.read_changes` (the Spark schema from the one mapping in
:mod:`walcdc.spark`).

Options (both): the read options of :func:`walcdc.read_changes` as strings
(:data:`walcdc.options.READ_OPTIONS`: lists comma-separated, ``true`` / ``false``),
``split_bytes`` (the log in a range) and ``partitions`` (how many partitions read the ranges:
by default four per task slot of the session that made the plan, or per core where the read is
planned; never more than the ranges). Batch only: ``committed_only``, ``start``, ``end``,
``cursor`` (JSON), ``on_encrypted``, ``plan``. The log directory is the path given to ``load``;
every executor must read it at that path. It may be a URL of object storage
(``s3://bucket/log/``); options named ``storage.<key>`` are its ``storage_options``
(``.option("storage.aws_region", "eu-west-1")``; credentials best come from the executors'
environment)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

import pyarrow as pa

from walcdc.errors import InvalidArgumentError
from walcdc.spark.plan import range_plan_here

__all__ = ["WalcdcDataSource", "register"]

#: Read options the plan sets for every range (from the source's own options).
_PLANNED = ("start", "end", "cursor", "committed_only", "on_encrypted")


def _storage_options(options: Dict[str, str]) -> Dict[str, str]:
    """The ``storage.<key>`` options: how to reach object storage."""
    return {k[len("storage.") :]: v for k, v in options.items() if k.startswith("storage.")}


def _bool_option(options: Dict[str, str], name: str, default: bool) -> bool:
    """A boolean option: ``true`` or ``false`` (any case), ``default`` when not given; anything
    else is refused rather than read as one or the other."""
    text = options.get(name)
    if text is None or text == "":
        return default
    if text.lower() not in ("true", "false"):
        raise InvalidArgumentError(f"option {name} must be true or false, not {text!r}")
    return text.lower() == "true"


def _int_option(
    options: Dict[str, str], name: str, default: Optional[int], least: Optional[int] = None
) -> Optional[int]:
    """A whole-number option, ``default`` when not given; anything else (or less than
    ``least``) is refused."""
    text = options.get(name)
    if text is None or text == "":
        return default
    try:
        n = int(text)
    except ValueError:
        n = None
    if n is None or (least is not None and n < least):
        at_least = f" >= {least}" if least is not None else ""
        raise InvalidArgumentError(f"option {name} must be a whole number{at_least}, not {text!r}")
    return n


def _read_options(options: Dict[str, str]) -> Dict[str, Any]:
    """The read options among a source's options (strings), as their declared kinds: what
    every range reads with (those the plan sets are left to it)."""
    from walcdc.options import READ_OPTIONS

    out: Dict[str, Any] = {}
    for name, option in READ_OPTIONS.items():
        text = options.get(name)
        if name in _PLANNED or text is None or text == "":
            continue
        if option.kind == "bool":
            out[name] = _bool_option(options, name, False)
        elif option.kind == "int":
            out[name] = _int_option(options, name, None)
        else:
            out[name] = text
    return out


def _arrow_schema() -> pa.Schema:
    from walcdc import _native

    return pa.schema(_native.changes_schema())


def _spark_arrow(spark_struct) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_struct, timezone="UTC")


try:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
except ImportError:  # pragma: no cover - walcdc[spark] not installed
    DataSource = object  # type: ignore[assignment,misc]
    DataSourceReader = object  # type: ignore[assignment,misc]
    DataSourceStreamReader = object  # type: ignore[assignment,misc]
    InputPartition = object  # type: ignore[assignment,misc]


class _StreamReader(DataSourceStreamReader):  # type: ignore[misc,valid-type]
    def __init__(self, path: str, options: Dict[str, str], schema):
        self.path = path
        self.storage = _storage_options(options)
        self.read_options = _read_options(options)
        self.split = _split_bytes(options)
        self.partition_count = _partitions(options)
        self.schema = schema
        self._last: Dict[str, Any] = self.initialOffset()

    def initialOffset(self) -> Dict[str, Any]:  # noqa: N802 (Spark's API)
        return {"cursor": None}

    def latestOffset(self, start=None, limit=None) -> Dict[str, Any]:  # noqa: N802
        """The cursor where the log's sealed records end now: the committed stream from the
        previous offset with no event asked for but commit markers (a walk: no image is read,
        no row decoded), which leaves the same cursor as the full stream."""
        import walcdc

        start = start if start is not None else self._last
        stream = walcdc.read_changes(
            self.path,
            storage_options=self.storage or None,
            cursor=_cursor(start),
            follow=True,
            idle_timeout=0,  # what is written now, sealed records only
            ops=["commit"],
            mode="id",
            decode=False,
        )
        for _ in stream:
            pass
        cursor = stream.cursor
        if cursor.last_commit_lsa is None:
            return start  # nothing committed yet
        before = _cursor(start)
        if before is not None and before.last_commit_lsa == cursor.last_commit_lsa:
            self._last = start
            return start  # nothing new: the same offset
        self._last = {"cursor": cursor.to_json()}
        return self._last

    def partitions(self, start: Dict[str, Any], end: Dict[str, Any]):
        """The micro-batch from cursor ``start`` to cursor ``end``: the plan of ranges of
        ``read_changes(cursor=start, end=end.position)`` (the transactions committing after
        ``start``'s last commit up to ``end``'s), each range read once by a task."""
        import walcdc

        if end.get("cursor") is None or end == start:
            return []
        log = walcdc.open_log(self.path, storage_options=self.storage or None)
        plan = range_plan_here(
            log, self.split, cursor=_cursor(start), end=_cursor(end).position, whole=False
        )
        return _parts(plan, self.read_options, {}, self.storage, self.partition_count)

    def read(self, partition: _Part) -> Iterator[pa.RecordBatch]:
        yield from _read_range(partition.open(), partition, _spark_arrow(self.schema))

    def commit(self, end: Dict[str, Any]) -> None:
        pass  # nothing to trim: the log is the source of truth


def _partitions(options: Dict[str, str]) -> Optional[int]:
    return _int_option(options, "partitions", None, least=1)


def _split_bytes(options: Dict[str, str]) -> int:
    from walcdc.spark.plan import DEFAULT_SPLIT_BYTES

    split = _int_option(options, "split_bytes", DEFAULT_SPLIT_BYTES, least=1)
    return DEFAULT_SPLIT_BYTES if split is None else split


def _cursor(offset: Dict[str, Any]):
    from walcdc.changes import Cursor

    text = offset.get("cursor")
    return Cursor.from_json(text) if text else None


_PUSHED_COLUMNS = {"table": "tables", "op": "ops", "user": "users"}


class _Part(InputPartition):  # type: ignore[misc,valid-type]
    """Consecutive ranges of the plan (``ranges``: its parts, each ``start`` to ``end``), read
    by one task as spans. It carries what the task needs (Spark pickles the reader before it
    plans the partitions): the plan's common fields, the read options the pushed filters
    narrowed, and the storage options (never in the plan's JSON, which may be shown)."""

    def __init__(
        self,
        ranges: List[Dict[str, Any]],
        plan: Dict[str, Any],
        options: Dict[str, Any],
        narrow: Dict[str, Any],
        storage: Dict[str, str],
    ):
        self.ranges = ranges
        self.plan = {k: v for k, v in plan.items() if k != "parts"}
        self.options = options
        self.narrow = narrow
        self.storage = storage

    def open(self):
        """The plan's volumes, opened where the task runs."""
        from walcdc.logset import LogSet

        return LogSet(self.plan["paths"], self.storage or None)


class _BatchReader(DataSourceReader):  # type: ignore[misc,valid-type]
    def __init__(self, path: str, options: Dict[str, str], schema):
        self.path = path
        self.options = options
        self.storage = _storage_options(options)
        self.read_options = _read_options(options)
        self.committed_only = _bool_option(options, "committed_only", True)
        self.partition_count = _partitions(options)
        self.schema = schema
        #: Values of ``table``, ``op``, ``user`` the query's filters allow (None: any).
        self.pushed: Dict[str, Optional[List[str]]] = {}

    def pushFilters(self, filters):  # noqa: N802 (Spark's API)
        from pyspark.sql.datasource import EqualTo, In

        for f in filters:
            column = f.attribute[0] if len(f.attribute) == 1 else None
            if column in _PUSHED_COLUMNS and _PUSHED_COLUMNS[column] not in self.read_options:
                values = None
                if isinstance(f, EqualTo):
                    values = [f.value]
                elif isinstance(f, In):
                    values = list(f.value)
                if values is not None and all(isinstance(v, str) for v in values):
                    before = self.pushed.get(column)
                    self.pushed[column] = [v for v in values if before is None or v in before]
            # Spark still applies every filter: what was pushed only narrows what is read
            # (a superset of the rows that pass: names resolve to every class that ever bore
            # them, users match without case), decided before any image is built.
            yield f

    def partitions(self):
        import walcdc

        log = walcdc.open_log(self.path, storage_options=self.storage or None)
        plan = _load_plan(self.options) or _local_plan(log, self.options)
        if plan["engine"] == self.committed_only:
            raise InvalidArgumentError(
                "plan: made for the other stream (give the same committed_only to both)"
            )
        if plan["db_creation"] != log.header()["db_creation"]:
            raise InvalidArgumentError(f"plan: made for another database than {self.path}'s")
        narrowed = self._narrowed(log, plan)
        if narrowed is None:
            return []  # the filters select nothing this log holds
        options, narrow = narrowed
        return _parts(plan, options, narrow, self.storage, self.partition_count)

    def _narrowed(self, log, plan: Dict[str, Any]):
        """The read options and the narrowing filters (``walcdc.changes._open_stream``) the
        pushed filters give, or None if no row can pass them. A user filter is a read option:
        it drops whole transactions, so the rows of the others keep their values; table and
        operation filters narrow (the rows that pass keep their place in their
        transaction)."""
        options = dict(self.read_options)
        narrow: Dict[str, Any] = {}
        if self.pushed.get("user") is not None:
            if not self.pushed["user"]:
                return None
            options["users"] = self.pushed["user"]
        if self.pushed.get("op") is not None:
            from walcdc.options import OPS

            narrow["ops"] = [v for v in self.pushed["op"] if v in OPS]
            if not narrow["ops"]:
                return None
        if self.pushed.get("table") is not None:
            from walcdc.options import TableIndex

            index = TableIndex.of(log, since=_seed(plan))
            oids = set()
            for name in self.pushed["table"]:
                try:
                    oids.update(index.resolve([name], "tables"))
                except InvalidArgumentError:
                    pass  # a name the log never gave: no row has it
            if not oids:
                return None
            narrow["tables"] = sorted(oids)
        return options, narrow

    def read(self, partition: _Part) -> Iterator[pa.RecordBatch]:

        if not isinstance(partition, _Part):
            return  # Spark's one empty partition: the filters select nothing
        yield from _read_range(partition.open(), partition, _spark_arrow(self.schema))


def _parts(plan: Dict[str, Any], options, narrow, storage, partitions=None) -> List[_Part]:
    """The plan's ranges as partitions: runs of consecutive ranges, ``partitions`` of them or
    as many as the plan says (``tasks``: four per task slot of the session that made it; a plan
    made where the read is planned, or one without ``tasks``, four per core there)."""
    from walcdc.parallel import default_threads
    from walcdc.spark.plan import grouped, task_count

    tasks = partitions or plan.get("tasks") or task_count(len(plan["parts"]), default_threads())
    return [_Part(run, plan, options, narrow, storage) for run in grouped(plan["parts"], tasks)]


def _read_range(log, partition: _Part, target) -> Iterator[pa.RecordBatch]:
    """A partition's ranges, each read once by the range reader (adjacent ones as one span):
    in the committed stream the transactions that commit in them, in CUBRID's the changes and
    markers that lie in them."""
    import base64

    from walcdc.changes import _native_options
    from walcdc.spark.tasks import span_changes
    from walcdc.spark.types import cast_batch

    plan = partition.plan
    options = dict(partition.options)
    options.update(
        start=plan["start"],
        end=None,
        cursor=None,
        committed_only=not plan["engine"],
        on_encrypted=plan["on_encrypted"],
    )
    narrow = partition.narrow or {}
    native_options = log._native.change_options(
        **_native_options(log, **options),
        narrow_tables=narrow.get("tables"),
        narrow_ops=narrow.get("ops"),
    )
    last_commit, position, offset, first_skipped = plan.get("skip") or (None, None, 0, None)
    versions = base64.b64decode(plan["versions"])
    ranges = [(r["start"], r["end"]) for r in partition.ranges]
    skip = (last_commit, offset, position)
    for batch in span_changes(log, native_options, versions, ranges, skip, first_skipped):
        if batch.num_rows:
            yield cast_batch(batch, target)


def _load_plan(options: Dict[str, str]) -> Optional[Dict[str, Any]]:
    import json

    text = options.get("plan")
    if not text:
        return None
    plan = json.loads(text)
    if plan.get("walcdc_plan") != 2:
        raise InvalidArgumentError("plan: not a plan from walcdc.spark.source_plan")
    return plan


def _local_plan(log, options: Dict[str, str]) -> Dict[str, Any]:
    """A plan made where the read is planned: the window's ranges, the catalog read here
    (each range reduced to its class-record writes, joined)."""
    from walcdc.changes import Cursor

    cursor = Cursor.from_json(options["cursor"]) if options.get("cursor") else None
    return range_plan_here(
        log,
        _split_bytes(options),
        cursor=cursor,
        start=None if cursor is not None else options.get("start"),
        end=options.get("end"),
        committed_only=_bool_option(options, "committed_only", True),
        on_encrypted=options.get("on_encrypted", "raise"),
    )


def _seed(plan: Dict[str, Any]) -> Optional[bytes]:
    """The catalog checkpoint the plan starts from (a cursor's), if any: table names resolve
    from it and the class records after it."""
    import base64

    return base64.b64decode(plan["seed"]) if plan.get("seed") else None


class WalcdcDataSource(DataSource):  # type: ignore[misc,valid-type]
    """``format("walcdc")``: the committed change events of a CUBRID log directory."""

    @classmethod
    def name(cls) -> str:
        return "walcdc"

    def schema(self):
        from walcdc.spark import spark_schema

        return spark_schema(_arrow_schema())

    def reader(self, schema):
        path = self.options.get("path")
        if not path:
            raise ValueError("walcdc: give the log directory to load()")
        return _BatchReader(path, dict(self.options), schema)

    def streamReader(self, schema):  # noqa: N802 (Spark's API)
        path = self.options.get("path")
        if not path:
            raise ValueError("walcdc: give the log directory to load()")
        return _StreamReader(path, dict(self.options), schema)


def register(spark) -> None:
    """Registers ``format("walcdc")`` with a Spark session, and turns on the filter pushdown
    of Python data sources (``spark.sql.python.filterPushdown.enabled``)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(WalcdcDataSource)
