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

CUBRID's commit record holds whole seconds, so ``source.ts_ms`` is a multiple of 1000 (and
``ts_us`` / ``ts_ns`` of 10^6 / 10^9). LSAs are ``pageid|offset`` text; ``sequence`` is the JSON
text ``["<commit lsa>","<lsa>"]`` of the order-preserving u64 LSAs: it sorts events in the
order they are emitted. Schema changes other than TRUNCATE are not change events in Debezium's
model: the envelope leaves them out (read them from the plain stream, e.g. ``ops=["ddl"]``); the
transaction's counts leave them out too. Built from whole Arrow columns, except for the running
counts of ``transaction``.
"""

from __future__ import annotations

import time
from typing import Dict, Iterable, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Debezium", "lsa_text"]

_JSON = {b"walcdc.json": b"true"}

#: Debezium's op letters, by walcdc op (DDL only for TRUNCATE).
_OPS = ("insert", "update", "delete", "ddl")
_LETTERS = pa.array(["c", "u", "d", "t"])
_TRUNCATE = 4

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


def lsa_text(column: pa.Array) -> pa.Array:
    """``pageid|offset`` text of an LSA column (order-preserving u64); nulls stay null."""
    page = pc.cast(pc.shift_right(column, 16), pa.string())
    offset = pc.cast(pc.bit_wise_and(column, 0xFFFF), pa.string())
    return pc.binary_join_element_wise(page, offset, "|")


def _repeat(value, type_: pa.DataType, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, type_), n)


class Debezium:
    """Turns batches of the plain committed stream into Debezium-shaped batches. Keeps the
    running counts of the transaction being emitted (a transaction's events are contiguous in
    the committed stream, and may span batches)."""

    def __init__(self, database: Optional[str]):
        from walcdc import __version__

        self.database = database
        self.version = __version__
        self._txn: Optional[str] = None
        self._total = 0
        self._per_table: Dict[Optional[str], int] = {}

    def schema(self, _plain: pa.Schema) -> pa.Schema:
        return pa.schema(
            [
                pa.field("before", pa.string(), metadata=_JSON),
                pa.field("after", pa.string(), metadata=_JSON),
                pa.field("source", SOURCE),
                pa.field("op", pa.string()),
                pa.field("ts_ms", pa.int64()),
                pa.field("ts_us", pa.int64()),
                pa.field("ts_ns", pa.int64()),
                pa.field("transaction", TRANSACTION),
                pa.field("key", pa.string(), metadata=_JSON),
            ]
        )

    @staticmethod
    def _events(batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows that are Debezium change events: DML and TRUNCATE."""
        op = pc.cast(batch.column("op"), pa.string())
        keep = pc.or_kleene(
            pc.is_in(op, pa.array(_OPS[:3])),
            pc.and_kleene(pc.equal(op, "ddl"), pc.equal(batch.column("ddl_type"), _TRUNCATE)),
        )
        return batch.filter(pc.fill_null(keep, False))

    @staticmethod
    def _txn_ids(batch: pa.RecordBatch) -> pa.Array:
        commit = pc.coalesce(lsa_text(batch.column("commit_lsa")), pa.scalar(""))
        return pc.binary_join_element_wise(pc.cast(batch.column("trid"), pa.string()), commit, ":")

    def _count(self, txn_ids: Iterable[str], tables: Iterable[Optional[str]]) -> Tuple[list, list]:
        """total_order and data_collection_order of each event, counting on from the events
        of the same transaction already emitted."""
        total, per_table = [], []
        for t, name in zip(txn_ids, tables):
            if t != self._txn:
                self._txn, self._total = t, 0
                self._per_table.clear()
            self._total += 1
            self._per_table[name] = self._per_table.get(name, 0) + 1
            total.append(self._total)
            per_table.append(self._per_table[name])
        return total, per_table

    def prime(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Counts, without emitting them, the events a stream resumed inside a transaction
        does not read again (the cursor's ``txn_offset`` first events of that transaction):
        its events go on from there."""
        for batch in batches:
            events = self._events(batch)
            self._count(self._txn_ids(events).to_pylist(), events.column("table").to_pylist())

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        batch = self._events(batch)
        n = batch.num_rows
        op = pc.cast(batch.column("op"), pa.string())
        letters = _LETTERS.take(pc.index_in(op, pa.array(_OPS)))
        when = pc.coalesce(batch.column("commit_time"), batch.column("time"))
        seconds = pc.cast(pc.cast(when, pa.timestamp("s", tz="UTC")), pa.int64())
        commit_lsa, lsa = batch.column("commit_lsa"), batch.column("lsa")
        txn_id = self._txn_ids(batch)
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
        total, per_table = self._count(txn_id.to_pylist(), table.to_pylist())
        transaction = pa.StructArray.from_arrays(
            [txn_id, pa.array(total, pa.int64()), pa.array(per_table, pa.int64())],
            fields=list(TRANSACTION),
        )
        now = time.time_ns()  # one processing time for the batch: emitted together
        return pa.record_batch(
            [
                batch.column("before"),
                batch.column("after"),
                source,
                letters,
                _repeat(now // 1000_000, pa.int64(), n),
                _repeat(now // 1000, pa.int64(), n),
                _repeat(now, pa.int64(), n),
                transaction,
                batch.column("key"),
            ],
            schema=self.schema(batch.schema),
        )
