"""Log sequence addresses (LSAs).

walcdc represents an LSA as an order-preserving unsigned 64-bit integer,
``pageid << 16 | offset``, so that LSAs compare, sort and filter as plain integers in Arrow.
CUBRID prints LSAs as ``pageid|offset``; its CDC API packs them the other way round
(page id in the low 48 bits, offset in the high 16 bits). Helpers convert between the three.

>>> from walcdc import lsa
>>> k = lsa.parse("15423|1224")
>>> lsa.format_lsa(k)
'15423|1224'
>>> lsa.from_cdc(lsa.to_cdc(k)) == k
True
>>> lsa.split(k)
(15423, 1224)
"""

from __future__ import annotations

from typing import Tuple, Union

from walcdc.errors import InvalidArgumentError

__all__ = ["make", "split", "parse", "format_lsa", "to_cdc", "from_cdc", "coerce"]

_MASK48 = (1 << 48) - 1


def make(pageid: int, offset: int) -> int:
    """The order-preserving u64 of ``(pageid, offset)``."""
    if pageid < 0 or not (0 <= offset < 1 << 15):
        raise InvalidArgumentError(f"not a record address: pageid={pageid}, offset={offset}")
    return (pageid << 16) | offset


def split(key: int) -> Tuple[int, int]:
    """``(pageid, offset)`` of an order-preserving u64."""
    return key >> 16, key & 0xFFFF


def parse(text: str) -> int:
    """Parses ``"pageid|offset"``."""
    try:
        p, o = str(text).strip().split("|")
        return make(int(p), int(o))
    except ValueError:
        raise InvalidArgumentError(f"not an LSA (expected pageid|offset): {text!r}") from None


def format_lsa(key: int) -> str:
    """``"pageid|offset"`` of an order-preserving u64."""
    p, o = split(key)
    return f"{p}|{o}"


def to_cdc(key: int) -> int:
    """CUBRID CDC API packing (page id in the low 48 bits, offset in the high 16)."""
    p, o = split(key)
    return (p & _MASK48) | (o << 48)


def from_cdc(value: int) -> int:
    """From the CDC API packing to the order-preserving u64."""
    p = value & _MASK48
    o = (value >> 48) & 0xFFFF
    return make(p, o)


def coerce(value: Union[int, str, Tuple[int, int], None]):
    """Accepts an order-preserving u64, ``"pageid|offset"`` or a ``(pageid, offset)`` pair."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse(value)
    if isinstance(value, tuple):
        return make(*value)
    if isinstance(value, int):
        if not 0 <= value < 1 << 64:
            raise InvalidArgumentError(f"not an LSA: {value}")
        return value
    raise InvalidArgumentError(f"not an LSA: {value!r}")
