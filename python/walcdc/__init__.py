"""walcdc: change data capture for CUBRID, read offline from its write-ahead log volumes.

>>> import walcdc
>>> log = walcdc.open_log(walcdc.samples.sample_path())
>>> reader = log.records()
>>> table = reader.read_all()
>>> table.num_rows > 0
True
"""

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
    RecordsBeyondEndSkipped,
    UnfinishedTransactionDropped,
    UnplacedRecordsSkipped,
    open_log,
)
from walcdc.table_changes import read_changes_by_table, read_table_changes

__all__ = [
    "__version__",
    "open_log",
    "read_changes",
    "read_table_changes",
    "read_changes_by_table",
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
    "LogError",
    "LogIOError",
    "BadHeaderError",
    "MismatchedLogSetError",
    "ChecksumError",
    "TruncatedLogError",
    "MissingArchiveError",
    "NoSupplementalLogError",
    "EncryptedPageError",
    "CorruptRecordError",
    "InvalidArgumentError",
    "OutputError",
]
