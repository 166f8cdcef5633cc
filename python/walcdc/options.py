"""The arguments every reading API shares, checked and normalized in one place, so that the same
argument means the same thing (and the same mistake gives the same error) in
:func:`walcdc.read_changes`, :func:`walcdc.read_table_changes`, :meth:`walcdc.LogSet.records`,
the CLI and Spark.

Positions (``start`` / ``end``) are LSAs (``"pageid|offset"``, an order-preserving u64 or a
``(pageid, offset)`` pair) or times (an aware ``datetime``, epoch seconds as ``float``, or an ISO
8601 string; an ISO string without a zone is UTC).

Table filters take names or class OIDs: a string is one name or a comma-separated list
(``"t_types,t_nopk"``); a sequence holds names and OIDs (ints in CUBRID's CDC packing, or
``"volid|pageid|slotid"``). A name is ``table`` or ``owner.table``, case-insensitive, and matches
the table it named at any time in the log (a table renamed later is found by its old and its new
name). A name no table of the log (or of the ``schema=`` file) ever had is an error that lists
the nearest names.
"""

from __future__ import annotations

import datetime
import difflib
import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from walcdc import _native
from walcdc import lsa as L
from walcdc.errors import argument_error

__all__ = [
    "ReadOption",
    "READ_OPTIONS",
    "OPTION_DEFAULTS",
    "OPS",
    "MODES",
    "KEYS",
    "DDL_SCOPES",
    "choice",
    "split_list",
    "parse_ops",
    "parse_time",
    "position",
    "TableIndex",
]


@dataclass(frozen=True)
class ReadOption:
    """A read option of a change stream, as the Rust core declares it
    (``walcdc_core::cdc::options``: the one list every API, Spark and the CLI take theirs from).
    """

    name: str
    #: The type of its value once resolved: ``bool``, ``int``, ``choice``, ``list``, ...
    kind: str
    #: What is done to a value before the reader gets it: ``value`` (nothing), ``position``
    #: (a time to an LSA), ``tables`` (names to class OIDs), ``users``, ``ops``, ``schema``
    #: (a file loaded), ``cursor`` (a saved cursor loaded).
    resolve: str
    default: Any
    #: The names a choice (or each item of a list) takes.
    choices: Tuple[str, ...]
    doc: str


#: Every read option, by name, in the order shown to users.
READ_OPTIONS: Dict[str, ReadOption] = {
    o["name"]: ReadOption(
        o["name"], o["kind"], o["resolve"], json.loads(o["default"]), tuple(o["choices"]), o["doc"]
    )
    for o in _native.read_options()
}
#: The defaults of the read options.
OPTION_DEFAULTS: Dict[str, Any] = {name: o.default for name, o in READ_OPTIONS.items()}


def read_options_of(function: str, given: Dict[str, Any]) -> Dict[str, Any]:
    """Every read option: those in ``given``, the others at their defaults. A name that is not
    a read option is a ``TypeError``, as Python gives for an unknown keyword argument."""
    unknown = sorted(set(given) - set(READ_OPTIONS))
    if unknown:
        near = difflib.get_close_matches(unknown[0], READ_OPTIONS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}{hint}")
    return {**OPTION_DEFAULTS, **given}


def with_read_options(*without: str):
    """A decorator that shows the read options (but ``without``) in the signature and the
    docstring of a function taking them as ``**options``: ``help()``, editors and the docs
    list them from the one declaration."""
    import inspect

    def show(fn):
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        taken = {p.name for p in params} | set(without)
        first_keyword = next(
            (i for i, p in enumerate(params) if p.kind is p.KEYWORD_ONLY), len(params)
        )
        read = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=o.default)
            for name, o in READ_OPTIONS.items()
            if name not in taken
        ]
        params[first_keyword:first_keyword] = read
        fn.__signature__ = sig.replace(parameters=params)
        listed = options_help("    ", skip=taken)
        fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n    Read options:\n\n" + listed
        return fn

    return show


def options_help(indent: str = "", skip: Iterable[str] = ()) -> str:
    """The read options as a list: name, default, choices, what it does."""
    lines = []
    for name, o in READ_OPTIONS.items():
        if name in skip:
            continue
        values = f" ({' | '.join(o.choices)})" if o.choices else ""
        lines.append(f"{indent}- ``{name}={o.default!r}``{values}: {o.doc}")
    return "\n".join(lines) + "\n"


def options_table() -> str:
    """The read options as a Markdown table (the README's, checked by the tests)."""
    rows = ["| option | default | values | what it does |", "|---|---|---|---|"]
    for name, o in READ_OPTIONS.items():
        values = ", ".join(f"`{c}`" for c in o.choices)
        doc = o.doc.replace("*", "\\*")
        rows.append(f"| `{name}` | `{o.default!r}` | {values} | {doc} |")
    return "\n".join(rows) + "\n"


#: Operation names of the ``op`` column.
OPS = READ_OPTIONS["ops"].choices
#: Which row images a stream builds (``mode``).
MODES = READ_OPTIONS["mode"].choices
#: Keys of the row JSON: names in force at the change, names at the end of the log, or ids.
KEYS = READ_OPTIONS["keys"].choices
#: Which DDL a table filter keeps.
DDL_SCOPES = READ_OPTIONS["include_ddl"].choices


