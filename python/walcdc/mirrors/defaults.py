"""A column's default as a typed value: what a row written before ``ALTER TABLE ... ADD
COLUMN ... DEFAULT`` holds in CUBRID (the row is not rewritten; reading it gives the default),
from the default's form in :meth:`walcdc.LogSet.schemas` (the CDC text forms of
:func:`walcdc.read_changes`) to walcdc's typed Arrow value of the column (docs/typed.md)."""

from __future__ import annotations

import datetime
import decimal
import json
import re
from typing import Any, Dict

import pyarrow as pa

from walcdc.schemas import TYPE_NAMES

_UTC = datetime.timezone.utc
_STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$")
_OFFSET = re.compile(r"([+-])(\d{2}):(\d{2})(?::(\d{2}))?$")
_AMOUNT = re.compile(r"(.*?)(-?(?:\d+(?:\.\d*)?|nan|inf))$")


class NoTypedDefault(ValueError):
    """A default whose text form does not say its typed value exactly."""


def typed_default(column: Dict[str, Any], arrow_type: pa.DataType) -> pa.Array:
    """One value of ``arrow_type``: ``column``'s default (a column dict of
    :meth:`walcdc.LogSet.schemas`); raises :class:`NoTypedDefault` when its form cannot be
    read back exactly."""
    value = _python(column["default"], column, arrow_type)
    try:
        return pa.array([value], arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
        raise NoTypedDefault(f"{column['default']!r} is no {arrow_type}: {exc}") from None


def _stamp(text: str) -> datetime.datetime:
    m = _STAMP.match(text)
    if m is None:
        raise NoTypedDefault(f"{text!r} is no date and time")
    y, mo, d, h, mi, s, frac = m.groups()
    ms = int((frac or "0").ljust(3, "0"))
    return datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), ms * 1000)


def _zoned(text: str) -> Dict[str, Any]:
    """``YYYY-MM-DD HH:MM:SS[.fff] ZONE`` -> instant and zone: the time is local in a fixed
    offset (``+09:00``), else the UTC time (a region's name, or a zone the log does not
    resolve), as the CDC form writes it."""
    date, time, zone = (text.split(" ", 2) + ["", ""])[:3]
    wall = _stamp(f"{date} {time}")
    m = _OFFSET.match(zone)
    if m is None:
        return {"instant": wall.replace(tzinfo=_UTC), "zone": zone}
    sign = 1 if m.group(1) == "+" else -1
    delta = datetime.timedelta(
        hours=int(m.group(2)), minutes=int(m.group(3)), seconds=int(m.group(4) or 0)
    )
    return {"instant": (wall - sign * delta).replace(tzinfo=_UTC), "zone": zone}


def _python(value: Any, column: Dict[str, Any], arrow_type: pa.DataType) -> Any:
    if value is None:
        return None
    kind = TYPE_NAMES.get(column["type"], "")
    if kind in ("INTEGER", "SMALLINT", "BIGINT", "FLOAT", "DOUBLE"):
        return value
    if kind == "NUMERIC":
        return decimal.Decimal(str(value))
    if kind in ("DATE", "TIME", "TIMESTAMP", "TIMESTAMPLTZ", "DATETIME", "DATETIMELTZ"):
        text = str(value)
        if text.startswith("0000-") or text.startswith("00/00"):
            return None  # CUBRID's zero date: null in a typed column
        if kind == "DATE":
            return datetime.date.fromisoformat(text)
        if kind == "TIME":
            return datetime.time.fromisoformat(text)
        stamp = _stamp(text[:-4] if text.endswith(" UTC") else text)
        return stamp if kind == "DATETIME" else stamp.replace(tzinfo=_UTC)
    if kind in ("TIMESTAMPTZ", "DATETIMETZ"):
        return None if str(value).startswith("0000-") else _zoned(str(value))
    if kind == "MONETARY":
        m = _AMOUNT.match(str(value))
        if m is None:
            raise NoTypedDefault(f"{value!r} is no amount")
        return {"amount": float(m.group(2)), "currency": m.group(1) or None}
    if kind == "BIT":
        text = str(value)
        if not (text.startswith("X'") and text.endswith("'")):
            raise NoTypedDefault(f"{value!r} is no bit string")
        digits = text[2:-1]
        return bytes.fromhex(digits + "0" * (len(digits) % 2))
    if kind == "VARBIT":
        # X'..' shows whole hex digits: a length that is no multiple of 4 bits is lost.
        raise NoTypedDefault("a VARBIT default's length in bits is not in its text form")
    if kind == "JSON":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if kind in ("SET", "MULTISET", "SEQUENCE"):
        domains = column.get("set_domains") or []
        if len(domains) != 1 or not pa.types.is_list(arrow_type):
            return [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in value]
        item = arrow_type.value_type
        return [_python(v, {**domains[0], "default": v}, item) for v in value]
    text = str(value)
    if kind in ("NCHAR", "VARNCHAR") and text.startswith("N'") and text.endswith("'"):
        text = text[2:-1]
    return text  # strings, ENUM labels, OIDs, LOB locators
