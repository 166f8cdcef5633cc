"""Change events in Debezium's envelope (``read_changes(..., envelope="debezium")``,
``walcdc extract --envelope debezium``), the change events Debezium documents for its
connectors (https://debezium.io/documentation/reference/stable/connectors/postgresql.html,
"Data change events"). Only the committed stream has them.

Each row is the value of a Debezium change event, with the record's key beside it::

    before, after       the row before / after the change (JSON text; JSON objects in JSON
                        Lines), values as in the plain stream (CUBRID's CDC text forms)
    source              version, connector ("walcdc"), name (the database), ts_ms / ts_us /
                        ts_ns (the commit time), snapshot ("false"), db, sequence, schema (the
                        owner, "dba"), table (the table name alone), trid, lsa, commit_lsa,
                        file, user
    op                  "c" insert, "u" update, "d" delete, "t" TRUNCATE
    ts_ms, ts_us, ts_ns when walcdc emitted the event (processing time, as Debezium's): the
                        lag behind the commit is ts_ms - source.ts_ms
    transaction         id ("<trid>:<commit lsa>"), total_order (the event's 1-based position
                        among its transaction's events in this envelope), data_collection_order
                        (its position among the transaction's events of the same table)
    key                 the record key: the primary-key columns of the row (JSON text), null
                        without a primary key

``envelope_options`` (all off by default) add Debezium's optional records, in the same stream:

    tombstones=True     (Debezium's ``tombstones.on.delete``) after each delete, a tombstone:
                        the delete's ``key`` with a null value, that is every other field null
                        (``op`` null): Kafka's log compaction then drops the key's records
    transactions=True   (``provide.transaction.metadata``) a BEGIN record before a
                        transaction's first event and an END record after its last one, in
                        four more fields: ``status`` ("BEGIN" / "END"), ``id`` (as
                        ``transaction.id``), ``event_count`` and ``data_collections`` (END only:
                        the transaction's events, and per table ``{data_collection:
                        "owner.table", event_count}``); their ``ts_ms`` is the commit time (a
                        transaction's begin time is not in the log; Debezium's PostgreSQL
                        connector too gives the commit time); ``key`` is ``{"id": ...}`` and the
                        change-event fields are null. Change events have these four null.
    schemas=True        (Kafka Connect's ``JsonConverter`` with ``schemas.enable=true``) each
                        record as three JSON columns: ``schema`` and ``payload`` (the record's
                        value, as JsonConverter writes it) and ``key`` (``{schema, payload}``
                        too), values typed as Debezium types them (:mod:`walcdc.connect`):
                        NUMERIC as ``org.apache.kafka.connect.data.Decimal``, DATE as days,
                        TIMESTAMP as ``io.debezium.time.ZonedTimestamp``, ... A tombstone has
                        ``schema`` and ``payload`` null. Python per row: slower.
    decimal_handling    with ``schemas``: NUMERIC and MONETARY as ``"precise"`` (Decimal, the
                        default), ``"string"`` or ``"double"`` (Debezium's
                        ``decimal.handling.mode``)

A row is thus a change event (``op`` set), a transaction record (``status`` set) or a
tombstone (neither). An END comes when the next transaction's first event or the end of the
stream (or of a followed log's poll) shows that the transaction is over; a stream resumed from
a cursor taken right before it gives it then (at least once, like the events).

CUBRID's commit record holds whole seconds, so ``source.ts_ms`` is a multiple of 1000 (and
``ts_us`` / ``ts_ns`` of 10^6 / 10^9). LSAs are ``pageid|offset`` text; ``sequence`` is the JSON
text ``["<commit lsa>","<lsa>"]`` of the order-preserving u64 LSAs: it sorts events in the
order they are emitted. Schema changes other than TRUNCATE are not change events in Debezium's
model: the envelope leaves them out (read them from the plain stream, e.g. ``ops=["ddl"]``); the
transaction's counts leave them out too. Built from whole Arrow columns, except for the running
counts of ``transaction``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from walcdc.arrow_stream import ArrowStream
from walcdc.ddl import DdlType

__all__ = [
    "Debezium",
    "EnvelopedStream",
    "OPTIONS",
    "envelope_options",
    "lsa_text",
    "record_fields",
    "summary_columns",
]

#: The options of the Debezium envelope (``read_changes(envelope_options=...)``) and their
#: defaults: Debezium's optional records off, as in Debezium; the plain JSON form.
OPTIONS: Dict[str, Any] = {
    "tombstones": False,
    "transactions": False,
    "schemas": False,
    "decimal_handling": "precise",
}

_JSON = {b"walcdc.json": b"true"}

#: Debezium's op letters, by walcdc op (DDL only for TRUNCATE).
_OPS = ("insert", "update", "delete", "ddl")
_LETTERS = pa.array(["c", "u", "d", "t"])
#: The columns of the plain stream the envelope reads (and the row images' first words).
_READ = ("lsa", "commit_lsa", "commit_time", "time", "trid", "op", "ddl_type", "table")
_READ += ("class_oid", "partition_oid", "before", "after", "key", "file", "user")

SOURCE = pa.struct(
    [
        ("version", pa.string()),
        ("connector", pa.string()),
        ("name", pa.string()),
        ("ts_ms", pa.int64()),
        ("ts_us", pa.int64()),
        ("ts_ns", pa.int64()),
        ("snapshot", pa.string()),
        ("db", pa.string()),
        ("sequence", pa.string()),
        ("schema", pa.string()),
        ("table", pa.string()),
        ("trid", pa.int32()),
        ("lsa", pa.string()),
        ("commit_lsa", pa.string()),
        ("file", pa.string()),
        ("user", pa.string()),
    ]
)

TRANSACTION = pa.struct(
    [("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())]
)
DATA_COLLECTIONS = pa.list_(
    pa.struct([("data_collection", pa.string()), ("event_count", pa.int64())])
)


def lsa_text(column: pa.Array) -> pa.Array:
    """``pageid|offset`` text of an LSA column (order-preserving u64); nulls stay null."""
    page = pc.cast(pc.shift_right(column, 16), pa.string())
    offset = pc.cast(pc.bit_wise_and(column, 0xFFFF), pa.string())
    return pc.binary_join_element_wise(page, offset, "|")


def envelope_options(value: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``value`` checked against :data:`OPTIONS`, with the defaults filled in."""
    from walcdc.connect import DECIMAL_HANDLING
    from walcdc.errors import argument_error
    from walcdc.options import choice

    if value is None:
        return dict(OPTIONS)
    if not isinstance(value, Mapping):
        raise argument_error("envelope_options", f"{{}} must be a dict, not {value!r}")
    unknown = sorted(set(value) - set(OPTIONS))
    if unknown:
        raise argument_error(
            "envelope_options", f"{{}}: unknown option(s) {unknown}; choose from {list(OPTIONS)}"
        )
    out = {k: bool(value.get(k, default)) for k, default in OPTIONS.items()}
    out["decimal_handling"] = choice(
        "envelope_options", value.get("decimal_handling", "precise"), DECIMAL_HANDLING
    )
    return out


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _repid(head: Optional[bytes]) -> Optional[int]:
    """The representation id in a heap record's first word."""
    return int.from_bytes(head, "big") & 0x00FF_FFFF if head and len(head) == 4 else None