def choice(argument: str, value: Any, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise argument_error(argument, f"{{}} must be one of {choices}, not {value!r}")
    return value


def split_list(value: Union[str, Iterable[Any], None]) -> Optional[List[Any]]:
    """A string is a comma-separated list; a sequence is a list of items (strings in it are
    comma-separated lists too). ``None`` stays ``None``."""
    if value is None:
        return None
    items = [value] if isinstance(value, (str, int)) else list(value)
    out: List[Any] = []
    for item in items:
        if isinstance(item, str):
            out.extend(p.strip() for p in item.split(",") if p.strip())
        else:
            out.append(item)
    return out


def parse_ops(value) -> Optional[List[str]]:
    ops = split_list(value)
    if ops is None:
        return None
    out = [str(o).strip().lower() for o in ops]
    bad = [o for o in out if o not in OPS]
    if bad:
        raise argument_error("ops", f"{{}}: unknown operation(s) {bad}; choose from {list(OPS)}")
    return out


def parse_time(text: str) -> Optional[datetime.datetime]:
    """An ISO 8601 time (``Z`` or an offset; UTC when none), or ``None`` if ``text`` is not one."""
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    try:
        stamp = datetime.datetime.fromisoformat(t)
    except ValueError:
        try:
            stamp = datetime.datetime.combine(datetime.date.fromisoformat(t), datetime.time())
        except ValueError:
            return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp


def position(log, value, argument: str) -> Optional[int]:
    """An LSA (u64) from an LSA or a time (see the module's documentation). Times map to LSAs as
    CUBRID's ``cdc_find_lsa`` does: the first commit, abort or timer record at or after it."""
    if value is None:
        return None
    when: Optional[float] = None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise argument_error(
                argument, "{} is a naive datetime: give a timezone-aware one (or an ISO string)"
            )
        when = value.timestamp()
    elif isinstance(value, float):
        when = value
    elif isinstance(value, str) and "|" not in value:
        stamp = parse_time(value)
        if stamp is None:
            raise argument_error(
                argument, f"{{}} is neither an LSA (pageid|offset) nor an ISO 8601 time: {value!r}"
            )
        when = stamp.timestamp()
    if when is not None:
        if log is None:
            raise argument_error(argument, "{} must be an LSA here, not a time")
        found, _ = log._native.find_lsa(int(when // 1))
        return found
    if isinstance(value, bool):
        raise argument_error(argument, f"{{}} is not an LSA or a time: {value!r}")
    try:
        return L.coerce(value)
    except (ValueError, TypeError) as exc:
        raise argument_error(argument, f"{{}}: {exc}") from None


def _class_oid(value) -> Optional[int]:
    """A class OID (CDC packing) from an int or ``volid|pageid|slotid``; ``None`` for a name."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    parts = str(value).strip().split("|")
    if len(parts) == 3 and all(p.strip().lstrip("-").isdigit() for p in parts):
        from walcdc import oid

        vol, page, slot = (int(p) for p in parts)
        return oid.pack(vol, page, slot)
    return None


class TableIndex:
    """Every table name a log (and a schema file) defines, at any time, and its class OIDs."""

    def __init__(self, classes: List[Dict[str, Any]], user_tables: Sequence[tuple] = ()):
        self._by_name: Dict[str, Set[int]] = {}
        self._oids: Set[int] = set()
        self.classes = {c["class_oid"]: c for c in classes}
        for c in classes:
            for name in c.get("names") or [c["name"]]:
                self._add(name, c["class_oid"])
        for oid_, name, _repid, _cols in user_tables:
            self._add(name, oid_)

    def _add(self, name: str, class_oid: int) -> None:
        full = name.lower()
        self._oids.add(class_oid)
        self._by_name.setdefault(full, set()).add(class_oid)
        if "." in full:
            self._by_name.setdefault(full.rsplit(".", 1)[1], set()).add(class_oid)

    @classmethod
    def of(
        cls, log, user_tables: Sequence[tuple] = (), since: Optional[bytes] = None
    ) -> TableIndex:
        """The names of ``log`` (from a cursor's catalog checkpoint ``since`` on, if given)."""
        return cls(log._schemas_shared(since=since), user_tables)

    def resolve(self, value, argument: str) -> List[int]:
        """The class OIDs a filter selects, names resolved; unknown names are an error."""
        out: List[int] = []
        unknown: List[str] = []
        for item in split_list(value) or []:
            oid_ = _class_oid(item)
            if oid_ is not None:
                out.append(oid_)
                continue
            name = str(item).strip()
            if not name or "|" in name:
                raise argument_error(argument, f"{{}}: not a table name or class OID: {item!r}")
            found = self._by_name.get(name.lower())
            if found is None:
                unknown.append(name)
            else:
                out.extend(sorted(found))
        if unknown:
            hints = []
            for name in unknown:
                near = difflib.get_close_matches(name.lower(), self._by_name.keys(), n=3)
                hints.append(f"{name!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))
            raise argument_error(
                argument, f"{{}}: no table of this log is named {'; '.join(hints)}"
            )
        return out

    def one(self, value, argument: str = "table") -> Tuple[int, Dict[str, Any]]:
        """The one class a table argument names (ambiguity is an error)."""
        oids = sorted(set(self.resolve([value], argument)))
        if len(oids) > 1:
            names = ", ".join(
                f"{self.classes[o]['name']} ({self.classes[o]['class_oid_text']})"
                if o in self.classes
                else str(o)
                for o in oids
            )
            raise argument_error(
                argument, f"{{}}: {value!r} names several tables ({names}): give one's class OID"
            )
        if oids[0] not in self.classes:
            raise argument_error(argument, f"{{}}: no class record of {value!r} is in the log")
        return oids[0], self.classes[oids[0]]
