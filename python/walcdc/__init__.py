"""walcdc: change data capture for CUBRID, read offline from its write-ahead log volumes.

>>> import walcdc
>>> log = walcdc.open_log(walcdc.samples.sample_path())
>>> reader = log.records()
>>> table = reader.read_all()
>>> table.num_rows > 0
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Each name is loaded from its module on first use: ``import walcdc`` (which every
# ``walcdc.<module>`` import runs first) does not wait for pyarrow and the native module, so
# the command line guards its own imports, and a Ctrl-C in its first instant ends it quietly.
_EXPORTS = {
    "__version__": "walcdc._native",
    "ReaderState": "walcdc._native",
    "ChangeStream": "walcdc.changes",
    "Cursor": "walcdc.changes",
    "TableChangeStream": "walcdc.changes",
    "read_changes": "walcdc.changes",
    "EncryptedPagesSkipped": "walcdc.logset",
    "LogSet": "walcdc.logset",
    "RecordsBeyondEndSkipped": "walcdc.logset",
    "UnfinishedTransactionDropped": "walcdc.logset",
    "UnplacedRecordsSkipped": "walcdc.logset",
    "UsersNotInLog": "walcdc.logset",
    "PartialTransactionsSkipped": "walcdc.logset",
    "PartialTransactionsEmitted": "walcdc.logset",
    "SchemasUnknown": "walcdc.logset",
    "open_log": "walcdc.logset",
    "read_changes_by_table": "walcdc.table_changes",
    "MirrorError": "walcdc.mirrors",
    "mirror": "walcdc.mirrors",
    "read_table_changes": "walcdc.table_changes",
    **{
        name: "walcdc.errors"
        for name in (
            "BadHeaderError",
            "ChecksumError",
            "CorruptRecordError",
            "EncryptedPageError",
            "InvalidArgumentError",
            "LogError",
            "LogIOError",
            "MismatchedLogSetError",
            "MissingArchiveError",
            "NoSupplementalLogError",
            "OutputError",
            "TruncatedLogError",
        )
    },
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    else:
        # A submodule (walcdc.lsa, walcdc.samples, ...) not imported yet.
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from walcdc import lsa, oid, samples
    from walcdc._native import ReaderState, __version__
    from walcdc.changes import ChangeStream, Cursor, TableChangeStream, read_changes
    from walcdc.errors import (
        BadHeaderError,
        ChecksumError,
        CorruptRecordError,
        EncryptedPageError,
        InvalidArgumentError,
        LogError,
        LogIOError,
        MismatchedLogSetError,
        MissingArchiveError,
        NoSupplementalLogError,
        OutputError,
        TruncatedLogError,
    )
    from walcdc.logset import (
        EncryptedPagesSkipped,
        LogSet,
        PartialTransactionsEmitted,
        PartialTransactionsSkipped,
        RecordsBeyondEndSkipped,
        SchemasUnknown,
        UnfinishedTransactionDropped,
        UnplacedRecordsSkipped,
        UsersNotInLog,
        open_log,
    )
    from walcdc.mirrors import MirrorError, mirror
    from walcdc.table_changes import read_changes_by_table, read_table_changes

__all__ = [
    "__version__",
    "open_log",
    "read_changes",
    "read_table_changes",
    "read_changes_by_table",
    "mirror",
    "ChangeStream",
    "TableChangeStream",
    "Cursor",
    "ReaderState",
    "LogSet",
    "lsa",
    "oid",
    "samples",
    "EncryptedPagesSkipped",
    "UnfinishedTransactionDropped",
    "UnplacedRecordsSkipped",
    "RecordsBeyondEndSkipped",
    "UsersNotInLog",
    "PartialTransactionsSkipped",
    "PartialTransactionsEmitted",
    "SchemasUnknown",
    "LogError",
    "LogIOError",
    "BadHeaderError",
    "MismatchedLogSetError",
    "ChecksumError",
    "TruncatedLogError",
    "MissingArchiveError",
    "MirrorError",
    "NoSupplementalLogError",
    "EncryptedPageError",
    "CorruptRecordError",
    "InvalidArgumentError",
    "OutputError",
]
