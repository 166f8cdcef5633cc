"""Debezium records in Kafka Connect's JSON form (``JsonConverter`` with
``schemas.enable=true``): ``{"schema": ..., "payload": ...}``, values in Debezium's typed
encodings (https://debezium.io/documentation/reference/stable/connectors/postgresql.html#postgresql-data-types),
the column types from the log's class records (:meth:`walcdc.LogSet.schemas`).

==============================  ====================================================
CUBRID type                     Kafka Connect type (Debezium semantic type): value
==============================  ====================================================
SMALLINT / INTEGER / BIGINT     int16 / int32 / int64
FLOAT / DOUBLE                  float / double (float32 / float64)
NUMERIC(p, s)                   bytes (``org.apache.kafka.connect.data.Decimal``,
                                parameters scale, connect.decimal.precision): the
                                unscaled value, big-endian two's complement, base64;
                                ``decimal_handling="string"``: string,
                                ``"double"``: double
MONETARY                        as NUMERIC with scale 2 (the amount; the currency
                                sign is left out)
CHAR, VARCHAR, NCHAR, VARNCHAR  string
BIT(n), VARBIT(n)               bytes (``io.debezium.data.Bits``, parameter length):
                                the bits as a number, little-endian; a VARBIT's length
                                is its hex digits × 4 (CUBRID's CDC text rounds it up)
DATE                            int32 (``io.debezium.time.Date``): days since 1970-01-01
TIME                            int32 (``io.debezium.time.Time``): ms past midnight
DATETIME                        int64 (``io.debezium.time.Timestamp``): ms since the
                                epoch, the wall-clock time read as UTC
TIMESTAMP, TIMESTAMPLTZ,        string (``io.debezium.time.ZonedTimestamp``): ISO 8601,
DATETIMELTZ                     UTC (``2023-05-27T10:11:12Z``)
TIMESTAMPTZ, DATETIMETZ         the same with the value's offset
                                (``2022-03-27T08:00:00.250-05:30``; a zone the log cannot
                                resolve stays UTC)
ENUM                            string (``io.debezium.data.Enum``, parameter allowed)
JSON                            string (``io.debezium.data.Json``)
SET, MULTISET, SEQUENCE         array of the element type (of strings when mixed)
BLOB, CLOB, OBJECT              string (the locator, ``volid|pageid|slotid``)
==============================  ====================================================

CUBRID's zero date and time are null. A column is optional unless it is in the primary key (the
log does not say NOT NULL). Columns of a table whose class records the log does not hold are
typed by their JSON values (int64, double, boolean, string).

``before`` and ``after`` follow the columns of the event's newest row image: a row written
before an ALTER reads as CUBRID reads it, columns added since take their default, dropped ones
are gone.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from typing import Any, Dict, Optional, Tuple

__all__ = ["DECIMAL_HANDLING", "TableColumns", "ConnectForm"]

#: Debezium's ``decimal.handling.mode`` values.
DECIMAL_HANDLING = ("precise", "string", "double")

_EPOCH = datetime.date(1970, 1, 1)
_INTS = {"SMALLINT": "int16", "INTEGER": "int32", "BIGINT": "int64"}
_FLOATS = {"FLOAT": "float", "DOUBLE": "double"}
_ZONED = {"TIMESTAMP", "TIMESTAMPLTZ", "TIMESTAMPTZ", "DATETIMELTZ", "DATETIMETZ"}
_COLLECTIONS = {"SET", "MULTISET", "SEQUENCE"}
_AMOUNT = re.compile(r"-?\d+(\.\d+)?$")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _field(name: str, schema: Dict[str, Any], optional: bool) -> Dict[str, Any]:
    """A struct field's schema in JsonConverter's key order."""
    return {"type": schema["type"], "optional": optional, **schema, "field": name}


# --- The envelope's own schemas (as Debezium's connectors build them) -----------------------

_SOURCE_FIELDS = [
    ("version", "string", False),
    ("connector", "string", False),
    ("name", "string", False),
    ("ts_ms", "int64", False),
    ("ts_us", "int64", False),
    ("ts_ns", "int64", False),
    ("snapshot", None, True),
    ("db", "string", False),
    ("sequence", "string", True),
    ("schema", "string", False),
    ("table", "string", False),
    ("trid", "int32", False),
    ("lsa", "string", False),
    ("commit_lsa", "string", False),
    ("file", "string", False),
    ("user", "string", True),
]
# Debezium's snapshot marker: a string enum (its documentation's examples show a boolean).
_SNAPSHOT = {
    "type": "string",
    "name": "io.debezium.data.Enum",
    "version": 1,
    "parameters": {"allowed": "true,last,false,incremental"},
    "default": "false",
}
SOURCE_SCHEMA = {
    "type": "struct",
    "fields": [
        _field(name, {"type": t} if t else _SNAPSHOT, optional)
        for name, t, optional in _SOURCE_FIELDS
    ],
    "optional": False,
    "name": "walcdc.Source",
    "field": "source",
}
TRANSACTION_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"},
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}
_TAIL = [
    {"type": "string", "optional": False, "field": "op"},
    {"type": "int64", "optional": True, "field": "ts_ms"},
    {"type": "int64", "optional": True, "field": "ts_us"},
    {"type": "int64", "optional": True, "field": "ts_ns"},
    TRANSACTION_SCHEMA,
]
#: The value and key of transaction BEGIN/END records.
TXN_VALUE_SCHEMA = _compact(
    {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": False, "field": "status"},
            {"type": "string", "optional": False, "field": "id"},
            {"type": "int64", "optional": True, "field": "event_count"},
            {
                "type": "array",
                "items": {
                    "type": "struct",
                    "fields": [
                        {"type": "string", "optional": False, "field": "data_collection"},
                        {"type": "int64", "optional": False, "field": "event_count"},
                    ],
                    "optional": True,
                    "name": "event.collection",
                    "version": 1,
                },
                "optional": True,
                "field": "data_collections",
            },
            {"type": "int64", "optional": False, "field": "ts_ms"},
        ],
        "optional": False,
        "name": "io.debezium.connector.common.TransactionMetadataValue",
        "version": 1,
    }
)
TXN_KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "string", "optional": False, "field": "id"}],
    "optional": False,
    "name": "io.debezium.connector.common.TransactionMetadataKey",
    "version": 1,
}


# --- Column types ----------------------------------------------------------------------------


def _type_name(column: Dict[str, Any]) -> str:
    """The CUBRID type name of a column (or of a collection's element domain)."""
    if column.get("type_name"):
        return column["type_name"]
    from walcdc.schemas import TYPE_NAMES

    return TYPE_NAMES.get(column.get("type"), "")


def value_schema(column: Dict[str, Any], decimals: str) -> Dict[str, Any]:
    """The Kafka Connect schema of a column's values (without ``optional`` / ``field``)."""
    t = _type_name(column)
    if t in _INTS:
        return {"type": _INTS[t]}
    if t in _FLOATS:
        return {"type": _FLOATS[t]}
    if t in ("NUMERIC", "MONETARY"):
        if decimals != "precise":
            return {"type": "string" if decimals == "string" else "double"}
        parameters = {"scale": str(column["scale"] if t == "NUMERIC" else 2)}
        if t == "NUMERIC":
            parameters["connect.decimal.precision"] = str(column["precision"])
        return {
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": parameters,
        }
    if t in ("BIT", "VARBIT"):
        return {
            "type": "bytes",
            "name": "io.debezium.data.Bits",
            "version": 1,
            "parameters": {"length": str(column["precision"])},
        }
    semantic = {
        "DATE": ("int32", "io.debezium.time.Date"),
        "TIME": ("int32", "io.debezium.time.Time"),
        "DATETIME": ("int64", "io.debezium.time.Timestamp"),
        "JSON": ("string", "io.debezium.data.Json"),
        **{z: ("string", "io.debezium.time.ZonedTimestamp") for z in _ZONED},
    }
    if t in semantic:
        return {"type": semantic[t][0], "name": semantic[t][1], "version": 1}
    if t == "ENUM":
        return {
            "type": "string",
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": ",".join(column.get("enum_labels") or [])},
        }
    if t in _COLLECTIONS:
        domains = column.get("set_domains") or []
        items = value_schema(domains[0], decimals) if len(domains) == 1 else {"type": "string"}
        return {"type": "array", "items": {"type": items["type"], "optional": True, **items}}
    return {"type": "string"}


def _decimal(text: str, scale: int) -> str:
    with decimal.localcontext() as ctx:
        ctx.prec = 200  # NUMERIC holds 38 digits: never round
        unscaled = int(decimal.Decimal(text).scaleb(scale))
    size = (~unscaled if unscaled < 0 else unscaled).bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode("ascii")


def _bits(text: str, length: Optional[int]) -> str:
    """``X'<hex>'``: the first ``length`` bits (all of them for a VARBIT), little-endian."""
    digits = text[2:-1]
    value = int(digits, 16) if digits else 0
    width = 4 * len(digits)
    if length is None:
        length = width
    elif width > length:
        value >>= width - length
    return base64.b64encode(value.to_bytes((length + 7) // 8, "little")).decode("ascii")


def _days(text: str) -> int:
    return (datetime.date.fromisoformat(text) - _EPOCH).days


def _clock_ms(text: str) -> int:
    hms, _, fraction = text.partition(".")
    h, m, s = (int(x) for x in hms.split(":"))
    return ((h * 60 + m) * 60 + s) * 1000 + int(fraction or 0)


def _zoned(text: str) -> str:
    """CUBRID's ``YYYY-MM-DD HH:MM:SS[.fff][ zone]`` as ISO 8601 with its offset (``Z`` for
    UTC, and for a zone the log cannot resolve, whose time is shown in UTC)."""
    date, clock, *zone = text.split(" ", 2)
    offset = zone[0] if zone else "UTC"
    if offset.startswith("UTC") or offset in ("+00:00", "-00:00"):
        offset = "Z"
    return f"{date}T{clock}{offset}"


def encode(column: Dict[str, Any], value: Any, decimals: str) -> Any:
    """A value of the plain stream's JSON (CUBRID's CDC text forms) in Debezium's encoding."""
    if value is None:
        return None
    t = _type_name(column)
    if t in _INTS:
        return int(value)
    if t in _FLOATS:
        return float(value)
    if t in ("NUMERIC", "MONETARY"):
        text = str(value)
        if t == "MONETARY":
            amount = _AMOUNT.search(text)  # after the currency sign; none for nan
            if amount is None:
                return None
            text = amount.group(0)
        if decimals == "string":
            return text
        if decimals == "double":
            return float(text)
        return _decimal(text, column["scale"] if t == "NUMERIC" else 2)
    if t in ("BIT", "VARBIT"):
        return _bits(value, column["precision"] if t == "BIT" else None)
    if t in ("DATE", "DATETIME") or t in _ZONED:
        if str(value).startswith("0000-00-00"):
            return None  # CUBRID's zero date
        if t == "DATE":
            return _days(value)
        if t == "DATETIME":
            date, clock = value.split(" ")
            return _days(date) * 86_400_000 + _clock_ms(clock)
        return _zoned(value)
    if t == "TIME":
        return _clock_ms(value)
    if t == "JSON":
        return _compact(value)
    if t in _COLLECTIONS:
        domains = column.get("set_domains") or []
        if len(domains) == 1:
            return [encode(domains[0], v, decimals) for v in value]
        return [v if isinstance(v, str) or v is None else _compact(v) for v in value]
    return value if isinstance(value, str) else str(value) if t == "ENUM" else _compact(value)


def _inferred(value: Any) -> Dict[str, Any]:
    """The schema of a value whose column type is not known."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "int64"}
    if isinstance(value, float):
        return {"type": "double"}
    return {"type": "string"}


def _inferred_value(value: Any) -> Any:
    return value if value is None or isinstance(value, (bool, int, float, str)) else _compact(value)


# --- Tables ------------------------------------------------------------------------------------


class TableColumns:
    """The columns of every table representation the log's class records define, by class OID
    and representation id, in the order a row's JSON lists them (definition order)."""

    def __init__(self, log, keys: str, since: Optional[bytes] = None, follow: bool = False):
        self._log, self._keys, self._since, self._follow = log, keys, since, follow
        self._tables: Dict[int, Dict[int, list]] = {}
        self._loaded = False
        self._missed: set = set()

    def _load(self) -> None:
        tables = {}
        for t in self._log._schemas_shared(since=self._since):
            now = {}
            for r in t["representations"]:
                if r["repid"] == t["current_repid"]:
                    now = {c["id"]: c["name"] for c in r["columns"]}
            reps = {}
            for r in t["representations"]:
                if r["columns"]:
                    order = sorted(
                        r["columns"], key=lambda c: (c["def_order"] < 0, c["def_order"], c["id"])
                    )
                    reps[r["repid"]] = [(self._name(c, now), c) for c in order]
            tables[t["class_oid"]] = reps
        self._tables, self._loaded = tables, True

    def _name(self, column: Dict[str, Any], now: Dict[int, str]) -> str:
        """The name a row's JSON gives the column when nothing better is known (the JSON of
        ``keys="name_then"`` uses the names in force at the change)."""
        if self._keys == "id":
            return str(column["id"])
        return now.get(column["id"], column["name"]) if self._keys == "name_now" else column["name"]

    def get(self, class_oid: Optional[int], repid: Optional[int]) -> Optional[Dict[int, list]]:
        """The table's representations (repid → ``[(name, column)]``) if ``repid`` is one of
        them (or None: any); None if the log does not describe them."""
        if not self._loaded:
            self._load()
        reps = self._tables.get(class_oid) if class_oid is not None else None
        if (reps is None or (repid is not None and repid not in reps)) and self._follow:
            # A table created or altered while a live log is followed: its class records are
            # newer than the snapshot read so far.
            if (class_oid, repid) not in self._missed:
                self._missed.add((class_oid, repid))
                self._log = self._log.reopen()
                self._load()
                reps = self._tables.get(class_oid)
        if reps is None or (repid is not None and repid not in reps):
            return None
        return reps


class ConnectForm:
    """Builds the typed ``schema`` / ``payload`` / key parts of change events."""

    def __init__(self, database: Optional[str], columns: Optional[TableColumns], decimals: str):
        self.database = database
        self.columns = columns
        self.decimals = decimals
        self._schemas: Dict[tuple, str] = {}

    def _envelope(self, table: str, fields: list) -> str:
        prefix = f"{self.database}.{table}"
        value = {"type": "struct", "fields": fields, "optional": True, "name": f"{prefix}.Value"}
        envelope = {
            "type": "struct",
            "fields": [{**value, "field": "before"}, {**value, "field": "after"}, SOURCE_SCHEMA]
            + _TAIL,
            "optional": False,
            "name": f"{prefix}.Envelope",
        }
        return _compact(envelope)

    def event(
        self, event: Dict[str, Any], repids: Tuple[Optional[int], Optional[int]]
    ) -> Tuple[str, Any, Any, Any]:
        """(schema JSON text, before, after, key) of a change event of the plain stream
        (``repids``: those of its before and after images)."""
        rows = [json.loads(event[s]) if event[s] is not None else None for s in ("before", "after")]
        key = json.loads(event["key"]) if event["key"] is not None else None
        table = event["table"] or ""
        # The event's representation: its newest row's (a row written before an ALTER keeps
        # the older one until it is rewritten).
        sides = [(row, rid) for row, rid in zip(rows, repids) if row is not None]
        newest = max((rid for _, rid in sides if rid is not None), default=None)
        reps = None
        for oid in (event["partition_oid"], event["class_oid"]):
            reps = self.columns.get(oid, newest) if self.columns is not None else None
            if reps is not None:
                break
        if reps is None or (newest is None and sides):
            return self._inferred(table, rows, key)
        columns = reps[newest if newest is not None else max(reps)]
        # Names by attribute id, from the newest row: a row's JSON has one key per column of
        # its representation, in definition order.
        names = {c["id"]: name for name, c in columns}
        for row, rid in sides:
            if rid == newest and len(row) == len(columns):
                names = {c["id"]: name for name, (_, c) in zip(row, columns)}
        fields = tuple((names[c["id"]], c) for _, c in columns)
        cache = (table, event["partition_oid"] or event["class_oid"], newest, tuple(names.items()))
        if cache not in self._schemas:
            value_fields = [
                _field(name, value_schema(c, self.decimals), not c["primary_key"])
                for name, c in fields
            ]
            self._schemas[cache] = self._envelope(table, value_fields)
        typed = [
            None if row is None else self._project(row, reps.get(rid) if rid else None, fields)
            for row, rid in zip(rows, repids)
        ]
        by_name = {name: c for name, c in fields}
        return self._schemas[cache], typed[0], typed[1], self._key(table, key, by_name)

    def _project(self, row: Dict[str, Any], own: Optional[list], fields: tuple) -> Dict[str, Any]:
        """A row (JSON of its own representation ``own``) in the event's ``fields``: matched by
        attribute id; a column the row's representation lacks takes its default."""
        by_id = None
        if own is not None and len(own) == len(row):
            by_id = {c["id"]: name for name, (_, c) in zip(row, own)}
        out = {}
        for name, c in fields:
            if by_id is None:
                value = row.get(name)
            elif c["id"] in by_id:
                value = row[by_id[c["id"]]]
            else:
                value = c.get("default")
            out[name] = encode(c, value, self.decimals)
        return out

    def _key(self, table: str, key: Optional[Dict[str, Any]], by_name: Dict[str, Any]):
        if key is None:
            return None
        fields, payload = [], {}
        for name, value in key.items():
            c = by_name.get(name)
            schema = value_schema(c, self.decimals) if c else _inferred(value)
            fields.append(_field(name, schema, False))
            payload[name] = encode(c, value, self.decimals) if c else _inferred_value(value)
        prefix = f"{self.database}.{table}"
        schema = {"type": "struct", "fields": fields, "optional": False, "name": f"{prefix}.Key"}
        return {"schema": schema, "payload": payload}

    def _inferred(self, table: str, rows: list, key):
        """An event of a table whose columns the log does not describe: typed by its values."""
        names: Dict[str, Dict[str, Any]] = {}
        for row in rows:
            for name, value in (row or {}).items():
                if names.get(name, {"type": "string"})["type"] == "string" and value is not None:
                    names[name] = _inferred(value)
                names.setdefault(name, {"type": "string"})
        fields = [_field(name, schema, True) for name, schema in names.items()]
        typed = [
            None if row is None else {n: _inferred_value(row.get(n)) for n in names} for row in rows
        ]
        return self._envelope(table, fields), typed[0], typed[1], self._key(table, key, {})
