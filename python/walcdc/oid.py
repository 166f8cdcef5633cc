"""Object identifiers (OIDs): a row's or a class's address ``(volid, pageid, slotid)``.

walcdc's OID columns (``class_oid``, ``row_oid``, ``object_oid``, ``partition_oid``) use CUBRID's
CDC API packing, ``pageid | slotid << 32 | volid << 48`` (the packing lives in the Rust core;
these helpers call it). CUBRID prints OIDs as ``volid|pageid|slotid``.

>>> from walcdc import oid
>>> oid.pack(0, 229, 1)
4294967525
>>> oid.unpack(4294967525)
(0, 229, 1)
>>> oid.format_oid(4294967525)
'0|229|1'
>>> oid.parse("0|229|1") == oid.pack(0, 229, 1)
True
"""

from __future__ import annotations

from typing import Tuple

from walcdc import _native

__all__ = ["pack", "unpack", "format_oid", "parse"]


def pack(volid: int, pageid: int, slotid: int) -> int:
    """The CDC packing of ``(volid, pageid, slotid)``."""
    return _native.oid_pack(volid, pageid, slotid)


def unpack(packed: int) -> Tuple[int, int, int]:
    """``(volid, pageid, slotid)`` of a packed OID."""
    return tuple(_native.oid_unpack(packed))


def format_oid(packed: int) -> str:
    """CUBRID's text form ``volid|pageid|slotid``."""
    return "|".join(str(x) for x in unpack(packed))


def parse(text: str) -> int:
    """Packs ``volid|pageid|slotid``."""
    parts = str(text).strip().split("|")
    if len(parts) != 3:
        raise ValueError(f"not an OID (volid|pageid|slotid): {text!r}")
    vol, page, slot = (int(p) for p in parts)
    return pack(vol, page, slot)
