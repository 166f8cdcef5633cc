"""Change events in Debezium's envelope (``read_changes(..., envelope="debezium")``,
``walcdc extract --envelope debezium``).

Each row has Debezium's fields::

    before, after       the row before / after the change (JSON text; JSON objects in JSON Lines)
    source              {version, connector, name, db, table, lsa, commit_lsa, file, ts_ms,
                         trid, user, snapshot}
    op                  "c" insert, "u" update, "d" delete, "t" TRUNCATE
    ts_ms               the commit time in milliseconds (CUBRID's commit record; the same on
                        every run, unlike Debezium's processing time)
    transaction         {id, total_order, data_collection_order}: id is "<trid>:<commit lsa>",
                        total_order the event's 1-based position in its transaction,
                        data_collection_order its position among the transaction's events of
                        the same table
    key                 the primary-key columns of the row (JSON text), null without a key

LSAs are ``pageid|offset`` text. Schema changes other than TRUNCATE and the commit/abort/timer
markers are not change events in Debezium's model: the envelope leaves them out (read them from
the plain stream, e.g. ``ops=["ddl"]``). Built from whole Arrow columns: no per-row Python
except for ``data_collection_order``'s running count.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Debezium", "lsa_text"]

_JSON = {b"walcdc.json": b"true"}

#: Debezium's op letters, by walcdc op (DDL only for TRUNCATE).
_OPS = ("insert", "update", "delete", "ddl")
_LETTERS = pa.array(["c", "u", "d", "t"])
_TRUNCATE = 4


def lsa_text(column: pa.Array) -> pa.Array:
    """``pageid|offset`` text of an LSA column (order-preserving u64); nulls stay null."""
    page = pc.cast(pc.shift_right(column, 16), pa.string())
    offset = pc.cast(pc.bit_wise_and(column, 0xFFFF), pa.string())
    return pc.binary_join_element_wise(page, offset, "|")


class Debezium:
    """Turns batches of the plain change stream into Debezium-shaped batches."""

    def __init__(self, database: Optional[str]):
        from walcdc import __version__

        self.database = database
        self.version = __version__
        # data_collection_order: (transaction id, table) -> events so far, for the transaction
        # being emitted (events of a transaction are contiguous in the committed stream).
        self._txn: Optional[str] = None
        self._per_table: Dict[Tuple[str, Optional[str]], int] = {}

    @staticmethod
    def source_type() -> pa.DataType:
        return pa.struct(
            [
                ("version", pa.string()),
                ("connector", pa.string()),
                ("name", pa.string()),
                ("db", pa.string()),
                ("table", pa.string()),
                ("lsa", pa.string()),
                ("commit_lsa", pa.string()),
                ("file", pa.string()),
                ("ts_ms", pa.int64()),
                ("trid", pa.int32()),
                ("user", pa.string()),
                ("snapshot", pa.string()),
            ]
        )

    def schema(self, _plain: pa.Schema) -> pa.Schema:
        return pa.schema(
            [
                pa.field("before", pa.string(), metadata=_JSON),
                pa.field("after", pa.string(), metadata=_JSON),
                pa.field("source", self.source_type()),
                pa.field("op", pa.string()),
                pa.field("ts_ms", pa.int64()),
                pa.field(
                    "transaction",
                    pa.struct(
                        [
                            ("id", pa.string()),
                            ("total_order", pa.int64()),
                            ("data_collection_order", pa.int64()),
                        ]
                    ),
                ),
                pa.field("key", pa.string(), metadata=_JSON),
            ]
        )

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        op = pc.cast(batch.column("op"), pa.string())
        keep = pc.or_kleene(
            pc.is_in(op, pa.array(_OPS[:3])),
            pc.and_kleene(pc.equal(op, "ddl"), pc.equal(batch.column("ddl_type"), _TRUNCATE)),
        )
        batch = batch.filter(pc.fill_null(keep, False))
        n = batch.num_rows
        op = pc.cast(batch.column("op"), pa.string())
        letters = _LETTERS.take(pc.index_in(op, pa.array(_OPS)))
        commit_lsa = batch.column("commit_lsa")
        when = pc.coalesce(batch.column("commit_time"), batch.column("time"))
        ts_ms = pc.multiply(pc.cast(pc.cast(when, pa.timestamp("s", tz="UTC")), pa.int64()), 1000)
        trid = batch.column("trid")
        commit_text = lsa_text(commit_lsa)
        txn_id = pc.binary_join_element_wise(
            pc.cast(trid, pa.string()), pc.coalesce(commit_text, pa.scalar("")), ":"
        )
        table = batch.column("table")
        source = pa.StructArray.from_arrays(
            [
                pa.array([self.version] * n, pa.string()),
                pa.array(["walcdc"] * n, pa.string()),
                pa.array([self.database] * n, pa.string()),
                pa.array([self.database] * n, pa.string()),
                table,
                lsa_text(batch.column("lsa")),
                commit_text,
                pc.cast(batch.column("file"), pa.string()),
                ts_ms,
                trid,
                batch.column("user"),
                pa.array(["false"] * n, pa.string()),
            ],
            fields=list(self.source_type()),
        )
        total = pc.add(pc.cast(batch.column("txn_seq"), pa.int64()), 1)
        per_table = []
        for t, name in zip(txn_id.to_pylist(), table.to_pylist()):
            if t != self._txn:
                self._txn = t
                self._per_table.clear()
            k = (t, name)
            self._per_table[k] = self._per_table.get(k, 0) + 1
            per_table.append(self._per_table[k])
        transaction = pa.StructArray.from_arrays(
            [txn_id, total, pa.array(per_table, pa.int64())],
            names=["id", "total_order", "data_collection_order"],
        )
        return pa.record_batch(
            [
                batch.column("before"),
                batch.column("after"),
                source,
                letters,
                ts_ms,
                transaction,
                batch.column("key"),
            ],
            schema=self.schema(batch.schema),
        )
