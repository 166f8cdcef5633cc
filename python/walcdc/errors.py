"""Exceptions raised by walcdc. Every one names the volume (``file``) and, where one applies,
the log address (``lsa``, order-preserving u64; ``lsa_text`` as ``pageid|offset``)."""

from __future__ import annotations

from typing import Optional

__all__ = [
    "LogError",
    "LogIOError",
    "BadHeaderError",
    "MismatchedLogSetError",
    "ChecksumError",
    "TruncatedLogError",
    "MissingArchiveError",
    "EncryptedPageError",
    "CorruptRecordError",
    "NoSupplementalLogError",
    "InvalidArgumentError",
]


class LogError(Exception):
    """Base class of every error about reading a CUBRID log set."""

    def __init__(self, message: str, file: Optional[str] = None, lsa: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.lsa = lsa

    @property
    def lsa_text(self) -> Optional[str]:
        if self.lsa is None:
            return None
        from walcdc.lsa import format_lsa

        return format_lsa(self.lsa)


class LogIOError(LogError, OSError):
    """A volume could not be opened, listed or mapped."""


class BadHeaderError(LogError):
    """Not a CUBRID log volume (wrong magic, bad header page, impossible page size)."""


class MismatchedLogSetError(LogError):
    """Volumes that do not belong together (another database, overlapping or duplicate archives)."""


class ChecksumError(LogError):
    """A page whose stored checksum does not match its contents."""


class TruncatedLogError(LogError):
    """A volume shorter than its header says, or a record cut off by the end of the files."""


class MissingArchiveError(LogError):
    """A page that only an archive volume can hold, and that archive is not in the set."""


class EncryptedPageError(LogError):
    """A TDE-encrypted page had to be read; pass ``on_encrypted="skip"`` to skip such pages."""


class CorruptRecordError(LogError):
    """A record that cannot be what CUBRID wrote (type, links, lengths or layout)."""


class NoSupplementalLogError(LogError):
    """The log holds no supplemental records (the server ran with ``supplemental_log=0``), so
    change events cannot be produced; set ``supplemental_log=1`` in cubrid.conf."""


class InvalidArgumentError(LogError, ValueError):
    """An argument that does not fit the log (an LSA outside it, an unknown option)."""
