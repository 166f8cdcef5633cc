"""Schema files: table schemas for tables created before the log window.

walcdc learns schemas from the class records in the log. For a table whose class records are
not in the available log (it was created and last altered before the oldest volume), give its
schema with ``read_changes(..., schema=...)``: a path to a JSON file, or the same structure as a
dict. The format is the one ``walcdc.pycubrid_schema.export_schema`` writes from a live server::

    {"tables": [
      {"name": "t_types", "owner": "DBA", "class_oid": "0|229|1",
       "columns": [
         {"name": "id", "data_type": "INTEGER", "def_order": 0, "primary_key": true},
         {"name": "tag", "data_type": "STRING", "prec": 40, "charset": "utf8", "def_order": 1},
         {"name": "c_num", "data_type": "NUMERIC", "prec": 15, "scale": 4, "def_order": 8},
         {"name": "c_enum", "data_type": "ENUM", "enum_labels": ["red", "green", "blue"],
          "def_order": 22}
       ]}
    ]}

``class_oid`` is CUBRID's ``volid|pageid|slotid`` (``_db_class.class_of``; ``class_oid_as_printed``
is accepted too) or the CDC API's u64 packing. Columns are listed with their definition order;
walcdc derives the storage order the way CUBRID lays out a table created with those columns
(which is right for tables never altered; for altered ones prefer the log's class records).
A ``repid`` may be given; without one the schema applies to rows of any representation that the
log itself does not describe.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Union

from walcdc import _native, oid
from walcdc.errors import InvalidArgumentError

__all__ = ["load_schema", "TYPE_IDS", "TYPE_NAMES", "CODESETS"]

#: The canonical (catalog) name of each DB_TYPE id (from the Rust core's one type table).
TYPE_NAMES: Dict[int, str] = {i: name for i, name, _aliases in _native.db_types()}
#: DB_TYPE ids by every name CUBRID's catalog and DDL use.
TYPE_IDS: Dict[str, int] = {
    n: i for i, name, aliases in _native.db_types() for n in (name, *aliases)
}
#: INTL_CODESET ids by charset name.
CODESETS: Dict[str, int] = {name: i for i, name in _native.codesets()}


def _oid(value) -> int:
    if isinstance(value, int):
        return value
    try:
        return oid.parse(value)
    except ValueError:
        raise InvalidArgumentError(
            f"schema: not a class OID (volid|pageid|slotid): {value!r}"
        ) from None


def _int(v, default=0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _column(c: Dict[str, Any], where: str) -> tuple:
    t = c.get("data_type", c.get("type"))
    if isinstance(t, str):
        key = t.strip().upper()
        if key not in TYPE_IDS:
            raise InvalidArgumentError(f"schema: {where}: unknown data_type {t!r}")
        type_id = TYPE_IDS[key]
    elif isinstance(t, int):
        type_id = t
    else:
        raise InvalidArgumentError(f"schema: {where}: column without data_type")
    charset = str(c.get("charset") or "").lower()
    return (
        str(c["name"]),
        _int(c.get("def_order"), -1),
        type_id,
        _int(c.get("prec", c.get("precision")), -1),
        _int(c.get("scale")),
        CODESETS.get(charset, 5 if type_id in (4, 25, 26, 27, 35) else 0),
        bool(c.get("primary_key", False)),
        [str(x) for x in c.get("enum_labels") or []],
    )


def load_schema(schema: Union[str, os.PathLike[str], Dict[str, Any], List[Any]]) -> List[tuple]:
    """Reads a schema file (or dict / list of tables) into the form the engine takes:
    ``(class_oid, name, repid or None, [columns])``."""
    if isinstance(schema, (str, os.PathLike)):
        with open(schema, encoding="utf-8") as f:
            schema = json.load(f)
    tables = schema.get("tables") if isinstance(schema, dict) else schema
    if not isinstance(tables, list):
        raise InvalidArgumentError('schema: expected {"tables": [...]} or a list of tables')
    out = []
    for t in tables:
        name = str(t["name"])
        owner = t.get("owner")
        if owner and "." not in name:
            name = f"{str(owner).lower()}.{name}"
        oid = _oid(t.get("class_oid", t.get("class_oid_as_printed")))
        pks = set()
        for idx in t.get("indexes") or []:
            if str(idx.get("primary_key", "")).upper() in ("YES", "TRUE", "1"):
                pks.update(idx.get("keys") or [])
        cols = []
        for i, c in enumerate(t.get("columns") or []):
            c = dict(c)
            c.setdefault("def_order", i)
            if c["name"] in pks:
                c["primary_key"] = True
            cols.append(_column(c, f"{name}.{c.get('name')}"))
        if not cols:
            raise InvalidArgumentError(f"schema: table {name} has no columns")
        repid = t.get("repid")
        out.append((oid, name, None if repid is None else int(repid), cols))
    return out
