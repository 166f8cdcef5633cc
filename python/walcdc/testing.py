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
from typing import Any, Dict, Optional, Union

from walcdc import _native

__all__ = ["LogWriter", "RECORD_TYPES", "type_number"]

#: Record type numbers by name (`LOG_RECTYPE`).
RECORD_TYPES: Dict[str, int] = {
    "LOG_UNDOREDO_DATA": 2,
    "LOG_UNDO_DATA": 3,
    "LOG_REDO_DATA": 4,
    "LOG_DBEXTERN_REDO_DATA": 5,
    "LOG_POSTPONE": 6,
    "LOG_RUN_POSTPONE": 7,
    "LOG_COMPENSATE": 8,
    "LOG_COMMIT_WITH_POSTPONE": 14,
    "LOG_COMMIT_WITH_POSTPONE_OBSOLETE": 15,
    "LOG_COMMIT": 17,
    "LOG_SYSOP_START_POSTPONE": 18,
    "LOG_SYSOP_END": 20,
    "LOG_ABORT": 22,
    "LOG_START_CHKPT": 25,
    "LOG_END_CHKPT": 26,
    "LOG_SAVEPOINT": 27,
    "LOG_2PC_PREPARE": 28,
    "LOG_2PC_START": 29,
    "LOG_2PC_COMMIT_DECISION": 30,
    "LOG_2PC_ABORT_DECISION": 31,
    "LOG_2PC_COMMIT_INFORM_PARTICPS": 32,
    "LOG_2PC_ABORT_INFORM_PARTICPS": 33,
    "LOG_2PC_RECV_ACK": 34,
    "LOG_END_OF_LOG": 35,
    "LOG_DUMMY_HEAD_POSTPONE": 36,
    "LOG_DUMMY_CRASH_RECOVERY": 37,
    "LOG_REPLICATION_DATA": 39,
    "LOG_REPLICATION_STATEMENT": 40,
    "LOG_DIFF_UNDOREDO_DATA": 43,
    "LOG_DUMMY_HA_SERVER_STATE": 44,
    "LOG_DUMMY_OVF_RECORD": 45,
    "LOG_MVCC_UNDOREDO_DATA": 46,
    "LOG_MVCC_UNDO_DATA": 47,
    "LOG_MVCC_REDO_DATA": 48,
    "LOG_MVCC_DIFF_UNDOREDO_DATA": 49,
    "LOG_SYSOP_ATOMIC_START": 50,
    "LOG_DUMMY_GENERIC": 51,
    "LOG_SUPPLEMENTAL_INFO": 52,
}


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
    """

    def __init__(
        self,
        page_size: int = 4096,
        active_pages: int = 64,
        archive_pages: int = 16,
        db_creation: int = 1_700_000_000,
        prefix: str = "walcdc",
        release: str = "11.4.0",
    ):
        self._w = _native.LogWriter(
            page_size, active_pages, archive_pages, db_creation, prefix, release
        )

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

    def finish(self, directory: Union[str, os.PathLike[str]]) -> Dict[str, Any]:
        """Writes the volumes; returns their paths, the end-of-log LSA and the record LSAs."""
        os.makedirs(directory, exist_ok=True)
        return dict(self._w.finish(os.fspath(directory)))


# --- workloads: transactions written the way CUBRID logs them, with the changes they make ---

RVHF_MVCC_INSERT = 43
RVHF_MVCC_DELETE_REC_HOME = 44
RVHF_UPDATE_NOTIFY_VACUUM = 49
REC_HOME = 2
SUPPLEMENT = {"tran_user": 0, "undo_record": 1, "ddl": 2, "insert": 3, "update": 4, "delete": 5}
SYSOP_END_ABORT = 1


def cdc_oid(volid: int, pageid: int, slotid: int) -> int:
    """An OID in CUBRID's CDC API packing (the form of ``class_oid`` / ``row_oid``)."""
    return (pageid & 0xFFFFFFFF) | ((slotid & 0xFFFF) << 32) | ((volid & 0xFFFF) << 48)


def _native_oid(oid: int) -> bytes:
    page = oid & 0xFFFFFFFF
    slot = (oid >> 32) & 0xFFFF
    vol = (oid >> 48) & 0xFFFF
    return page.to_bytes(4, "little") + slot.to_bytes(2, "little") + vol.to_bytes(2, "little")


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

    def update(self, class_oid: int, old: bytes, new: bytes, page: int, slot: int) -> None:
        rec = REC_HOME.to_bytes(2, "little")
        at = self._data(RVHF_UPDATE_NOTIFY_VACUUM, page, slot, undo=rec + old, redo=rec + new)
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