def record_fields(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``source``, ``op`` and ``status`` of an envelope's records, of either form (the
    ``schemas`` form's read from its payloads)."""
    if "payload" not in batch.schema.names:
        names = [n for n in ("source", "op", "status") if n in batch.schema.names]
        return batch.select(names)
    payloads = [json.loads(p) if p else {} for p in batch.column("payload").to_pylist()]
    return pa.record_batch(
        [
            pa.array([p.get("source") for p in payloads], SOURCE),
            pa.array([p.get("op") for p in payloads], pa.string()),
            pa.array([p.get("status") for p in payloads], pa.string()),
        ],
        names=["source", "op", "status"],
    )


def summary_columns(batch: pa.RecordBatch) -> Tuple[pa.Array, pa.Array]:
    """(table, op) of each row of an envelope's batch, for a per-table, per-op summary: the
    table as ``owner.table``, tombstones as op ``tombstone``, transaction records by status."""
    batch = record_fields(batch)
    source = batch.column("source")
    name = pc.struct_field(source, "table")
    table = pc.coalesce(
        pc.binary_join_element_wise(pc.struct_field(source, "schema"), name, "."), name
    )
    op = batch.column("op")
    if "status" in batch.schema.names:
        op = pc.coalesce(op, batch.column("status"))
    return table, pc.fill_null(op, "tombstone")


def _repeat(value, type_: pa.DataType, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type_), n)


