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
