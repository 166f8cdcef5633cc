"""Schema files from a live CUBRID server, for tables created before the log window.

Uses any DB-API 2.0 connection to the database (the pure-Python ``pycubrid`` driver:
``pip install 'walcdc[server]'``) and writes the format :mod:`walcdc.schemas` reads::

    import pycubrid, json
    from walcdc.pycubrid_schema import export_schema

    conn = pycubrid.connect(host="db1", port=33000, database="demodb", user="dba", password="")
    json.dump(export_schema(conn), open("demodb.schema.json", "w"), indent=2)

    walcdc.read_changes(log_dir, schema="demodb.schema.json")

The catalog views give names, types, precision, scale, charset and definition order; the class
OID comes from ``_db_class.class_of``. They do not give the storage order (walcdc derives it as
for a never-altered table) or ENUM labels (add ``"enum_labels"`` to such columns by hand).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

__all__ = ["export_schema", "export_schema_from_server"]

_OID = re.compile(r"(-?\d+)\|(-?\d+)\|(-?\d+)")


def _rows(conn, sql: str, args=()) -> List[tuple]:
    cur = conn.cursor()
    try:
        cur.execute(sql, args) if args else cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def _oid_text(value: Any) -> str:
    """CUBRID prints an OID as ``volid|pageid|slotid`` (drivers may prefix ``@`` or wrap it)."""
    m = _OID.search(str(value))
    if not m:
        raise ValueError(f"not an OID: {value!r}")
    return "|".join(m.groups())


def export_schema(conn) -> Dict[str, Any]:
    """The user tables of the connected database in the schema-file format."""
    tables = []
    classes = _rows(
        conn,
        "SELECT class_name, owner_name FROM db_class "
        "WHERE is_system_class = 'NO' AND class_type = 'CLASS' ORDER BY owner_name, class_name",
    )
    for name, owner in classes:
        oid = _rows(
            conn,
            "SELECT class_of FROM _db_class WHERE class_name = ? AND owner.name = ?",
            (name, owner),
        )
        attrs = _rows(
            conn,
            "SELECT attr_name, def_order, data_type, prec, scale, charset FROM db_attribute "
            "WHERE class_name = ? AND owner_name = ? AND attr_type = 'INSTANCE' "
            "ORDER BY def_order",
            (name, owner),
        )
        keys = _rows(
            conn,
            "SELECT k.key_attr_name FROM db_index i, db_index_key k "
            "WHERE i.class_name = ? AND i.owner_name = ? AND i.is_primary_key = 'YES' "
            "AND k.index_name = i.index_name AND k.class_name = i.class_name "
            "AND k.owner_name = i.owner_name",
            (name, owner),
        )
        pk = {k[0] for k in keys}
        tables.append(
            {
                "name": name,
                "owner": owner,
                "class_oid": _oid_text(oid[0][0]),
                "columns": [
                    {
                        "name": a,
                        "def_order": int(order),
                        "data_type": t,
                        "prec": int(p) if p is not None else -1,
                        "scale": int(s) if s is not None else 0,
                        "charset": cs,
                        "primary_key": a in pk,
                    }
                    for a, order, t, p, s, cs in attrs
                ],
            }
        )
    return {"tables": tables}


def export_schema_from_server(
    host: str, port: int, database: str, user: str = "dba", password: str = ""
) -> Dict[str, Any]:
    """Connects with ``pycubrid`` and exports the schema."""
    import pycubrid  # optional dependency: pip install 'walcdc[server]'

    conn = pycubrid.connect(host=host, port=port, database=database, user=user, password=password)
    try:
        return export_schema(conn)
    finally:
        conn.close()
