"""Test and benchmark support: a writer of CUBRID-format log sets.

The writer follows the engine's record placement rules (the same rules the reader uses), so
property tests, robustness tests and benchmarks can build logs of any shape: page sizes 4K/8K/16K,
tiny rings that wrap, many small archives, records spanning pages and volumes.

>>> import tempfile
>>> from walcdc.testing import LogWriter
>>> w = LogWriter(page_size=4096, active_pages=8, archive_pages=4)
>>> first = w.append(1, "LOG_UNDOREDO_DATA", undo=b"old", redo=b"new", rcvindex=39)
>>> _ = w.append(1, "LOG_COMMIT", at_time=1_700_000_000)
>>> d = tempfile.mkdtemp()
>>> out = w.finish(d)
>>> import walcdc
>>> walcdc.open_log(d).record(first)["redo"]
b'new'
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union

from walcdc import _native
from walcdc import oid as _oid
from walcdc.ddl import DdlType, ObjectType

__all__ = [
    "LogWriter",
    "RECORD_TYPES",
    "type_number",
    "page_locations",
    "patch_page",
    "patch_record",
]

#: Record type numbers by name (`LOG_RECTYPE`), from the core's record-type table.
RECORD_TYPES: Dict[str, int] = {name: number for number, name in _native.record_types()}


def type_number(rectype: Union[int, str]) -> int:
    if isinstance(rectype, str):
        try:
            return RECORD_TYPES[rectype]
        except KeyError:
            raise ValueError(f"unknown record type {rectype!r}") from None
    return int(rectype)


class LogWriter:
    """Builds a log set record by record, then writes ``<prefix>_lgat`` and the archives
    ``<prefix>_lgarNNN`` as after a clean shutdown.

    ``active_pages`` is the ring size; pages that no longer fit the ring go to archives of
    ``archive_pages`` pages each (at most ``active_pages``).

    ``stream_to``: write each archive into that directory as soon as it is certain (then
    ``finish`` must be given the same directory); the writer then holds about a ring and an
    archive in memory, however large the log grows, and keeps no list of record LSAs.
    ``resume=True``: go on with the log in ``stream_to`` after the process writing it died, as
    a server restarting after a crash (the same configuration; see :meth:`flush`).
    """

    def __init__(
        self,
        page_size: int = 4096,
        active_pages: int = 64,
        archive_pages: int = 16,
        db_creation: int = 1_700_000_000,
        prefix: str = "walcdc",
        release: str = "11.4.0",
        stream_to: Union[str, os.PathLike[str], None] = None,
        resume: bool = False,
    ):
        if stream_to is not None:
            stream_to = os.fspath(stream_to)
            os.makedirs(stream_to, exist_ok=True)
        self._w = _native.LogWriter(
            page_size, active_pages, archive_pages, db_creation, prefix, release, stream_to, resume
        )

    def open_transactions(self) -> List[int]:
        """Trids with records and no end record: after ``resume=True``, the transactions the
        crash left open (end them, as the engine's recovery aborts them)."""
        return list(self._w.open_transactions())

    def buffered_bytes(self) -> int:
        """Bytes of log pages held in memory."""
        return self._w.buffered_bytes()

    def append(
        self,
        trid: int,
        rectype: Union[int, str],
        *,
        undo: bytes = b"",
        redo: bytes = b"",
        zip_undo: bool = False,
        zip_redo: bool = False,
        lsa: Optional[int] = None,
        **fields: Any,
    ) -> int:
        """Appends one record; returns its LSA. ``fields``: ``rcvindex``, ``volid``, ``pageid``,
        ``offset``, ``mvccid``, ``supplement_type``, ``at_time``, ``sysop_type``, ``ha_state``;
        ``lsa`` is the type's one LSA field (undo_nxlsa, ref_lsa, lastparent_lsa, ...). DIFF types
        take the undo and redo images and store the redo as the engine does (XOR, LZ4)."""
        return self._w.append(
            trid,
            type_number(rectype),
            undo=bytes(undo),
            redo=bytes(redo),
            zip_undo=zip_undo,
            zip_redo=zip_redo,
            lsa=lsa,
            **fields,
        )

    def end_lsa(self) -> int:
        """Where the next record would go."""
        return self._w.end_lsa()

    def flush(self, torn: Optional[int] = None) -> None:
        """Live writing (a ``stream_to`` writer): writes the pages appended since the last
        flush into their ring slots of the active volume, the last one with an end-of-log
        marker at the append position, then the header (a running server's: not shut down),
        as CUBRID flushes its log. ``torn``: only the first ``torn`` bytes of the last page and
        no header (a flush cut short)."""
        self._w.flush(torn)

    def finish(self, directory: Union[str, os.PathLike[str]]) -> Dict[str, Any]:
        """Writes the volumes; returns their paths, the end-of-log LSA and the record LSAs."""
        os.makedirs(directory, exist_ok=True)
        return dict(self._w.finish(os.fspath(directory)))


# --- workloads: transactions written the way CUBRID logs them, with the changes they make ---

#: Recovery index numbers by name, and supplemental record kinds, from the core's tables.
RCV_INDEXES: Dict[str, int] = {name: number for number, name in _native.rcv_indexes()}
RVHF_MVCC_INSERT = RCV_INDEXES["RVHF_MVCC_INSERT"]
RVHF_MVCC_DELETE_REC_HOME = RCV_INDEXES["RVHF_MVCC_DELETE_REC_HOME"]
RVHF_UPDATE_NOTIFY_VACUUM = RCV_INDEXES["RVHF_UPDATE_NOTIFY_VACUUM"]
REC_HOME = 2
SUPPLEMENT = {name.lower(): number for number, name in _native.supplement_types()}
SYSOP_END_ABORT = 1


def page_with_checksum(page: bytes) -> bytes:
    """A log page with its checksum recomputed (spec §3.4), so an edit of its bytes passes the
    check and reaches the decoders behind it."""
    return _native.page_with_checksum(bytes(page))


def page_locations(directory: Union[str, os.PathLike[str]], page_size: int) -> Dict[int, Any]:
    """Where each logical log page of a directory's volumes is: ``{pageid: (path, file
    offset)}``, from the page headers, an archive's copy before the active ring's (as the
    reader takes them)."""
    where: Dict[int, Any] = {}
    vols = sorted(os.scandir(directory), key=lambda e: (e.name.endswith("_lgat"), e.name))
    for vol in vols:
        if not vol.is_file():
            continue
        with open(vol.path, "rb") as f:
            data = f.read()
        for at in range(page_size, len(data) - page_size + 1, page_size):
            pid = int.from_bytes(data[at : at + 8], "little", signed=True)
            if pid >= 0:
                where.setdefault(pid, (vol.path, at))
    return where


#: Bytes of a log page header (logical pageid, first-record offset, flags, checksum).
PAGE_HEADER_SIZE = 16


def patch_page(
    path: Union[str, os.PathLike[str]], page_at: int, page_size: int, at: int, data: bytes
) -> bytes:
    """Writes ``data`` at byte ``at`` of the log page at file offset ``page_at`` of ``path``
    (``at`` counts from the page's start, header included) and recomputes the page's checksum,
    so the edit reaches the decoders. Returns the page as it was (to put it back)."""
    with open(path, "r+b") as f:
        f.seek(page_at)
        page = f.read(page_size)
        if at < 0 or at + len(data) > len(page):
            raise ValueError(f"{len(data)} bytes at {at} do not fit a {page_size}-byte page")
        edited = bytearray(page)
        edited[at : at + len(data)] = data
        f.seek(page_at)
        f.write(page_with_checksum(bytes(edited)))
    return page


def patch_record(
    directory: Union[str, os.PathLike[str]], lsa: int, at: int, data: bytes, page_size: int
) -> None:
    """Writes ``data`` at byte ``at`` of the record that starts at ``lsa`` (0 = its header's
    first byte; the bytes must lie on the record's first page), in every volume that holds the
    page, with valid checksums."""
    from walcdc.lsa import split

    pageid, offset = split(lsa)
    where = page_locations(directory, page_size)
    if pageid not in where:
        raise ValueError(f"no volume of {directory} holds log page {pageid}")
    path, page_at = where[pageid]
    patch_page(path, page_at, page_size, PAGE_HEADER_SIZE + offset + at, data)


def cdc_oid(volid: int, pageid: int, slotid: int) -> int:
    """An OID in CUBRID's CDC API packing (the form of ``class_oid`` / ``row_oid``)."""
    return _oid.pack(volid, pageid, slotid)


def _oid_bytes(packed: int, order: str) -> bytes:
    vol, page, slot = _oid.unpack(packed)
    return (
        (page & 0xFFFFFFFF).to_bytes(4, order)
        + (slot & 0xFFFF).to_bytes(2, order)
        + (vol & 0xFFFF).to_bytes(2, order)
    )


def _native_oid(oid: int) -> bytes:
    return _oid_bytes(oid, "little")


def _raw_lsa(key: int) -> bytes:
    from walcdc.lsa import to_cdc

    return to_cdc(key).to_bytes(8, "little")


def heap_row(repid: int, body: bytes, chn: int = 0) -> bytes:
    """A heap record with the MVCC insert-id header flag set (as a fresh MVCC insert has)."""
    word = (0x01 << 24) | (repid & 0xFFFFFF)
    return word.to_bytes(4, "big") + chn.to_bytes(4, "big") + bytes(8) + body


class Transaction:
    """One transaction of a :class:`Workload`. Every method writes the records CUBRID writes
    for it (data records, supplemental records, compensations, sysop ends) and keeps the model:
    the events a correct reader must report if the transaction commits."""

    def __init__(self, workload: Workload, trid: int, mvccid: int):
        self.w = workload
        self.trid = trid
        self.mvccid = mvccid
        self.last: Optional[int] = None  # the transaction's last record (its prev_tranlsa chain)
        self.undoable: list = []  # (lsa, prev_tranlsa, rcvindex, page, slot) not compensated
        self.events: list = []  # (lsa, event dict) of changes not undone
        self.has_supplemental = False
        self.done = False

    def _append(self, rectype, **kw) -> int:
        lsa = self.w.writer.append(self.trid, rectype, **kw)
        self.last = lsa
        return lsa

    def _supplement(self, kind: str, payload: bytes) -> int:
        if not self.has_supplemental and kind != "tran_user":
            self._supplement("tran_user", self.w.user.encode())
        self.has_supplemental = True
        return self._append(
            "LOG_SUPPLEMENTAL_INFO",
            supplement_type=SUPPLEMENT[kind],
            undo=payload,
            zip_undo=len(payload) >= 255,
        )

    def _data(self, rcvindex, page, slot, undo=b"", redo=b"", rectype="LOG_MVCC_UNDOREDO_DATA"):
        prev = self.last
        lsa = self._append(
            rectype,
            rcvindex=rcvindex,
            pageid=page,
            offset=slot,
            volid=0,
            mvccid=self.mvccid,
            undo=undo,
            redo=redo,
            zip_undo=len(undo) >= 255,
            zip_redo=len(redo) >= 255,
        )
        self.undoable.append((lsa, prev, rcvindex, page, slot))
        return lsa

    def insert(self, class_oid: int, body: bytes, page: int, slot: int, repid: int = 1) -> None:
        row = heap_row(repid, body)
        # The MVCC insert redo omits the insert id: [type][word][chn][body].
        compact = REC_HOME.to_bytes(2, "little") + row[:8] + row[16:]
        at = self._data(RVHF_MVCC_INSERT, page, slot, redo=compact)
        s = self._supplement("insert", _native_oid(class_oid) + _raw_lsa(at))
        after = row[:8] + self.mvccid.to_bytes(8, "big") + row[16:]
        self.events.append(
            (
                s,
                {
                    "op": "insert",
                    "class_oid": class_oid,
                    "row_oid": cdc_oid(0, page, slot),
                    "before_image": None,
                    "after_image": after,
                },
            )
        )

    def update(
        self, class_oid: int, old: bytes, new: bytes, page: int, slot: int, diff: bool = False
    ) -> None:
        """An UPDATE in place; ``diff``: logged as the engine does when both images are 255
        bytes or more and their difference compresses, the redo image stored as that difference
        (``LOG_MVCC_DIFF_UNDOREDO_DATA``)."""
        rec = REC_HOME.to_bytes(2, "little")
        undo, redo, at = rec + old, rec + new, None
        if diff and len(undo) >= 255 and len(redo) >= 255:
            try:
                at = self._data(
                    RVHF_UPDATE_NOTIFY_VACUUM, page, slot, undo, redo, "LOG_MVCC_DIFF_UNDOREDO_DATA"
                )
            except ValueError:  # the XOR-ed redo does not compress: logged whole
                pass
        if at is None:
            at = self._data(RVHF_UPDATE_NOTIFY_VACUUM, page, slot, undo=undo, redo=redo)
        s = self._supplement("update", _native_oid(class_oid) + _raw_lsa(at) + _raw_lsa(at))
        self.events.append(
            (
                s,
                {
                    "op": "update",
                    "class_oid": class_oid,
                    "row_oid": cdc_oid(0, page, slot),
                    "before_image": old,
                    "after_image": new,
                },
            )
        )

    def delete(self, class_oid: int, row: bytes, page: int, slot: int) -> None:
        self._data(RVHF_MVCC_DELETE_REC_HOME, page, slot)
        u = self._supplement("undo_record", REC_HOME.to_bytes(2, "little") + row)
        s = self._supplement("delete", _native_oid(class_oid) + _raw_lsa(u))
        self.events.append(
            (
                s,
                {
                    "op": "delete",
                    "class_oid": class_oid,
                    "row_oid": cdc_oid(0, page, slot),
                    "before_image": row,
                    "after_image": None,
                },
            )
        )

    def savepoint(self, name: str = "sp1") -> int:
        return self._append("LOG_SAVEPOINT", undo=name.encode() + b"\0")

    def _compensate_after(self, boundary: Optional[int]) -> None:
        """Compensation records for every undoable record after ``boundary`` (newest first)."""
        while self.undoable and (boundary is None or self.undoable[-1][0] > boundary):
            lsa, prev, rcv, page, slot = self.undoable.pop()
            self._append("LOG_COMPENSATE", rcvindex=rcv, pageid=page, offset=slot, lsa=prev)
        self.events = [(s, e) for s, e in self.events if boundary is not None and s <= boundary]

    def rollback_to(self, savepoint_lsa: int) -> None:
        """ROLLBACK TO SAVEPOINT: undo what followed it; the transaction goes on."""
        self._compensate_after(savepoint_lsa)
        self._append("LOG_SYSOP_END", sysop_type=SYSOP_END_ABORT, lsa=savepoint_lsa)

    def failed_statement(self, class_oid: int, body: bytes, page: int, slot: int) -> None:
        """An INSERT that fails after logging (a duplicate key): its records are compensated and
        a SYSOP_END(ABORT) closes the statement's range."""
        before = self.last
        self.insert(class_oid, body, page, slot)
        self._compensate_after(before)
        self._append("LOG_SYSOP_END", sysop_type=SYSOP_END_ABORT, lsa=before)

    def commit(self, at_time: int = 1_700_000_000) -> list:
        if self.has_supplemental:
            self._supplement("tran_user", self.w.user.encode())
        commit = self._append("LOG_COMMIT", at_time=at_time)
        self.done = True
        events = [dict(e, lsa=s, trid=self.trid, commit_lsa=commit) for s, e in self.events]
        self.w.committed.append(events)
        return events

    def abort(self, at_time: int = 1_700_000_000) -> None:
        self._compensate_after(None)
        self._append("LOG_ABORT", at_time=at_time)
        self.done = True


class Workload:
    """Writes transactions as CUBRID logs them and keeps the model of their committed changes
    (``committed``: one list of events per committed transaction, in commit order)."""

    def __init__(self, writer: LogWriter, user: str = "DBA"):
        self.writer = writer
        self.user = user
        self.committed: list = []
        self._mvccid = 4

    def begin(self, trid: int) -> Transaction:
        self._mvccid += 1
        return Transaction(self, trid, self._mvccid)


# --- typed tables: class records and heap rows as CUBRID writes them ---
#
# Columns are dicts with the keys ``LogSet.schemas()`` reports: ``name``, ``type`` (an SQL type
# name such as ``"VARCHAR"`` or a ``DB_TYPE`` id), ``precision``, ``scale``, ``codeset``,
# ``collation``, ``enum_labels``, ``set_domains`` (element domains: dicts with the same domain
# keys), ``primary_key``, ``default`` (the value rows written before the column existed take, as
# a JSON value in its CDC form; or ``default_json``, its JSON text); :class:`Table` assigns
# ``id`` and ``def_order``. Omitted keys take what CUBRID stores for the type.
# Values are JSON texts in the CDC forms the change stream reports (``row::value_json``):
# ``"12.50"`` NUMERIC, ``"$1.00"`` MONETARY, ``"2024-03-15 10:30:00.000"`` DATETIME, ... .

RVHF_INSERT = 37
RVHF_UPDATE = 39
RVHF_INSERT_NEWHOME = 50
REC_ASSIGN_ADDRESS = 1
REC_NEWHOME = 3
REC_RELOCATION = 4
DDL_CREATE = DdlType.CREATE
DDL_ALTER = DdlType.ALTER

__all__ += ["Table", "class_record", "typed_row", "decode_typed_row", "canonical_json"]


def _native_column(column: Dict[str, Any]) -> Dict[str, Any]:
    import json

    c = dict(column)
    if "default" in c:
        default = c.pop("default")
        if default is not None:
            c["default_json"] = json.dumps(default)
    return c


def class_record(
    name: str,
    class_oid: int,
    current_repid: int,
    representations,
    subclasses=(),
    flags: int = 0,
    class_type: int = 0,
) -> bytes:
    """The class record (REC_HOME bytes) of a table: ``representations`` is a list of
    ``(repid, columns)`` with columns in storage order; the current one is the layout of new rows,
    the others are written as old representations."""
    reps = [(int(r), [_native_column(c) for c in cols]) for r, cols in representations]
    return _native.encode_class_record(
        name, class_oid, current_repid, reps, list(subclasses), flags, class_type
    )


def typed_row(
    representation, values, mvccid: Optional[int] = None, prev_version: bool = False
) -> bytes:
    """A heap record of ``values`` (JSON texts, ``None`` = NULL: a dict by column name or a list
    in storage order) written with ``representation`` = ``(repid, columns)``. ``mvccid`` gives
    the header of a fresh MVCC insert; ``prev_version`` the NULL previous-version LSA an MVCC
    update's logged after image carries."""
    return row_encoder(representation).encode(values, mvcc_insid=mvccid, prev_version=prev_version)


def row_encoder(representation) -> Any:
    """An encoder of rows of ``representation`` = ``(repid, columns)``:
    ``row_encoder(rep).encode(values, mvcc_insid=None, prev_version=False)`` is
    :func:`typed_row` with the columns read once (for writers of many rows)."""
    repid, columns = representation
    return _native.RowEncoder(repid, [_native_column(c) for c in columns])


def decode_typed_row(representation, record: bytes) -> Dict[str, str]:
    """The values of a heap record as JSON texts by column name (walcdc's row decoder)."""
    repid, columns = representation
    texts = _native.decode_row(repid, [_native_column(c) for c in columns], bytes(record))
    return {c["name"]: t for c, t in zip(columns, texts)}


def canonical_json(column: Dict[str, Any], text: str) -> str:
    """A value's JSON text as the decoder shows it (e.g. a JSON document compacted)."""
    return _native.canonical_json(_native_column(column), text)


class Table:
    """A table as its class record describes it: class OID, owner-qualified name, current
    representation id, columns in storage order (with attribute ids and definition order) and the
    old representations. :meth:`create`, :meth:`add_column` and :meth:`drop_column` give the
    table CREATE TABLE / ALTER TABLE make: attribute ids in definition order, storage order by
    CUBRID's rules (fixed-width columns first by alignment and size; variable ones in reverse
    definition order at creation, added ones appended), a new representation per change.

    ``home`` is where the class record lives when it has been relocated (``(page, slot)`` of its
    ``REC_NEWHOME`` copy, see :meth:`Transaction.alter_table`), else ``None`` (at the class OID).
    """

    def __init__(
        self,
        name: str,
        class_oid: int,
        repid: int,
        columns,
        old=None,
        next_id: int = 0,
        home=None,
    ):
        self.name = name
        self.class_oid = class_oid
        self.repid = repid
        self.columns = [dict(c) for c in columns]
        self.old: Dict[int, list] = {int(k): [dict(c) for c in v] for k, v in (old or {}).items()}
        self.next_id = next_id
        self.home = home

    @classmethod
    def create(cls, name: str, class_oid: int, columns) -> Table:
        """CREATE TABLE: representation 1, the empty representation 0 saved."""
        cols = [dict(c, id=i, def_order=i) for i, c in enumerate(columns)]
        rev = cols[::-1]
        order = _native.storage_order(rev)
        return cls(name, class_oid, 1, [rev[i] for i in order], {0: []}, len(cols))

    def _altered(self, columns, next_id: int) -> Table:
        old = dict(self.old)
        old[self.repid] = self.columns
        order = _native.storage_order(columns)
        cols = [columns[i] for i in order]
        return Table(self.name, self.class_oid, self.repid + 1, cols, old, next_id, self.home)

    def add_column(self, column: Dict[str, Any]) -> Table:
        """ALTER TABLE ... ADD COLUMN (last in definition order)."""
        def_order = max((c["def_order"] for c in self.columns), default=-1) + 1
        new = dict(column, id=self.next_id, def_order=def_order)
        return self._altered([dict(c) for c in self.columns] + [new], self.next_id + 1)

    def drop_column(self, name: str) -> Table:
        """ALTER TABLE ... DROP COLUMN."""
        gone = [c for c in self.columns if c["name"] == name]
        if not gone:
            raise KeyError(name)
        kept = []
        for c in self.columns:
            if c["name"] != name:
                c = dict(c)
                if c["def_order"] > gone[0]["def_order"]:
                    c["def_order"] -= 1
                kept.append(c)
        return self._altered(kept, self.next_id)

    def representation(self, repid: Optional[int] = None):
        """``(repid, columns in storage order)`` of the current or an old representation."""
        if repid is None or repid == self.repid:
            return (self.repid, self.columns)
        return (repid, self.old[repid])

    def class_record(self) -> bytes:
        reps = list(self.old.items()) + [(self.repid, self.columns)]
        return class_record(self.name, self.class_oid, self.repid, reps)

    def row(self, values, repid: Optional[int] = None, mvccid: Optional[int] = None) -> bytes:
        return typed_row(self.representation(repid), values, mvccid=mvccid)


def _class_slot(class_oid: int):
    """(page, slot) of a class record: the class OID is its record's OID (volume 0)."""
    vol, page, slot = _oid.unpack(class_oid)
    if vol:
        raise ValueError("class records are written on volume 0")
    return page, slot


def _packed_oid(oid: int) -> bytes:
    return _oid_bytes(oid, "big")


def _ddl(self: Transaction, ddl_type: int, class_oid: int, statement: str) -> int:
    """The DDL supplemental record of a statement (supplemental_log = 1)."""
    stmt = statement.encode()
    padded = (len(stmt) + 1 + 3) // 4 * 4
    oid = _packed_oid(class_oid)
    payload = (
        ddl_type.to_bytes(4, "big")
        + int(ObjectType.TABLE).to_bytes(4, "big")
        + oid
        + oid
        + len(stmt).to_bytes(4, "big")
        + padded.to_bytes(4, "big")
        + stmt
        + bytes(padded - len(stmt))
    )
    s = self._supplement("ddl", payload)
    event = {"op": "ddl", "class_oid": class_oid, "row_oid": None, "statement": statement}
    self.events.append((s, dict(event, before_image=None, after_image=None)))
    return s


def _rec(rectype: int, body: bytes) -> bytes:
    """A recdes payload: ``[INT16 record type, native][bytes]``."""
    return rectype.to_bytes(2, "little") + body


def _update_record(self: Transaction, page: int, slot: int, undo: bytes, redo: bytes) -> int:
    """A non-MVCC ``RVHF_UPDATE`` of a root-heap slot, as the engine logs it: a DIFF record when
    both images are 255 bytes or more and the XOR-ed redo compresses, else undo and redo."""
    if len(undo) >= 255 and len(redo) >= 255:
        try:
            return self._data(
                RVHF_UPDATE, page, slot, undo=undo, redo=redo, rectype="LOG_DIFF_UNDOREDO_DATA"
            )
        except ValueError:  # the XOR-ed redo does not compress
            pass
    return self._data(RVHF_UPDATE, page, slot, undo=undo, redo=redo, rectype="LOG_UNDOREDO_DATA")


def _create_table(
    self: Transaction,
    table: Table,
    statement: Optional[str] = None,
    assign_address: bool = False,
) -> int:
    """CREATE TABLE: the class record inserted in the root-class heap at the class OID (a
    non-MVCC ``RVHF_INSERT`` whose redo is ``[REC_HOME][class record]``); with
    ``assign_address`` the OID is reserved first (``RVHF_INSERT`` of a ``REC_ASSIGN_ADDRESS``
    slot) and the record written into it (``RVHF_UPDATE``). Then the statement's DDL
    supplemental record when ``statement`` is given. The schema takes effect when the
    transaction commits. Returns the LSA of the record that holds the class record."""
    page, slot = _class_slot(table.class_oid)
    rec = _rec(REC_HOME, table.class_record())
    if assign_address:
        reserved = _rec(REC_ASSIGN_ADDRESS, min(len(rec) - 2, 0x7FFF).to_bytes(2, "little"))
        self._data(RVHF_INSERT, page, slot, redo=reserved, rectype="LOG_UNDOREDO_DATA")
        lsa = _update_record(self, page, slot, reserved, rec)
    else:
        lsa = self._data(RVHF_INSERT, page, slot, redo=rec, rectype="LOG_UNDOREDO_DATA")
    if statement is not None:
        _ddl(self, DDL_CREATE, table.class_oid, statement)
    return lsa


def _alter_table(
    self: Transaction,
    old: Table,
    new: Table,
    statement: Optional[str] = None,
    relocate_to=None,
) -> int:
    """ALTER TABLE: the class record updated where it lives (``RVHF_UPDATE``, undo = old record,
    redo = new record, a DIFF record when the engine would write one), then the DDL supplemental
    record when ``statement`` is given.

    ``relocate_to=(page, slot)``: the new record no longer fits its page and moves, as
    ``heap_update_home`` moves it: ``RVHF_INSERT_NEWHOME`` of ``[REC_NEWHOME][new record]`` at
    that slot, then the home slot updated to ``[REC_RELOCATION][OID of the new home]``;
    ``new.home`` is set. A relocated record (``old.home``) is updated at its new home."""
    if old.class_oid != new.class_oid:
        raise ValueError("ALTER keeps the class OID")
    page, slot = _class_slot(new.class_oid)
    before, after = old.class_record(), new.class_record()
    if old.home is not None:
        new.home = old.home
        lsa = _update_record(self, *old.home, _rec(REC_NEWHOME, before), _rec(REC_NEWHOME, after))
    elif relocate_to is not None:
        np, ns = relocate_to
        self._data(
            RVHF_INSERT_NEWHOME, np, ns, redo=_rec(REC_NEWHOME, after), rectype="LOG_UNDOREDO_DATA"
        )
        forward = _rec(REC_RELOCATION, _native_oid(cdc_oid(0, np, ns)))
        lsa = _update_record(self, page, slot, _rec(REC_HOME, before), forward)
        new.home = (np, ns)
    else:
        lsa = _update_record(self, page, slot, _rec(REC_HOME, before), _rec(REC_HOME, after))
    if statement is not None:
        _ddl(self, DDL_ALTER, new.class_oid, statement)
    return lsa


def _insert_row(
    self: Transaction,
    class_oid: int,
    representation,
    values_json,
    page: int,
    slot: int,
    row: Optional[bytes] = None,
) -> bytes:
    """INSERT of a typed row, logged as :meth:`Transaction.insert` logs it (``RVHF_MVCC_INSERT``
    with the compacted MVCC header, then the INSERT supplemental record). ``representation`` is
    ``(repid, columns)`` (e.g. ``Table.representation()``), ``values_json`` the column values as
    JSON texts (see :func:`typed_row`), or ``row`` the row already encoded with this
    transaction's MVCC id. Returns the row as the heap holds it (the event's after image)."""
    if row is None:
        row = typed_row(representation, values_json, mvccid=self.mvccid)
    compact = REC_HOME.to_bytes(2, "little") + row[:8] + row[16:]
    at = self._data(RVHF_MVCC_INSERT, page, slot, redo=compact)
    s = self._supplement("insert", _native_oid(class_oid) + _raw_lsa(at))
    self.events.append(
        (
            s,
            {
                "op": "insert",
                "class_oid": class_oid,
                "row_oid": cdc_oid(0, page, slot),
                "before_image": None,
                "after_image": row,
            },
        )
    )
    return row


# Appended here rather than in the class body, with the typed-table support they need.
Transaction.create_table = _create_table  # type: ignore[attr-defined]
Transaction.alter_table = _alter_table  # type: ignore[attr-defined]
Transaction.insert_row = _insert_row  # type: ignore[attr-defined]
