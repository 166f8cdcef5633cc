"""Changes of one table with typed columns: ``before`` and ``after`` as Arrow structs."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any, Dict, List, Optional

import pyarrow as pa

from walcdc.changes import ChangeStream, _stream_batches, read_changes
from walcdc.errors import argument_error
from walcdc.logset import LogSet, open_log
from walcdc.options import TableIndex

__all__ = ["read_table_changes", "arrow_type"]

_UTC = datetime.timezone.utc


def arrow_type(col: Dict[str, Any]) -> pa.DataType:
    """The Arrow type of a column of :meth:`walcdc.LogSet.schemas`."""
    t = col["type"]
    if t == 1:
        return pa.int32()
    if t == 18:
        return pa.int16()
    if t == 31:
        return pa.int64()
    if t == 2:
        return pa.float32()
    if t == 3:
        return pa.float64()
    if t == 22:
        p = col["precision"] if 0 < col["precision"] <= 38 else 38
        return pa.decimal128(p, max(col["scale"], 0))
    if t == 12:
        return pa.date32()
    if t == 10:
        return pa.time32("s")
    if t in (11, 36, 37):  # TIMESTAMP, TIMESTAMPTZ, TIMESTAMPLTZ: instants
        return pa.timestamp("s", tz="UTC")
    if t == 32:  # DATETIME: wall clock, no zone
        return pa.timestamp("ms")
    if t in (38, 39):  # DATETIMETZ, DATETIMELTZ: instants
        return pa.timestamp("ms", tz="UTC")
    # Text forms: strings, CHAR with padding, MONETARY with its sign, BIT as X'..', ENUM labels,
    # JSON and collections as JSON text, LOB locators, OIDs.
    return pa.string()


def _instant(text: str, fmt: str) -> datetime.datetime:
    """'YYYY-MM-DD HH:MM:SS[.fff] <zone>' as a UTC instant (the zone is UTC or an offset)."""
    parts = text.split(" ")
    stamp = datetime.datetime.strptime(" ".join(parts[:2]), fmt)
    if len(parts) > 2 and parts[2][:1] in "+-":
        sign = 1 if parts[2][0] == "+" else -1
        hh, mm = parts[2][1:].split(":")
        stamp -= datetime.timedelta(hours=int(hh), minutes=int(mm)) * sign
    return stamp.replace(tzinfo=_UTC)


def _convert(col: Dict[str, Any], v: Any) -> Any:
    if v is None:
        return None
    t = col["type"]
    if t in (12, 11, 36, 37, 32, 38, 39) and str(v).startswith("0000-"):
        # CUBRID's zero date/time ('0000-00-00 ...') has no calendar value.
        return None
    if t in (1, 18, 31, 2, 3):
        return v
    if t == 22:
        return decimal.Decimal(v)
    if t == 12:
        return datetime.date.fromisoformat(v)
    if t == 10:
        return datetime.time.fromisoformat(v)
    if t in (11, 36, 37):
        return _instant(v, "%Y-%m-%d %H:%M:%S")
    if t == 32:
        return datetime.datetime.strptime(v, "%Y-%m-%d %H:%M:%S.%f")
    if t in (38, 39):
        return _instant(v, "%Y-%m-%d %H:%M:%S.%f")
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return str(v)


class _TypedRows:
    """Turns a batch's JSON ``before`` / ``after`` into typed structs (the table's columns)."""

    def __init__(self, columns: List[Dict[str, Any]], struct: pa.StructType, schema: pa.Schema):
        self._columns = columns
        self._struct = struct
        self._schema = schema

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        errors = batch.column("decode_error").to_pylist()
        sides = {
            f.name: self._rows(batch.column(f.name), errors, f.name)
            for f in self._schema
            if f.name in ("before", "after")
        }
        cols = []
        for f in self._schema:
            if f.name in sides:
                cols.append(sides[f.name])
            elif f.name == "decode_error":
                cols.append(pa.array(errors, pa.string()))
            else:
                cols.append(batch.column(f.name))
        return pa.record_batch(cols, schema=self._schema)

    def _row(self, text: Optional[str]) -> Optional[Dict[str, Any]]:
        if text is None:
            return None
        by_id = json.loads(text)
        # Older representations: columns matched by attribute id; absent ones are null.
        return {c["name"]: _convert(c, by_id.get(str(c["id"]))) for c in self._columns}

    def _rows(self, texts: pa.Array, errors: List[Optional[str]], side: str) -> pa.Array:
        """The typed rows of one side; a row whose values do not fit the table's types is
        null, with the reason added to ``errors`` (the batch's ``decode_error``)."""

        def fail(i: int, exc: Exception) -> None:
            why = f"{side}: {exc}"
            errors[i] = f"{errors[i]}; {why}" if errors[i] else why

        rows: List[Optional[Dict[str, Any]]] = []
        for i, text in enumerate(texts.to_pylist()):
            try:
                rows.append(self._row(text))
            except (ValueError, ArithmeticError) as exc:
                rows.append(None)
                fail(i, exc)
        try:
            return pa.array(rows, type=self._struct)
        except (pa.ArrowException, ValueError, ArithmeticError):
            pass
        # Some value does not fit its Arrow type: find the rows, one at a time.
        for i, row in enumerate(rows):
            try:
                pa.array([row], type=self._struct)
            except (pa.ArrowException, ValueError, ArithmeticError) as exc:
                rows[i] = None
                fail(i, exc)
        return pa.array(rows, type=self._struct)


def _table_schema(raw: pa.Schema, columns: List[Dict[str, Any]]):
    """The schema of a table's changes (``before`` / ``after`` typed structs; no raw images,
    no class OID) made from the schema of ``read_changes``, and the batch converter."""
    struct = pa.struct([pa.field(c["name"], arrow_type(c)) for c in columns])
    fields = []
    for f in raw:
        if f.name in ("before", "after"):
            fields.append(pa.field(f.name, struct))
        elif f.name not in ("before_image", "after_image", "class_oid"):
            fields.append(f)
    schema = pa.schema(fields)
    return schema, _TypedRows(columns, struct, schema)


def _table_columns(log: LogSet, table, kwargs: Dict[str, Any]):
    """The class OID and current columns (in definition order) of ``table``; arguments that do
    not apply to one table are refused."""
    for arg in ("tables", "exclude_tables", "keys", "envelope"):
        if arg in kwargs:
            raise argument_error(arg, "read_table_changes reads one table: {} does not apply")
    user_schemas = None
    if kwargs.get("schema") is not None:
        from walcdc.schemas import load_schema

        user_schemas = load_schema(kwargs["schema"])
    class_oid, schema = TableIndex.of(log, user_schemas or ()).one(table, "table")
    current = next(r for r in schema["representations"] if r["repid"] == schema["current_repid"])
    return class_oid, sorted(current["columns"], key=lambda c: c["def_order"])


class _TableStream(ChangeStream):
    """A :class:`~walcdc.ChangeStream` whose ``before`` / ``after`` are typed structs."""

    def __init__(self, native, columns: List[Dict[str, Any]], info: Dict[str, Any]):
        self.info = info
        self._transform = None
        self._native = native
        self.schema, typed = _table_schema(pa.schema(native.schema()), columns)
        self.reader = pa.RecordBatchReader.from_batches(self.schema, _stream_batches(native, typed))


def read_table_changes(source, table, **kwargs) -> ChangeStream:
    """Changes of one table, ``before`` and ``after`` as Arrow structs typed with the table's
    current columns (integers, floats, ``decimal128`` for NUMERIC, ``date32``, ``time32``, UTC
    timestamps for TIMESTAMP/LTZ/TZ and DATETIMELTZ/TZ, naive ``timestamp[ms]`` for DATETIME,
    strings for the rest). Rows written under an older representation are mapped by attribute
    id (so renamed columns keep their values); columns they do not have are null.

    ``table`` is a name (matched as by :func:`walcdc.read_changes`' ``tables=``: any name the
    table had in the log) or a class OID. Other arguments are those of
    :func:`walcdc.read_changes`.

    >>> import walcdc
    >>> s = walcdc.read_table_changes(walcdc.samples.sample_path(), "t_chg")
    >>> s.read_all().schema.field("after").type.num_fields
    4
    """
    log = source if isinstance(source, LogSet) else open_log(source)
    class_oid, columns = _table_columns(log, table, kwargs)
    stream = read_changes(log, tables=[class_oid], keys="id", **kwargs)
    return _TableStream(stream._native, columns, stream.info)