class Debezium:
    """Turns batches of the plain committed stream into Debezium-shaped batches. Keeps the
    running counts of the transaction being emitted (a transaction's events are contiguous in
    the committed stream, and may span batches)."""

    def __init__(
        self,
        database: Optional[str],
        options: Optional[Mapping[str, Any]] = None,
        columns=None,
    ):
        """``columns``: a :class:`walcdc.connect.TableColumns` that types the columns of the
        ``schemas`` form."""
        from walcdc import __version__

        self.database = database
        self.version = __version__
        self.options = envelope_options(options)
        self._connect = None
        if self.options["schemas"]:
            from walcdc.connect import ConnectForm

            self._connect = ConnectForm(database, columns, self.options["decimal_handling"])
        self._txn: Optional[str] = None
        self._txn_ms: Optional[int] = None  # the open transaction's commit time
        self._total = 0
        self._per_table: Dict[Optional[str], int] = {}

    def schema(self, _plain: pa.Schema = None) -> pa.Schema:
        if self._connect is not None:
            return pa.schema(
                [
                    pa.field("schema", pa.string(), metadata=_JSON),
                    pa.field("payload", pa.string(), metadata=_JSON),
                    pa.field("key", pa.string(), metadata=_JSON),
                ]
            )
        return self._fields()

    def _fields(self) -> pa.Schema:
        """The record's fields, as Arrow columns (what the ``schemas`` form writes as JSON)."""
        fields = [
            pa.field("before", pa.string(), metadata=_JSON),
            pa.field("after", pa.string(), metadata=_JSON),
            pa.field("source", SOURCE),
            pa.field("op", pa.string()),
            pa.field("ts_ms", pa.int64()),
            pa.field("ts_us", pa.int64()),
            pa.field("ts_ns", pa.int64()),
            pa.field("transaction", TRANSACTION),
        ]
        if self.options["transactions"]:
            fields += [
                pa.field("status", pa.string()),
                pa.field("id", pa.string()),
                pa.field("event_count", pa.int64()),
                pa.field("data_collections", DATA_COLLECTIONS),
            ]
        return pa.schema(fields + [pa.field("key", pa.string(), metadata=_JSON)])

    @staticmethod
    def _events(batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows that are Debezium change events (DML and TRUNCATE), in the columns the
        envelope reads: of the row images only their first word, the representation id."""
        op = pc.cast(batch.column("op"), pa.string())
        keep = pc.or_kleene(
            pc.is_in(op, pa.array(_OPS[:3])),
            pc.and_kleene(
                pc.equal(op, "ddl"), pc.equal(batch.column("ddl_type"), int(DdlType.TRUNCATE))
            ),
        )
        columns = {name: batch.column(name) for name in _READ}
        for image in ("before_image", "after_image"):
            columns[image] = pc.binary_slice(batch.column(image), 0, 4)
        return pa.RecordBatch.from_pydict(columns).filter(pc.fill_null(keep, False))

    @staticmethod
    def _txn_ids(batch: pa.RecordBatch) -> pa.Array:
        commit = pc.coalesce(lsa_text(batch.column("commit_lsa")), pa.scalar(""))
        return pc.binary_join_element_wise(pc.cast(batch.column("trid"), pa.string()), commit, ":")

    @staticmethod
    def _commit_seconds(batch: pa.RecordBatch) -> pa.Array:
        when = pc.coalesce(batch.column("commit_time"), batch.column("time"))
        return pc.cast(pc.cast(when, pa.timestamp("s", tz="UTC")), pa.int64())

    def _end(self, records: List[tuple]) -> bool:
        """Closes the open transaction; appends its END record to ``records`` if transaction
        records are asked for (and says whether it did)."""
        txn, self._txn = self._txn, None
        if txn is None or not self.options["transactions"]:
            return False
        collections = [
            {"data_collection": name or "", "event_count": n} for name, n in self._per_table.items()
        ]
        records.append(("END", txn, self._txn_ms, self._total, collections))
        return True

    def _walk(self, batch: pa.RecordBatch) -> Tuple[list, list, list, List[tuple]]:
        """Counts the events of ``batch`` on from those of the same transaction already
        emitted; returns their total_order and data_collection_order, and the order of the
        output: ``(kind, i)`` with kind ``e`` (event i), ``x`` (tombstone after event i) or
        ``r`` (transaction record i)."""
        total, per_table, plan, records = [], [], [], []
        tombstones, transactions = self.options["tombstones"], self.options["transactions"]
        n = batch.num_rows
        ops = pc.cast(batch.column("op"), pa.string()).to_pylist() if tombstones else [None] * n
        ms = [None] * n
        if transactions:
            ms = pc.multiply(self._commit_seconds(batch), 1000).to_pylist()
        for i, (t, name) in enumerate(
            zip(self._txn_ids(batch).to_pylist(), batch.column("table").to_pylist())
        ):
            if t != self._txn:
                if self._end(records):
                    plan.append(("r", len(records) - 1))
                self._txn, self._txn_ms, self._total = t, ms[i], 0
                self._per_table.clear()
                if transactions:
                    records.append(("BEGIN", t, ms[i], None, None))
                    plan.append(("r", len(records) - 1))
            self._total += 1
            self._per_table[name] = self._per_table.get(name, 0) + 1
            total.append(self._total)
            per_table.append(self._per_table[name])
            plan.append(("e", i))
            if ops[i] == "delete":
                plan.append(("x", i))
        return total, per_table, plan, records

    def prime(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Counts, without emitting them, the events a stream resumed inside a transaction
        does not read again (the cursor's ``txn_offset`` first events of that transaction):
        its events go on from there."""
        for batch in batches:
            self._walk(self._events(batch))

    def finish(self) -> Optional[pa.RecordBatch]:
        """What is left when the stream (or a followed log's poll) has no more events: the
        END of the last transaction."""
        records: List[tuple] = []
        self._end(records)
        if not records:
            return None
        if self._connect is not None:
            return self._typed(None, None, [("r", 0)], records)
        return self._assemble(self._events_batch(None), [("r", 0)], records, 0)

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        batch = self._events(batch)
        total, per_table, plan, records = self._walk(batch)
        events = self._events_batch(batch, total, per_table)
        if self._connect is not None:
            return self._typed(batch, events, plan, records)
        return self._assemble(events, plan, records, batch.num_rows)

    def _typed(self, batch, events, plan: List[tuple], records: List[tuple]) -> pa.RecordBatch:
        """The ``schemas`` form: each record as Kafka Connect's JsonConverter writes it, the
        values typed (:mod:`walcdc.connect`); per row in Python."""
        from walcdc.connect import TXN_KEY_SCHEMA, TXN_VALUE_SCHEMA

        typed: List[Tuple[str, Any, Any, Any]] = []
        meta: List[Dict[str, Any]] = []
        if batch is not None and batch.num_rows:
            plain = batch.select(
                ["class_oid", "partition_oid", "table", "before", "after", "key"]
            ).to_pylist()
            heads = [batch.column(c).to_pylist() for c in ("before_image", "after_image")]
            for e, b, a in zip(plain, *heads):
                typed.append(self._connect.event(e, (_repid(b), _repid(a))))
            meta = events.select(
                ["source", "op", "ts_ms", "ts_us", "ts_ns", "transaction"]
            ).to_pylist()
        schema, payload, key = [], [], []
        for kind, i in plan:
            if kind == "r":
                status, txn, ms, count, collections = records[i]
                body = {"status": status, "id": txn, "event_count": count}
                body.update(data_collections=collections, ts_ms=ms)
                schema.append(TXN_VALUE_SCHEMA)
                payload.append(_compact(body))
                key.append(_compact({"schema": TXN_KEY_SCHEMA, "payload": {"id": txn}}))
                continue
            value_schema, before, after, record_key = typed[i]
            key.append(None if record_key is None else _compact(record_key))
            if kind == "x":  # a tombstone: JsonConverter's null value
                schema.append(None)
                payload.append(None)
                continue
            schema.append(value_schema)
            payload.append(_compact({"before": before, "after": after, **meta[i]}))
        return pa.record_batch(
            [pa.array(schema, pa.string()), pa.array(payload, pa.string()), pa.array(key)],
            schema=self.schema(),
        )

    def _events_batch(self, batch, total=(), per_table=()) -> pa.RecordBatch:
        """The change events of ``batch`` (None: no event) in the envelope's fields."""
        schema = self._fields()
        if batch is None:
            return pa.record_batch([pa.array([], f.type) for f in schema], schema=schema)
        n = batch.num_rows
        op = pc.cast(batch.column("op"), pa.string())
        seconds = self._commit_seconds(batch)
        commit_lsa, lsa = batch.column("commit_lsa"), batch.column("lsa")
        table = batch.column("table")
        # "owner.table": Debezium's schema and table apart.
        parts = pc.extract_regex(table, pattern=r"^(?P<schema>[^.]*)\.(?P<table>.*)$")
        sequence = pc.binary_join_element_wise(
            '["', pc.cast(commit_lsa, pa.string()), '","', pc.cast(lsa, pa.string()), '"]', ""
        )
        source = pa.StructArray.from_arrays(
            [
                _repeat(self.version, pa.string(), n),
                _repeat("walcdc", pa.string(), n),
                _repeat(self.database, pa.string(), n),
                pc.multiply(seconds, 1000),
                pc.multiply(seconds, 1000_000),
                pc.multiply(seconds, 1000_000_000),
                _repeat("false", pa.string(), n),
                _repeat(self.database, pa.string(), n),
                sequence,
                pc.struct_field(parts, "schema"),
                pc.coalesce(pc.struct_field(parts, "table"), table),
                batch.column("trid"),
                lsa_text(lsa),
                lsa_text(commit_lsa),
                pc.cast(batch.column("file"), pa.string()),
                batch.column("user"),
            ],
            fields=list(SOURCE),
        )
        transaction = pa.StructArray.from_arrays(
            [self._txn_ids(batch), pa.array(total, pa.int64()), pa.array(per_table, pa.int64())],
            fields=list(TRANSACTION),
        )
        now = time.time_ns()  # one processing time for the batch: emitted together
        columns = {
            "before": batch.column("before"),
            "after": batch.column("after"),
            "source": source,
            "op": _LETTERS.take(pc.index_in(op, pa.array(_OPS))),
            "ts_ms": _repeat(now // 1000_000, pa.int64(), n),
            "ts_us": _repeat(now // 1000, pa.int64(), n),
            "ts_ns": _repeat(now, pa.int64(), n),
            "transaction": transaction,
            "key": batch.column("key"),
        }
        return pa.record_batch(
            [columns.get(f.name, pa.nulls(n, f.type)) for f in schema], schema=schema
        )

    def _assemble(
        self, events: pa.RecordBatch, plan: List[tuple], records: List[tuple], n: int
    ) -> pa.RecordBatch:
        """The output rows in ``plan`` order: each column is the events' column followed by
        the transaction records' values, and every row takes its own (or null)."""
        schema = self._fields()
        if len(plan) == n and not records:  # events only
            return events
        own: Dict[str, List[Optional[int]]] = {"value": [], "key": []}
        for kind, i in plan:
            own["value"].append(i if kind == "e" else n + i if kind == "r" else None)
            own["key"].append(n + i if kind == "r" else i)
        extra = {
            "ts_ms": pa.array([r[2] for r in records], pa.int64()),
            "status": pa.array([r[0] for r in records], pa.string()),
            "id": pa.array([r[1] for r in records], pa.string()),
            "event_count": pa.array([r[3] for r in records], pa.int64()),
            "data_collections": pa.array([r[4] for r in records], DATA_COLLECTIONS),
            "key": pa.array([_compact({"id": r[1]}) for r in records], pa.string()),
        }
        columns = []
        for f in schema:
            tail = extra.get(f.name, pa.nulls(len(records), f.type))
            both = pa.concat_arrays([events.column(f.name), tail.cast(f.type)])
            columns.append(
                both.take(pa.array(own["key" if f.name == "key" else "value"], pa.int64()))
            )
        return pa.record_batch(columns, schema=schema)


class EnvelopedStream(ArrowStream):
    """A change stream in an envelope (``read_changes(..., envelope="debezium")``): the plain
    stream's batches shaped by ``transform`` (a :class:`Debezium`), with what the transform
    holds emitted where the plain stream goes quiet (a followed log's poll) and at its end.
    Everything else (:attr:`cursor`, :meth:`state`, :attr:`stats`, :meth:`close`, ...) is the
    plain stream's. The plain stream knows no envelope; this is the only place one is put on."""

    def __init__(self, stream, transform: Debezium):
        self._stream = stream
        self._transform = transform
        self.schema: pa.Schema = transform.schema(stream.schema)
        shaped = _shaped(stream.chunks(), transform)
        self.reader = pa.RecordBatchReader.from_batches(self.schema, shaped)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def close(self) -> None:
        """Ends the stream (a followed one from any thread, as :meth:`ChangeStream.close`)."""
        if getattr(self._stream, "_stop", None) is None:
            self.reader.close()
        self._stream.close()


def _shaped(chunks: Iterator[Optional[pa.RecordBatch]], transform: Debezium):
    """``chunks`` (batches, and None where the stream is quiet) shaped by ``transform``. Holds
    what it reads, never the stream (see ``walcdc.changes._stream_batches``)."""
    for chunk in chunks:
        if chunk is not None:
            yield transform(chunk)
            continue
        tail = transform.finish()  # quiet: every transaction emitted so far is whole
        if tail is not None and tail.num_rows:
            yield tail
    tail = transform.finish()
    if tail is not None and tail.num_rows:
        yield tail
